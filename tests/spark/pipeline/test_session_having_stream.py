"""Sessions cut as Stream Analytics cuts them, and ``having``, on the streaming path: a
Structured Streaming query stopped and restarted from its checkpoint with more input equals
the batch path, and a fresh lineage started at ``T`` that reads back the look-back emits
exactly the batch path's rows after ``T`` — for sessions, whose bursts outlast the check
points, only because the look-back reaches the burst's start (2 × max + gap)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import functions as F

from platform_support import fill
from support import assert_stream_is_the_batch_path_and_a_replay_its_tail
from tidegate.eventtime.durations import parse_time_us
from tidegate.jobspec import load_spec, parse_spec
from tidegate.spark.pipeline.runner import run_batch, run_stream
from tidegate.spark.tools.compare import compare

pytestmark = [pytest.mark.spark, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[3]
MIN = 60_000_000


def sessions():
    """The sessions example, shorter: a device reads every few seconds, so a 30 s gap rarely
    ends a burst and the 2-minute check points cut most sessions."""
    job = load_spec(REPO / "jobs" / "device_sessions.yaml").to_dict()
    window = job["window"] | {"gap": "30s", "max_duration": "2m"}
    return parse_spec(job | {"window": window, "policy": job["policy"] | {"late_arrival_tolerance": "30s"}})


def hot_minutes():
    """The hot-minutes example, at a threshold the generator's devices (21 °C ± 3) straddle."""
    job = load_spec(REPO / "jobs" / "hot_minutes.yaml").to_dict()
    return parse_spec(job | {"policy": job["policy"] | {"late_arrival_tolerance": "30s"}, "having": HOT})


HOT = "avg_temperature > 21 AND readings >= 3"


def run(spark, spec, tmp_path) -> int:
    """Twenty minutes of input streamed, the query restarted, twenty more; the last arrival."""
    event_log = tmp_path / "event-log"
    start = parse_time_us("2026-01-01T00:00:00Z")
    fill(event_log, 2400, seed=5, start_us=start)  # 2 events a second
    first = run_stream(spark, spec, event_log, tmp_path / "run", extra_options={"maxEventsPerBatch": "300"})
    fill(event_log, 2400, seed=6, start_us=start + 20 * MIN + 1_000_000)
    second = run_stream(spark, spec, event_log, tmp_path / "run", extra_options={"maxEventsPerBatch": "450"})
    assert first.batches + second.batches >= 4
    return start + 40 * MIN


def test_sessions_stream_equal_the_batch_path_and_a_replay_rebuilds_them(spark, tmp_path):
    spec = sessions()
    assert spec.lookback_us == (2 * 2 * MIN + 30_000_000) + 30_000_000 + 5 * MIN
    last = run(spark, spec, tmp_path)
    reference = assert_stream_is_the_batch_path_and_a_replay_its_tail(
        spark, spec, tmp_path / "event-log", tmp_path, last - 15 * MIN, time_column="window_end", min_after=10
    )
    lengths = reference.select((F.unix_micros("window_end") - F.unix_micros("window_start")).alias("us"))
    assert lengths.where(F.col("us") > 2 * MIN).count() > 0  # sessions through a check point
    assert lengths.agg(F.max("us")).first()[0] <= 4 * MIN


def test_having_keeps_exactly_the_windows_whose_aggregates_pass_in_stream_and_batch(spark, tmp_path):
    spec = hot_minutes()
    last = run(spark, spec, tmp_path)
    kept = assert_stream_is_the_batch_path_and_a_replay_its_tail(
        spark, spec, tmp_path / "event-log", tmp_path, last - 15 * MIN, time_column="window_end", min_after=3
    )
    every = run_batch(spark, replace_having(spec, None), tmp_path / "event-log", tmp_path / "every").paths
    all_windows = spark.read.parquet(str(every.output))
    passing = all_windows.where(F.expr(HOT))
    assert 0 < passing.count() < all_windows.count()  # some windows go, some stay
    assert compare(passing, kept).equal  # averages over all of a window's readings, not a batch's


def replace_having(spec, having):
    return parse_spec(
        {k: v for k, v in spec.to_dict().items() if k != "having"} | ({"having": having} if having else {})
    )
