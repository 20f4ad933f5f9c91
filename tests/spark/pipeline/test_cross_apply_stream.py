"""cross_apply then a window: the rows an event gives are judged as one event, so the windows
are the same whatever the cuts — one event per micro-batch, random cuts with a restart and a
re-run batch, the batch path — and a fresh lineage started at ``T`` rebuilds those after ``T``.

    event (p, o) at t ── policy ──▶ kept at s ── cross_apply ──▶ (p, o, 0) … (p, o, n−1), all at s
                                                               └─▶ tumbling 1 min by device, sensor
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from pyspark.sql import functions as F

from support import assert_stream_is_the_batch_path_and_a_replay_its_tail
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.inputs.event_log import EventLog
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine
from tidegate.spark.pipeline.runner import run_stream
from tidegate.spark.tools.compare import compare

pytestmark = [pytest.mark.spark, pytest.mark.slow]
PARTITIONS = 2
START = parse_time_us("2026-01-01T00:00:00Z")
S, MIN = 1_000_000, 60_000_000
RAW = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
SPEC = parse_spec({
    "name": "batched-readings", "version": 1,
    "payload": {"deviceId": "string", "eventTime": "string", "readings": "array<struct<sensor:string,value:double>>"},
    "timestamp_by": "eventTime", "over": "deviceId",
    "policy": {"out_of_order_tolerance": "5s", "late_arrival_tolerance": "20s"},
    "cross_apply": {"name": "r", "elements": "readings", "max_rows": 4},
    "filter": "r.ArrayValue.value IS NOT NULL",
    "window": {"kind": "tumbling", "size": "1m"},
    "group_by": ["deviceId", {"sensor": "r.ArrayValue.sensor"}],
    "aggregates": {"n": "count(*)", "total": "sum(r.ArrayValue.value)", "last_index": "max(r.ArrayIndex)"},
})  # fmt: skip
# the same windows kept as mergeable parts (count and max of a column: window_partials)
PARTS = parse_spec(SPEC.to_dict() | {"aggregates": {"n": "count(*)", "last_index": "max(cross_apply_index)"}})


def events(seed: int, n: int, start_us: int, every_us: int = 2 * S) -> list[tuple]:
    """Raw rows: each event a device's batch of 0–5 readings (some NULL, some not JSON, some
    over the bound of 4), arriving up to 40 s late — some beyond the tolerance."""
    rng = np.random.default_rng(seed)
    rows, offsets = [], [0] * PARTITIONS
    for i in range(n):
        at = start_us + i * every_us
        count = int(rng.integers(0, 6))
        readings = [
            {"sensor": f"s{int(rng.integers(0, 3))}", "value": float(rng.integers(0, 50))} for _ in range(count)
        ]
        payload = json.dumps({"deviceId": f"d{i % 4}", "eventTime": format_time_us(at),
                              "readings": None if i % 11 == 0 else readings})  # fmt: skip
        if i % 37 == 0:
            payload = "{not json"
        p = i % PARTITIONS
        rows.append((p, offsets[p], at + int(rng.integers(0, 40)) * S, None, payload))
        offsets[p] += 1
    for p in range(PARTITIONS):  # a partition's arrivals never go back
        mine = sorted((r for r in rows if r[0] == p), key=lambda r: r[1])
        floor = 0
        for r in mine:
            floor = max(floor, r[2])
            rows[rows.index(r)] = (r[0], r[1], floor, r[3], r[4])
    return sorted(rows, key=lambda r: (r[2], r[0], r[1]))


def run_cut(spark, spec, rows, root, cuts: list[int], final_clock: int, restart_at=None, rerun=None):
    """Batch i holds arrivals in [cut_{i-1}, cut_i), closed with clock cut_i; the output."""
    engine = Engine(spark, spec, JobPaths(root), list(range(PARTITIONS)))
    lo = -(1 << 62)
    for batch_id, hi in enumerate([*cuts, final_clock]):
        part = [r for r in rows if lo <= r[2] < hi] if batch_id < len(cuts) else [r for r in rows if r[2] >= lo]
        raw = spark.createDataFrame(part, RAW).select(
            "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload"
        )
        if restart_at == batch_id:  # a new driver, from the checkpointed state
            engine = Engine(spark, spec, JobPaths(root), list(range(PARTITIONS)))
        engine.process_batch(raw, batch_id, hi)
        if rerun == batch_id:  # the same batch again, as after a crash before Spark's commit
            engine.process_batch(raw, batch_id, hi)
        lo = hi
    return spark.read.parquet(str(engine.paths.output))


@pytest.mark.parametrize("spec", [SPEC, PARTS], ids=["rows", "parts"])
def test_windows_over_cross_applied_rows_are_the_same_one_event_per_batch_and_in_random_cuts(spark, tmp_path, spec):
    rows = events(seed=3, n=48, start_us=START)
    final = max(r[2] for r in rows) + 10 * MIN
    whole = run_cut(spark, spec, rows, tmp_path / "whole", [], final)
    assert whole.where(F.col("n") > 1).count() > 0 and whole.agg(F.max("last_index")).first()[0] == 3
    arrivals = sorted({r[2] for r in rows})
    one_each = run_cut(spark, spec, rows, tmp_path / "one-each", [a + 1 for a in arrivals], final)
    assert compare(whole, one_each).equal
    rng = np.random.default_rng(11)
    cuts = sorted(int(c) for c in rng.choice(arrivals, 6, replace=False) + 1)
    random_cuts = run_cut(spark, spec, rows, tmp_path / "random", cuts, final, restart_at=3, rerun=2)
    assert compare(whole, random_cuts).equal


def test_the_stream_across_a_restart_is_the_batch_path_and_a_replay_rebuilds_its_tail(spark, tmp_path):
    event_log = tmp_path / "event-log"
    log = EventLog.create(event_log, partitions=PARTITIONS, clock="manual")
    first, second = events(seed=5, n=600, start_us=START), events(seed=6, n=600, start_us=START + 21 * MIN)
    for rows in (first, second):
        for p in range(PARTITIONS):
            mine = [r for r in rows if r[0] == p]
            log.append(p, [None] * len(mine), [r[4] for r in mine], [r[2] for r in mine])
        run = run_stream(spark, SPEC, event_log, tmp_path / "run", extra_options={"maxEventsPerBatch": "150"})
        assert run.batches >= 2
    last = max(r[2] for r in second)
    assert_stream_is_the_batch_path_and_a_replay_its_tail(
        spark, SPEC, event_log, tmp_path, last - 15 * MIN, time_column="window_end", min_after=10
    )
