"""The temporal join through the engine: the golden transcript in one batch and in several
(a new driver half way), and the example job's stream equal to the batch path, across a
restart, random micro-batch sizes and a replay from ``T − L``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from pyspark.sql import functions as F
from platform_support import fill_orders
from support import TRANSCRIPTS

from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.hub import EventLog
from tidegate.jobspec import load_spec, parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine
from tidegate.spark.pipeline.runner import run_batch, run_stream
from tidegate.spark.tools.compare import compare

pytestmark = pytest.mark.spark
GOLDEN = yaml.safe_load((TRANSCRIPTS / "join_golden.yaml").read_text())
RAW = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
REPO = Path(__file__).resolve().parents[3]
DAY = 86_400_000_000
MIN = 60_000_000


def golden_spec():
    lo, hi = GOLDEN["bound"]
    job = load_spec(REPO / "jobs" / "order_payments.yaml").to_dict()
    return parse_spec(job | {
        "payload": {"kind": "string", "orderId": "string", "eventTime": "string"},
        "join": job["join"] | {"within": f"DATEDIFF(minute, orders, payments) BETWEEN {lo} AND {hi}"},
        "select": {"left_id": "orders.id", "right_id": "payments.id"},
    } | {"payload": {"kind": "string", "orderId": "string", "id": "string", "eventTime": "string"}})


def golden_rows():
    """The transcript's events as the log holds them: per partition in row order (on time)."""
    rows, next_offset = [], {}
    for event_id, side, order, time, partition in GOLDEN["events"]:
        at = f"{GOLDEN['date']}T{time}:00Z"
        offset = next_offset.get(partition, 0)
        next_offset[partition] = offset + 1
        payload = {"kind": "order" if side == "left" else "payment", "orderId": order, "id": event_id, "eventTime": at}
        rows.append((partition, offset, parse_time_us(at), None, json.dumps(payload)))
    return rows


def run_engine(spark, root, batches):
    engine = Engine(spark, golden_spec(), JobPaths(root), [0, 1])
    for batch_id, (batch, clock) in enumerate(batches):
        if batch_id == len(batches) // 2 and len(batches) > 2:
            engine = Engine(spark, golden_spec(), JobPaths(root), [0, 1])  # a new driver
        raw = spark.createDataFrame(batch, RAW).select(
            "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload")
        engine.process_batch(raw, batch_id, clock)
    if len(batches) == 1:  # SPEC §5: the metrics show each input, per log partition
        counts = engine.reports[0].counts
        assert {p: counts[p]["inputs"] for p in (0, 1)} == {0: {"orders": 5, "payments": 1},
                                                            1: {"orders": 0, "payments": 6}}
    out = spark.read.parquet(str(engine.paths.output))
    order = ["system_time", "partition", "offset", "right_partition", "right_offset"]
    return [[r.left_id, r.right_id, format_time_us(r.out_us)[11:16]]
            for r in out.withColumn("out_us", F.unix_micros("system_time")).orderBy(*order).collect()]


def test_the_engine_gives_the_golden_transcripts_rows_in_one_batch_and_in_several(spark, tmp_path):
    rows = golden_rows()
    expected = [[left, right, time] for left, right, time in GOLDEN["left_rows"]]
    end = max(r[2] for r in rows) + DAY
    assert run_engine(spark, tmp_path / "whole", [(rows, end)]) == expected
    # the transcript's micro-batches, each closed at its last arrival (the job watermark is
    # the arrival clock: every event on time); a new driver takes over for the last two
    by_id = {json.loads(r[4])["id"]: r for r in rows}
    batches = [[by_id[i] for i in b["events"]] for b in GOLDEN["batches"]]
    several = [(batch, max(r[2] for r in batch)) for batch in batches] + [([], end)]
    assert run_engine(spark, tmp_path / "several", several) == expected


def test_the_stream_across_a_restart_and_a_replay_from_t_minus_lookback_equal_the_batch_path(spark, tmp_path):
    spec = load_spec(REPO / "jobs" / "order_payments.yaml")
    hub = tmp_path / "hub"
    start = parse_time_us("2026-01-01T00:00:00Z")
    last = fill_orders(hub, 120, seed=3, start_us=start)
    first = run_stream(spark, spec, hub, tmp_path / "run", extra_options={"maxEventsPerBatch": "70"})
    last = fill_orders(hub, 120, seed=4, start_us=last + 1_000_000)
    second = run_stream(spark, spec, hub, tmp_path / "run", extra_options={"maxEventsPerBatch": "110"})
    assert first.batches + second.batches >= 4
    batch = run_batch(spark, spec, hub, tmp_path / "batch")
    out = spark.read.parquet(str(tmp_path / "run" / "output"))
    reference = spark.read.parquet(str(batch.paths.output))
    assert reference.where("paid IS NULL").count() > 5  # unpaid orders
    assert reference.where("paid IS NOT NULL").count() > 50
    diff = compare(reference, out)
    assert diff.equal, diff
    # a fresh lineage starting at T reads back L and emits exactly the rows after T
    t = last - 40 * MIN
    replay = run_batch(spark, spec, hub, tmp_path / "replay", from_arrival_us=t - spec.lookback_us, emit_after_us=t)
    after_t = reference.where(F.unix_micros("system_time") > t)
    assert after_t.count() > 20
    diff = compare(after_t, spark.read.parquet(str(replay.paths.output)))
    assert diff.equal, diff
