"""``watermark: {percentile: p}`` through the engine: windows close on the time most units
have reached, earlier than on the heuristic watermark, and every kept event that falls
behind it is in the side output and the counts — lossy, never silent. (Without the option
nothing is ever behind: tests/spark/pipeline/test_engine.py holds those jobs to the core.)"""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql import functions as F

from tidegate.inputs.event_log.generator import GeneratorConfig
from tidegate.inputs.event_log.traffic import synthesize
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine

pytestmark = pytest.mark.spark
RAW = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
SPEC = {
    "name": "fleet",
    "version": 1,
    "payload": {"deviceId": "string", "eventTime": "string", "temperature": "double", "humidity": "double"},
    "timestamp_by": "eventTime",
    "over": "deviceId",
    "policy": {"late_arrival_tolerance": "2m", "out_of_order_tolerance": "30s"},
    "window": {"kind": "tumbling", "size": "1m"},
    "aggregates": {"readings": "count(*)"},
}


def batches():
    """The demo's kind of traffic (late and early readings included) in 4 micro-batches by
    arrival, then an empty batch whose clock closes every window."""
    t = synthesize(
        GeneratorConfig(
            devices=12, partitions=3, events=1_600, seed=3, rate_per_s=4.0, late_fraction=0.05, malformed_fraction=0.0
        ),
        start_us=1_767_225_600_000_000,
    )
    offsets = np.zeros(len(t), dtype=np.int64)
    for p in np.unique(t.partition):
        mine = np.flatnonzero(t.partition == p)
        offsets[mine] = np.arange(len(mine))
    rows = list(
        zip(
            t.partition.tolist(),
            offsets.tolist(),
            t.arrival_us.tolist(),
            t.keys(np.arange(len(t))),
            t.payloads(np.arange(len(t))),
            strict=True,
        )
    )
    cuts = np.array_split(np.arange(len(rows)), 4)
    out = [([rows[i] for i in cut], int(t.arrival_us[cut[-1]])) for cut in cuts]
    return out + [([], int(t.arrival_us[-1]) + 86_400_000_000)]


def run(spark, root, spec):
    engine = Engine(spark, spec, JobPaths(root), [0, 1, 2])
    for batch_id, (batch, clock) in enumerate(batches()):
        raw = spark.createDataFrame(batch, RAW).select(
            "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload"
        )
        engine.process_batch(raw, batch_id, clock)
    return engine


def test_a_percentile_watermark_emits_sooner_and_every_event_behind_it_is_set_aside_and_counted(spark, tmp_path):
    early = run(spark, tmp_path / "p50", parse_spec(SPEC | {"watermark": {"percentile": 50}}))
    # sooner: the heuristic frontier of these fleet-wide windows is the least of the partitions'
    # arrival terms (each beside its counts); the percentile one is at least as far, and further
    heuristic = [min(c["watermark_us"] for c in r.counts.values()) for r in early.reports[:-1]]
    percentile = [r.job_watermark_us for r in early.reports[:-1]]
    assert all(e >= h for h, e in zip(heuristic, percentile, strict=True)) and any(
        e > h for h, e in zip(heuristic, percentile, strict=True)
    )
    # lossy, never silent: each kept event is in exactly one window count or in the side output
    kept = spark.read.parquet(str(early.paths.audit)).where("action != 'dropped'").count()
    counted = spark.read.parquet(str(early.paths.output)).agg(F.sum("readings")).first()[0]
    aside = spark.read.parquet(str(early.paths.behind_watermark))
    assert aside.count() > 0 and counted + aside.count() == kept
    assert aside.where("system_time >= watermark").count() == 0
    per_partition = sum(c["behind_watermark"] for r in early.reports for c in r.counts.values())
    assert per_partition == aside.count()
