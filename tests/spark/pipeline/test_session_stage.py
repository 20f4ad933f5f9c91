"""Session windows through the engine: the golden sessions transcript in one batch, in three
micro-batches with a restart in between, and (short cases) one event per batch — every cut
gives the core's rows. A session cut once it has lasted its maximum duration depends on where
its burst began; the buffer carries that past the events that showed it."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from support import SESSIONS_GOLDEN, session_times_us
from tidegate.eventtime.durations import format_time_us
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine
from tidegate.spark.pipeline.window_stage import SESSION_FROM

pytestmark = pytest.mark.spark

RAW = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
DAY = 86_400_000_000


def session_spec(window: dict):
    return parse_spec(
        {
            "name": "sessions-golden",
            "version": 1,
            "payload": {"deviceId": "string", "eventTime": "string"},
            "timestamp_by": "eventTime",
            "over": "deviceId",
            "window": window,
            "group_by": ["deviceId"],
            "aggregates": {"n": "count(*)"},
        }
    )


def run(spark, root, spec, times, cuts, restart_at=None):
    """Events on time (arrival = event time); batch i holds arrivals before ``cuts[i]``, with
    that as its clock; the last batch the rest, with a clock a day later."""
    rows = [
        (0, i, t, "d1", json.dumps({"deviceId": "d1", "eventTime": format_time_us(t)})) for i, t in enumerate(times)
    ]
    engine = Engine(spark, spec, JobPaths(root), [0])
    lo = -(1 << 62)
    for batch_id, hi in enumerate([*cuts, times[-1] + DAY]):
        if restart_at == batch_id:  # a new driver, from the checkpointed state
            engine = Engine(spark, spec, JobPaths(root), [0])
        batch = [r for r in rows if lo <= r[2] < hi]
        raw = spark.createDataFrame(batch, RAW).select(
            "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload"
        )
        engine.process_batch(raw, batch_id, hi)
        lo = hi
    out = spark.read.parquet(str(engine.paths.output)).select(
        F.unix_micros("window_start").alias("s"), F.unix_micros("window_end").alias("e"), "n"
    )
    return sorted([format_time_us(r["s"])[11:16], format_time_us(r["e"])[11:16], r["n"]] for r in out.collect())


@pytest.mark.parametrize("case", SESSIONS_GOLDEN["sessions"], ids=lambda c: c["name"])
def test_the_engine_gives_the_golden_sessions_however_the_stream_is_cut(spark, tmp_path, case):
    spec = session_spec(case["window"])
    times = session_times_us(case)
    assert run(spark, tmp_path / "whole", spec, times, []) == case["expect"]
    thirds = [times[len(times) // 3], times[2 * len(times) // 3]] if len(times) >= 6 else [times[1], times[2]]
    assert run(spark, tmp_path / "thirds", spec, times, thirds, restart_at=2) == case["expect"]
    if len(times) <= 3:
        assert run(spark, tmp_path / "each", spec, times, times[1:]) == case["expect"]


def test_the_buffer_carries_where_a_burst_began_only_for_sessions_that_need_it(spark, tmp_path):
    """After the session 12:10–13:00 closed, its events left: the ones still buffered carry
    12:10, whence the next cut at 13:30 (a fresh start at 13:02 would run to 14:00). Sessions
    cut at every check point keep the buffer they always had."""
    case = next(c for c in SESSIONS_GOLDEN["sessions"] if c["name"] == "longer_than_max")
    times = session_times_us(case)
    cut = times[40]  # 13:30: the first session closed, the second not yet
    run(spark, tmp_path / "sa", session_spec(case["window"]), times, [cut])
    after_first_batch = JobPaths(tmp_path / "sa").state / "0" / "buffer"
    held = spark.read.parquet(str(after_first_batch)).select("system_us", SESSION_FROM).collect()
    assert held and {format_time_us(r[SESSION_FROM])[11:16] for r in held} == {"12:10"}
    assert min(format_time_us(r["system_us"])[11:16] for r in held) == "13:02"

    old = session_spec(case["window"] | {"cut": "every_check_point"})
    run(spark, tmp_path / "old", old, times, [cut])
    assert SESSION_FROM not in spark.read.parquet(str(JobPaths(tmp_path / "old").state / "0" / "buffer")).columns
