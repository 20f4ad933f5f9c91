"""The Spark engine against the pure core: same outcomes, same windows, whatever the cuts.

Each case feeds the same random stream (skewed device clocks, late and early events, an
idle partition, bad payloads) to the engine (a) as one batch and (b) in random
micro-batches with a restart in the middle and a re-run batch, and checks both against
the core's answer for the whole stream.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from pyspark.sql import functions as F

from support import random_stream
from tidegate.eventtime.durations import format_time_us
from tidegate.eventtime.policy import DROPPED, NONE, PartitionState, apply_policy
from tidegate.eventtime.watermarks import arrival_floor_us, job_watermark_us, key_watermark_us
from tidegate.eventtime.windows import assign
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine
from tidegate.spark.tools.compare import compare

pytestmark = pytest.mark.spark

PARTITIONS = 3  # the last one stays idle: its watermark must follow the broker clock
RAW = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"

WINDOWS = {
    "tumbling-over": ({"kind": "tumbling", "size": "1m"}, True),
    "hopping": ({"kind": "hopping", "size": "2m", "hop": "1m"}, False),
    "session-over": ({"kind": "session", "gap": "30s", "max_duration": "2m"}, True),
    "sliding": ({"kind": "sliding", "size": "1m"}, False),
}


def spec_for(window: dict, over: bool):
    return parse_spec(
        {
            "name": "engine-test",
            "version": 1,
            "payload": {"deviceId": "string", "eventTime": "string", "value": "bigint"},
            "timestamp_by": "eventTime",
            "over": "deviceId" if over else None,
            "policy": {"out_of_order_tolerance": "10s", "late_arrival_tolerance": "1m"},
            "window": window,
            "group_by": ["deviceId"],
            "aggregates": {"events": "count(*)", "total": "sum(value)"},
        }
    )


def make_input(seed: int, n: int = 900):
    s = random_stream(seed, n=n, partitions=PARTITIONS, keys=5, idle=1)
    rows = []
    for p in range(PARTITIONS):
        for off, i in enumerate(s.of_partition(p)):
            payload = {"deviceId": s.key[i], "eventTime": format_time_us(int(s.event_us[i])), "value": int(s.value[i])}
            if i % 97 == 0:
                payload = "{not json"  # bad input: quarantined, never lost
            elif i % 89 == 0:
                payload.pop("eventTime")
            rows.append(
                (p, off, int(s.arrival_us[i]), s.key[i], payload if isinstance(payload, str) else json.dumps(payload))
            )
    return s, rows


def to_raw(spark, rows):
    df = spark.createDataFrame(rows, RAW)
    return df.select("partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload")


def run_in_batches(spark, spec, rows, root, cuts, final_clock, restart_at=None, rerun=None):
    """Micro-batches by arrival time: batch i holds arrivals in [cut_{i-1}, cut_i); its clock
    is cut_i (every later event arrives at or after it), the last one the final clock."""
    engine = Engine(spark, spec, JobPaths(root), list(range(PARTITIONS)))
    bounds = [*cuts, final_clock]
    lo = -(1 << 62)
    for batch_id, hi in enumerate(bounds):
        part = [r for r in rows if lo <= r[2] < hi] if batch_id < len(cuts) else [r for r in rows if r[2] >= lo]
        if restart_at == batch_id:  # a new driver: everything from the checkpointed state
            engine = Engine(spark, spec, JobPaths(root), list(range(PARTITIONS)))
        engine.process_batch(to_raw(spark, part), batch_id, hi)
        if rerun == batch_id:  # the same batch again, as after a crash before Spark's commit
            engine.process_batch(to_raw(spark, part), batch_id, hi)
        lo = hi
    return engine


def core_answer(spec, stream, rows, final_clock):
    """The executable spec: policy per partition over the whole stream, windows closed by
    the final frontier, count and sum per (window, device)."""
    good = {}
    for p, off, a, _k, payload in rows:
        try:
            d = json.loads(payload)
            good[(p, off)] = (
                a,
                int(np.datetime64(d["eventTime"].rstrip("Z"), "us").astype(np.int64)),
                d["deviceId"],
                d["value"],
            )
        except (ValueError, KeyError):
            continue
    states, kept = [], []
    for p in range(PARTITIONS):
        keys = sorted(k for k in good if k[0] == p)
        a = np.array([good[k][0] for k in keys], dtype=np.int64)
        e = np.array([good[k][1] for k in keys], dtype=np.int64)
        dev = np.array([good[k][2] for k in keys], dtype=object)
        r, st = apply_policy(spec.policy, e, a, PartitionState(), dev if spec.over else None)
        states.append(st.advance_idle(final_clock, spec.policy))
        kept += [(dev[i], int(r.system_us[i]), good[keys[i]][3]) for i in range(len(keys)) if r.action[i] != DROPPED]
    devices = sorted({d for d, _, _ in kept})
    code = {d: i for i, d in enumerate(devices)}
    s = np.array([k[1] for k in kept], dtype=np.int64)
    codes = np.array([code[k[0]] for k in kept])
    m = assign(spec.window, s, codes)
    if spec.over:
        frontier = np.array([key_watermark_us(states, devices[c], spec.policy) for c in codes[m.event_index]])
    else:
        frontier = job_watermark_us(states, spec.policy)
    closed = m.close_at_us <= frontier
    out: dict = {}
    for i, st, en in zip(m.event_index[closed], m.start_us[closed], m.end_us[closed], strict=True):
        key = (kept[i][0], int(st), int(en))
        c, t = out.get(key, (0, 0))
        out[key] = (c + 1, t + kept[i][2])
    return out


def engine_answer(spark, engine):
    df = spark.read.parquet(str(engine.paths.output))
    return {
        (r["deviceId"], int(r["ws"]), int(r["we"])): (r["events"], r["total"])
        for r in df.select(
            "deviceId",
            F.unix_micros("window_start").alias("ws"),
            F.unix_micros("window_end").alias("we"),
            "events",
            "total",
        ).collect()
    }


@pytest.mark.parametrize("case", list(WINDOWS), ids=list(WINDOWS))
def test_engine_equals_the_core_in_one_batch_and_in_random_micro_batches(spark, tmp_path, case):
    window, over = WINDOWS[case]
    spec = spec_for(window, over)
    seed = sorted(WINDOWS).index(case)
    stream, rows = make_input(seed)
    final_clock = int(stream.arrival_us.max()) + 1
    expected = core_answer(spec, stream, rows, final_clock)
    assert len(expected) > 8  # sessions: a few per device; fixed windows: dozens

    whole = run_in_batches(spark, spec, rows, tmp_path / "whole", [], final_clock)
    assert engine_answer(spark, whole) == expected

    rng = np.random.default_rng(seed)  # recorded: the cuts are a function of the case
    cuts = sorted(rng.integers(int(stream.arrival_us.min()), final_clock, 4).tolist())
    cut = run_in_batches(spark, spec, rows, tmp_path / "cut", cuts, final_clock, restart_at=2, rerun=3)
    assert engine_answer(spark, cut) == expected

    # each event's outcome is the same, however the stream was cut
    cols = ["partition", "offset", "action", "reason", "system_time"]
    a = spark.read.parquet(str(whole.paths.audit)).select(*cols)
    b = spark.read.parquet(str(cut.paths.audit)).select(*cols)
    assert compare(a, b).equal


@pytest.mark.parametrize("writer", ["driver", "spark"])
def test_bad_input_is_quarantined_with_reason_and_position_and_nothing_is_lost(spark, tmp_path, monkeypatch, writer):
    if writer == "spark":  # a batch with more bad rows than the driver writes itself
        monkeypatch.setattr("tidegate.spark.pipeline.sink.files.DRIVER_WRITE_ROWS", 0)
    spec = spec_for(*WINDOWS["tumbling-over"])
    stream, rows = make_input(11, n=500)
    engine = run_in_batches(
        spark, spec, rows, tmp_path, [int(np.median(stream.arrival_us))], int(stream.arrival_us.max()) + 1
    )
    q = spark.read.parquet(str(engine.paths.quarantine))
    audit = spark.read.parquet(str(engine.paths.audit))
    assert q.count() + audit.count() == len(rows)
    reasons = {r["reason"] for r in q.select("reason").distinct().collect()}
    assert reasons == {"unparseable_payload", "missing_event_time"}
    bad_positions = {(p, o) for p, o, _, _, payload in rows if "eventTime" not in payload}
    assert {(r["partition"], r["offset"]) for r in q.collect()} == bad_positions
    metrics = sorted(
        (json.loads(p.read_text()) for p in engine.paths.metrics.glob("date=*/batch_id=*.json")),
        key=lambda m: m["batch_id"],
    )
    assert sum(m["quarantined"] for m in metrics) == len(bad_positions)
    files = {f.name for f in engine.paths.quarantine.rglob("*.parquet")}  # the driver writes one plain file
    assert (files == {"part-00000.parquet"}) == (writer == "driver")
    assert sum(m["input_events"] for m in metrics) == len(rows)
    assert metrics == [json.loads(json.dumps(r.record())) for r in engine.reports]  # the file is the report


def test_windows_wait_for_a_partition_that_never_reported(spark, tmp_path):
    """semantics §3: the job watermark is unknown until every partition has reported."""
    spec = spec_for({"kind": "tumbling", "size": "1m"}, False)
    _, rows = make_input(5, n=300)
    engine = Engine(spark, spec, JobPaths(tmp_path), list(range(PARTITIONS)))
    report = engine.process_batch(to_raw(spark, rows), 0, None)  # no clock: partition 2 is silent
    assert report.job_watermark_us == NONE
    assert report.rows_emitted == 0
    assert report.next_close_in_us is None  # the release gate has nothing to wait for yet
    assert JobPaths(tmp_path).output.is_dir()  # a lineage's output begins with its first batch, window or not
    clock = max(r[2] for r in rows) + 1
    report = engine.process_batch(to_raw(spark, []), 1, clock)  # the broker clock speaks for it
    assert report.job_watermark_us != NONE and report.rows_emitted > 0
    # the next minute's end is that far ahead of the watermark: when the release gate reads again
    assert report.next_close_in_us == 60_000_001 - (report.job_watermark_us - 1) % 60_000_000 - 1
    assert 0 < report.next_close_in_us <= 60_000_000


def test_arrival_floor_holds_windows_when_grouping_ignores_the_substream_key(spark, tmp_path):
    spec = parse_spec(
        {
            "name": "fleet",
            "version": 1,
            "payload": {"deviceId": "string", "eventTime": "string", "value": "bigint"},
            "timestamp_by": "eventTime",
            "over": "deviceId",
            "policy": {"late_arrival_tolerance": "1m"},
            "window": {"kind": "tumbling", "size": "1m"},
            "aggregates": {"events": "count(*)"},
        }
    )
    stream, rows = make_input(8, n=400)
    clock = int(stream.arrival_us.max()) + 1
    engine = Engine(spark, spec, JobPaths(tmp_path), list(range(PARTITIONS)))
    report = engine.process_batch(to_raw(spark, rows), 0, clock)
    floor = arrival_floor_us([PartitionState(clock - 60_000_000)] * PARTITIONS)
    assert report.job_watermark_us == floor
    ends = [
        r["we"]
        for r in spark.read.parquet(str(engine.paths.output)).select(F.unix_micros("window_end").alias("we")).collect()
    ]
    assert ends and max(ends) <= floor


@pytest.mark.slow
def test_compaction_between_batches_keeps_every_row_once_and_a_merged_batch_run_again_writes_nothing(spark, tmp_path):
    """batch:   0    1    2  | compact through 1 | 1 again (crash before Spark's commit) | 3 …
    Windows read back equal the core's, and every event's outcome is in the audit once."""
    from tidegate.lineage.compaction import compact
    from tidegate.spark.output import read_output

    spec = spec_for(*WINDOWS["tumbling-over"])
    stream, rows = make_input(4, n=600)
    final_clock = int(stream.arrival_us.max()) + 1
    cuts = np.linspace(int(stream.arrival_us.min()), final_clock, 6)[1:-1].astype(np.int64).tolist()
    bounds, lo = [*cuts, final_clock], -(1 << 62)
    parts = []
    for hi in bounds:
        parts.append(([r for r in rows if lo <= r[2] < hi], hi))
        lo = hi
    engine = Engine(spark, spec, JobPaths(tmp_path), list(range(PARTITIONS)))
    for batch_id, (part, hi) in enumerate(parts[:3]):
        engine.process_batch(to_raw(spark, part), batch_id, hi)
    for output in (engine.paths.output, engine.paths.audit):
        assert compact(output, 1, now_s=0.0, grace_s=0.0).folders_merged > 0
    engine.process_batch(to_raw(spark, parts[1][0]), 1, parts[1][1])
    assert not list(engine.paths.output.glob("date=*/hour=*/batch-1"))  # merged: the re-run wrote nothing
    for batch_id, (part, hi) in enumerate(parts[3:], start=3):
        engine.process_batch(to_raw(spark, part), batch_id, hi)

    out = read_output(spark, engine.paths.output)
    got = {
        (r["deviceId"], int(r["ws"]), int(r["we"])): (r["events"], r["total"])
        for r in out.select(
            "deviceId",
            F.unix_micros("window_start").alias("ws"),
            F.unix_micros("window_end").alias("we"),
            "events",
            "total",
        ).collect()
    }
    assert out.count() == len(got)  # no window twice
    assert got == core_answer(spec, stream, rows, final_clock)
    audit, bad = read_output(spark, engine.paths.audit), read_output(spark, engine.paths.quarantine)
    quarantined = 0 if bad is None else bad.count()
    assert audit.count() == audit.select("partition", "offset").distinct().count() == len(rows) - quarantined


def test_bad_input_comes_with_the_counts_when_it_fits_and_is_written_by_spark_when_it_does_not(
    spark, tmp_path, monkeypatch
):
    """The driver writes a batch's bad input from the collect that brings the partitions'
    counts when no partition has more than its share of ``DRIVER_WRITE_ROWS``; a batch with
    more is written from the policy stage's result. Either way every bad row lands once."""
    from tidegate.spark.pipeline import batch_write
    from tidegate.spark.pipeline.sink import files

    spec = spec_for(*WINDOWS["tumbling-over"])
    stream, rows = make_input(11, n=500)
    bad = {(p, o) for p, o, _, _, payload in rows if "eventTime" not in payload}
    cuts = sorted(r[2] for r in rows)
    first, second = cuts[len(cuts) // 3], cuts[2 * len(cuts) // 3]
    batches = [
        [r for r in rows if r[2] < first and (r[0], r[1]) not in bad],  # clean
        [r for r in rows if first <= r[2] < second],  # dirty
        [r for r in rows if r[2] >= second],  # dirty
    ]
    most = [max(sum(1 for r in b if r[0] == p and (r[0], r[1]) in bad) for p in range(PARTITIONS)) for b in batches]
    assert most[0] == 0 < most[1] < most[2]  # the most bad rows one partition holds, per batch
    # each partition's share is the second batch's most: it fits, the third batch does not
    monkeypatch.setattr(files, "DRIVER_WRITE_ROWS", most[1] * PARTITIONS)
    by_driver, by_spark = [], []
    table_write, frame_write = batch_write.write_batch_table, batch_write.write_batch

    def from_driver(table, base, batch_id, **kw):
        if base.name == "quarantine":
            by_driver.append((batch_id, table.num_rows))
        return table_write(table, base, batch_id, **kw)

    def from_spark(df, base, batch_id, **kw):
        if base.name == "quarantine":
            by_spark.append(batch_id)
        return frame_write(df, base, batch_id, **kw)

    monkeypatch.setattr(batch_write, "write_batch_table", from_driver)
    monkeypatch.setattr(batch_write, "write_batch", from_spark)
    engine = Engine(spark, spec, JobPaths(tmp_path), list(range(PARTITIONS)))
    for batch_id, part in enumerate(batches):
        engine.process_batch(to_raw(spark, part), batch_id, max(r[2] for r in part) + 1)
    dirty = [sum(1 for r in b if (r[0], r[1]) in bad) for b in batches]
    assert by_driver == [(0, 0), (1, dirty[1])] and by_spark == [2]
    q = spark.read.parquet(str(engine.paths.quarantine))
    got = sorted((r["partition"], r["offset"], r["batch_id"]) for r in q.collect())
    batch_of = {(r[0], r[1]): i for i, b in enumerate(batches) for r in b}
    assert got == sorted((p, o, batch_of[(p, o)]) for p, o in bad if (p, o) in batch_of)
    assert sum(r.quarantined for r in engine.reports) == len(got) > 0


def test_a_batch_with_a_large_bad_row_has_its_bad_input_written_by_spark_with_its_text_whole(
    spark, tmp_path, monkeypatch
):
    """A bad row keeps its text, which may be as large as a record the log accepts: one whose
    key and payload exceed ``DRIVER_ROW_TEXT_BYTES`` does not come to the driver with the
    counts, so the driver never receives more than ``DRIVER_WRITE_ROWS`` times that; Spark
    writes such a batch's bad input, every row once."""
    from tidegate.spark.pipeline import batch_write
    from tidegate.spark.pipeline.sink import files

    spec = spec_for(*WINDOWS["tumbling-over"])
    stream, rows = make_input(11, n=500)
    bad = sorted((p, o) for p, o, _, _, payload in rows if "eventTime" not in payload)
    at = next(i for i, r in enumerate(rows) if (r[0], r[1]) == bad[0])
    text = json.dumps({"deviceId": "d", "note": "é" * files.DRIVER_ROW_TEXT_BYTES}, ensure_ascii=False)  # no time: bad
    assert files.DRIVER_ROW_TEXT_BYTES < len(text.encode()) < 3 * files.DRIVER_ROW_TEXT_BYTES
    rows[at] = (*rows[at][:4], text)
    by_spark, frame_write = [], batch_write.write_batch

    def from_spark(df, base, batch_id, **kw):
        by_spark.append((base.name, batch_id))
        return frame_write(df, base, batch_id, **kw)

    monkeypatch.setattr(batch_write, "write_batch", from_spark)
    engine = Engine(spark, spec, JobPaths(tmp_path), list(range(PARTITIONS)))
    engine.process_batch(to_raw(spark, rows), 0, max(r[2] for r in rows) + 1)
    assert ("quarantine", 0) in by_spark and len(bad) < files.DRIVER_WRITE_ROWS // PARTITIONS  # few, one large
    q = spark.read.parquet(str(engine.paths.quarantine)).collect()
    assert sorted((r["partition"], r["offset"]) for r in q) == bad
    assert [r["payload"] for r in q if (r["partition"], r["offset"]) == bad[0]] == [text]
    assert engine.reports[0].quarantined == len(bad)
