"""semantics §2's golden case through the streaming engine itself: the audit of every event —
action, reason, system time, watermark — equals the transcript, in one batch and with one
event per micro-batch (and a new driver half way), with the policy on the JVM and in
Python workers."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from support import load_golden
from tidegate.eventtime.durations import parse_time_us
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine

pytestmark = pytest.mark.spark
GOLDEN = load_golden()
RAW = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
# a job spec's early-arrival window is fixed at 5 minutes (semantics §1): the variant without
# one is the core's alone (tests/eventtime/test_policy.py)
VARIANTS = [v for v in GOLDEN.variants if v.policy.early_arrival_window_us is not None]
RUNNERS = ["jvm", "python"]  # where the policy runs (tidegate.spark.pipeline.policy_jvm)


def spec_for(variant):
    args = {
        "out_of_order_tolerance": f"{variant.policy.out_of_order_tolerance_us // 60_000_000}m",
        "late_arrival_tolerance": f"{variant.policy.late_arrival_tolerance_us // 60_000_000}m",
    }
    return parse_spec(
        {
            "name": "golden",
            "version": 1,
            "payload": {"device": "string", "eventTime": "string"},
            "timestamp_by": "eventTime",
            "over": "device" if variant.over else None,
            "policy": args,
            "window": {"kind": "tumbling", "size": "5m"},
            "group_by": ["device"],
            "aggregates": {"events": "count(*)"},
        }
    )


def rows():
    out = []
    for offset, (event, arrival, device) in enumerate(GOLDEN.events):
        payload = json.dumps({"device": device, "eventTime": f"{GOLDEN.date}T{event}:00Z"})
        out.append((0, offset, parse_time_us(f"{GOLDEN.date}T{arrival}:00Z"), device, payload))
    return out


def audit_of(spark, spec, root, batches, runner):
    """Run ``batches`` (lists of rows) through the engine, each batch's clock its last
    arrival; a new engine (driver) takes over half way. The audit, in offset order."""
    engine = Engine(spark, spec, JobPaths(root), [0], policy_runner=runner)
    for batch_id, batch in enumerate(batches):
        if batch_id == len(batches) // 2 and len(batches) > 1:
            engine = Engine(spark, spec, JobPaths(root), [0], policy_runner=runner)
        raw = spark.createDataFrame(batch, RAW).select(
            "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload"
        )
        engine.process_batch(raw, batch_id, max(r[2] for r in batch))
    audit = spark.read.parquet(str(engine.paths.audit)).orderBy("offset")
    return [
        (r["action"], r["reason"] or "", r["system_time"], r["watermark"])
        for r in audit.select(
            "action",
            "reason",
            F.date_format("system_time", "HH:mm").alias("system_time"),
            F.date_format("watermark", "HH:mm").alias("watermark"),
        ).collect()
    ]


def expected(variant):
    return [(action, reason, system or None, watermark) for action, reason, system, watermark in variant.expect]


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_the_engine_audits_the_golden_case_as_the_spec_table_says(spark, tmp_path, variant, runner):
    assert audit_of(spark, spec_for(variant), tmp_path / "whole", [rows()], runner) == expected(variant)


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_the_engine_gives_the_same_audit_with_one_event_per_batch(spark, tmp_path, variant, runner):
    single = [[r] for r in rows()]
    assert audit_of(spark, spec_for(variant), tmp_path / "single", single, runner) == expected(variant)
