"""The ``tidegate`` source under real Spark: exactly once, limits, the clock in the offset log, retention.

Every streaming test runs twice: through the JVM reader jobs use and through the Python
data source (the fallback without a JDK); both must behave the same.
Every event log here runs on a manual clock, so each batch's recorded clock is known exactly.
Rows are compared as sets of ``(partition, offset, arrival µs, key, payload)``.
"""

from __future__ import annotations

import json

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.inputs.event_log import EventLog, RetentionError
from tidegate.lineage.offsets import batch_offsets
from tidegate.spark.pipeline.java_source import READER_ENV
from tidegate.spark.pipeline.read import read_log, read_log_stream
from tidegate.spark.pipeline.source import SOURCE_HEADERS_SCHEMA, SOURCE_SCHEMA
from tidegate.spark.tools.passthrough import run_passthrough

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True, params=["jvm", "python"])
def reader(request, monkeypatch):
    """Which reader ``read_log_stream``, ``read_log`` (and so the passthrough job) use in this test."""
    monkeypatch.setenv(READER_ENV, request.param)
    return request.param


T0 = parse_time_us("2026-03-01T12:00:00Z")
SECOND = 1_000_000


def append_events(log: EventLog, per_partition: int, first_second: int) -> None:
    """``per_partition`` events per partition, one a second from ``first_second`` after T0
    (partition p shifted by p ms), then the clock moved past them."""
    for p in range(log.partitions):
        seconds = range(first_second, first_second + per_partition)
        log.append(
            p,
            [f"dev{i % 4}" for i in seconds],
            [json.dumps({"p": p, "s": s}) for s in seconds],
            arrival_times=[T0 + s * SECOND + p * 1000 for s in seconds],
        )
    log.advance_clock(T0 + (first_second + per_partition) * SECOND)


def make_event_log(tmp_path, partitions: int = 3, per_partition: int = 30, **create) -> EventLog:
    log = EventLog.create(tmp_path / "event-log", partitions=partitions, clock="manual", **create)
    log.advance_clock(T0)
    append_events(log, per_partition, 0)
    return log


def log_rows(log: EventLog) -> set[tuple]:
    rows = set()
    for p in range(log.partitions):
        table = log.read(p, log.start_offset(p), log.end_offset(p))
        arrivals = table.column("arrival_time").cast("int64").to_pylist()
        for off, a, k, v in zip(
            table.column("offset").to_pylist(),
            arrivals,
            *(table.column(c).to_pylist() for c in ("key", "payload")),
            strict=True,
        ):
            rows.add((p, off, a, k, v))
    return rows


def rows_of(df: DataFrame) -> list[tuple]:
    return [
        tuple(r) for r in df.select("partition", "offset", F.unix_micros("arrival_time"), "key", "payload").collect()
    ]


def stream_batches(spark, log: EventLog, checkpoint, **options) -> list[dict]:
    """Run the source with Trigger.AvailableNow; per batch: its rows and its recorded offsets."""
    seen = []

    def each(df, batch_id):
        start, end = batch_offsets(checkpoint, batch_id)
        seen.append({"id": batch_id, "rows": rows_of(df), "start": start, "end": end})

    df = read_log_stream(spark, {"event_log": str(log.root), **options})
    query = (
        df.writeStream.foreachBatch(each)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    return seen


def test_the_stream_reads_every_event_exactly_once_across_stop_and_restart(spark, tmp_path):
    log = make_event_log(tmp_path)
    out, ck = tmp_path / "out", tmp_path / "ck"
    first = run_passthrough(spark, log.root, out, ck, mode="until-caught-up", max_events_per_batch=40)
    assert (first.events, first.batches) == (90, 3)
    append_events(log, 10, 30)  # the producer keeps going while the job is stopped
    second = run_passthrough(spark, log.root, out, ck, mode="available-now")
    assert second.events == 30  # resumes just after the last committed batch

    written = rows_of(spark.read.parquet(str(out)))
    assert len(written) == len(set(written)) == 120
    assert set(written) == log_rows(log)
    # the batch path reads the same events
    batch = rows_of(read_log(spark, {"event_log": str(log.root)}))
    assert sorted(batch) == sorted(written)


def test_max_events_cuts_batches_fairly_and_records_a_clock_no_later_than_the_first_unread_event(spark, tmp_path):
    log = make_event_log(tmp_path, per_partition=12)
    append_events(log, 8, 100)  # p0..p2 hold 20 each; clock at 108 s
    log.append(0, ["late"] * 6, ["{}"] * 6)  # p0 gets 6 more, stamped at the clock
    clock = T0 + 108 * SECOND
    everything = log_rows(log)
    batches = stream_batches(spark, log, tmp_path / "ck", maxEventsPerBatch="14")

    assert set().union(*(set(b["rows"]) for b in batches)) == everything
    assert sum(len(b["rows"]) for b in batches) == len(everything)  # exactly once
    for b in batches:
        start = b["start"].offsets if b["start"] else {p: 0 for p in range(3)}
        end = b["end"].offsets
        assert 0 < len(b["rows"]) <= 14
        for p in range(3):  # the batch is exactly [start, end) of each partition, none starved
            offsets = sorted(off for q, off, *_ in b["rows"] if q == p)
            assert offsets == list(range(start[p], end[p]))
            assert end[p] > start[p] or end[p] == log.end_offset(p)
        unread = [a for q, off, a, *_ in everything if off >= end[q]]
        assert b["end"].clock_us == min([clock, *unread])  # the clock rule under cutting
    assert batches[-1]["end"].clock_us == clock


def test_arrival_span_keeps_each_batch_within_the_span_after_the_earliest_unread_arrival(spark, tmp_path):
    log = make_event_log(tmp_path, per_partition=20)
    batches = stream_batches(spark, log, tmp_path / "ck", maxArrivalSpanPerBatch="5s")
    assert len(batches) >= 4  # 20 s of arrivals, at most 5 s of them a batch
    assert sum(len(b["rows"]) for b in batches) == 60
    for b in batches:
        arrivals = [a for _, _, a, *_ in b["rows"]]
        assert max(arrivals) - min(arrivals) <= 5 * SECOND


def test_start_by_arrival_time_and_batch_ranges(spark, tmp_path):
    log = make_event_log(tmp_path, per_partition=20)
    at = format_time_us(T0 + 15 * SECOND)
    expected = {r for r in log_rows(log) if r[2] >= T0 + 15 * SECOND}
    batches = stream_batches(spark, log, tmp_path / "ck", startingArrivalTime=at)
    assert {r for b in batches for r in b["rows"]} == expected

    def read(**options):
        return read_log(spark, {"event_log": str(log.root), **options})

    assert set(rows_of(read(startingArrivalTime=at))) == expected
    window = read(startingOffsets='{"0": 2, "1": -2, "2": -1}', endingOffsets='{"0": 5, "1": 1, "2": -1}')
    assert sorted((p, o) for p, o, *_ in rows_of(window)) == [(0, 2), (0, 3), (0, 4), (1, 0)]
    until = read(endingArrivalTime=format_time_us(T0 + 2 * SECOND))
    assert sorted((p, o) for p, o, *_ in rows_of(until)) == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    assert read().schema == SOURCE_SCHEMA


def test_a_read_that_includes_headers_gives_every_event_of_the_log_the_empty_map(spark, tmp_path):
    """The embedded log keeps no headers: a job reading ``headers`` reads it as records without any."""
    log = make_event_log(tmp_path, partitions=2, per_partition=4)
    seen: list = []

    def each(df, batch_id):
        seen.extend(df.select("partition", "offset", F.map_entries("headers").alias("h")).collect())

    query = (
        read_log_stream(spark, {"event_log": str(log.root), "includeHeaders": "true"}).writeStream.foreachBatch(each)
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination(120)
    assert sorted((r.partition, r.offset, r.h) for r in seen) == [(p, o, []) for p in (0, 1) for o in range(4)]
    batch = read_log(spark, {"event_log": str(log.root), "includeHeaders": "true"})
    assert batch.schema == SOURCE_HEADERS_SCHEMA and batch.where(F.size("headers") == 0).count() == 8
    assert read_log(spark, {"event_log": str(log.root), "includeHeaders": "false"}).schema == SOURCE_SCHEMA


def test_an_idle_log_still_moves_the_recorded_clock(spark, tmp_path):
    log = make_event_log(tmp_path, partitions=2, per_partition=5)
    ck = tmp_path / "ck"
    first = stream_batches(spark, log, ck, idleClockInterval="10s")
    assert [len(b["rows"]) for b in first] == [10]
    log.advance_clock(T0 + 9 * SECOND)  # moved 4 s: less than the interval, no batch
    assert stream_batches(spark, log, ck, idleClockInterval="10s") == []
    log.advance_clock(T0 + 60 * SECOND)
    idle = stream_batches(spark, log, ck, idleClockInterval="10s")
    assert [(len(b["rows"]), b["end"].offsets, b["end"].clock_us) for b in idle] == [
        (0, {0: 5, 1: 5}, T0 + 60 * SECOND)
    ]


def retention_event_log(tmp_path) -> EventLog:
    """One partition, one segment per event (arrivals 0, 10, 20, 200 s); retention deleted the first three."""
    log = EventLog.create(tmp_path / "event-log", partitions=1, clock="manual", segment_bytes=1024, retention="1m")
    log.advance_clock(T0)
    for s in (0, 10, 20, 200):
        log.append(0, [f"k{s}"], [f'{{"s": {s}, "pad": "{"x" * 1024}"}}'], arrival_times=[T0 + s * SECOND])
    log.advance_clock(T0 + 200 * SECOND)
    log.apply_retention()
    assert log.start_offset(0) == 3
    return log


def test_a_start_deleted_by_retention_fails_the_query_and_names_the_missing_span(spark, tmp_path):
    log = retention_event_log(tmp_path)
    early = format_time_us(T0 + 5 * SECOND)
    query = (
        read_log_stream(spark, {"event_log": str(log.root), "startingArrivalTime": early}).writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ck")).start()
    )  # fmt: skip
    with pytest.raises(PySparkException) as info:
        query.awaitTermination(60)
    message = str(info.value)
    assert "no longer holds events that arrived from 2026-03-01T12:00:05Z through 2026-03-01T12:00:20Z" in message
    assert "acceptPartial" in message

    with pytest.raises((PySparkException, RetentionError), match="offsets 0–2 were deleted by retention"):
        read_log(spark, {"event_log": str(log.root), "startingOffsets": '{"0": 0}'}).collect()  # JVM: when it is made

    partial = stream_batches(spark, log, tmp_path / "ck2", startingArrivalTime=early, acceptPartial="true")
    assert [(p, o) for b in partial for p, o, *_ in b["rows"]] == [(0, 3)]


def test_a_job_restarts_after_retention_passed_its_original_start(spark, tmp_path):
    # Spark asks the source for its initial offset at every start, also when it resumes from
    # its checkpoint; that must not fail because the original start is gone by now.
    log = EventLog.create(tmp_path / "event-log", partitions=1, clock="manual", segment_bytes=1024, retention="1m")
    log.advance_clock(T0)
    pad = "x" * 1024
    for s in (0, 10):
        log.append(0, ["k"], [f'{{"s": {s}, "pad": "{pad}"}}'], arrival_times=[T0 + s * SECOND])
    ck = tmp_path / "ck"
    first = stream_batches(spark, log, ck, startingArrivalTime=format_time_us(T0 + 5 * SECOND))
    assert [(p, o) for b in first for p, o, *_ in b["rows"]] == [(0, 1)]
    for s in (200, 250):
        log.append(0, ["k"], [f'{{"s": {s}, "pad": "{pad}"}}'], arrival_times=[T0 + s * SECOND])
    log.advance_clock(T0 + 250 * SECOND)
    log.apply_retention()  # deletes what arrived before 12:03:10
    assert log.start_offset(0) == 2  # the event the job started from is gone
    resumed = stream_batches(spark, log, ck, startingArrivalTime=format_time_us(T0 + 5 * SECOND))
    assert [(p, o) for b in resumed for p, o, *_ in b["rows"]] == [(0, 2), (0, 3)]


def test_misuse_is_reported_with_the_fix(spark, tmp_path):
    with pytest.raises(PySparkException, match="no event log given"):
        spark.read.format("tidegate").load().collect()
    log = make_event_log(tmp_path, partitions=1, per_partition=1)
    with pytest.raises(PySparkException, match="the columns are fixed"):
        spark.read.format("tidegate").schema("payload STRING").option("event_log", str(log.root)).load().collect()
    with pytest.raises((PySparkException, ConfigError), match=r"\['maxeventsperbatch'\] do not apply to a batch read"):
        read_log(spark, {"event_log": str(log.root), "maxEventsPerBatch": "5"}).collect()
