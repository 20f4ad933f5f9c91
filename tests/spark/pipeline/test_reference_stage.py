"""The reference join through the engine: the golden transcript in one batch, in its
micro-batches with a new driver half way and in random cuts — each with the last snapshot
published only just before the first event of its time is processed (a refresh) — on CSV
and Parquet snapshots, inner and left; a snapshot changed after it was joined; and a snapshot
published late, joined from its recorded effective start by the stream, its restarts, a replay
and the batch path alike."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from pyspark.sql import functions as F

from support import TRANSCRIPTS
from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.eventtime.reference import snapshot_folder_name
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine

pytestmark = pytest.mark.spark
GOLDEN = yaml.safe_load((TRANSCRIPTS / "reference_golden.yaml").read_text())
RAW = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
DAY = 86_400_000_000
REPO = Path(__file__).resolve().parents[3]


def at(hhmm: str) -> int:
    return parse_time_us(f"{GOLDEN['date']}T{hhmm}:00Z")


def golden_spec(folder, fmt: str = "csv", kind: str = "left", **more):
    return parse_spec(more | {
        "name": "reference-golden", "version": 1,
        "payload": {"id": "string", "device": "string", "eventTime": "string"},
        "timestamp_by": "eventTime",
        "reference": {"name": "devices", "path": str(folder), "format": fmt, "type": kind,
                      "columns": {"device": "string", "site": "string"}, "keys": ["device = devices.device"]},
        "select": {"id": "id", "site": "devices.site"},
    })  # fmt: skip


def publish(folder, valid_from: str, fmt: str = "csv") -> None:
    """One snapshot, written under a hidden name and renamed into place whole."""
    rows = GOLDEN["snapshots"][valid_from]
    hidden = folder / f".{valid_from}"
    hidden.mkdir(parents=True)
    if fmt == "csv":
        (hidden / "devices.csv").write_text("device,site\n" + "".join(f"{d},{s}\n" for d, s in rows))
    else:
        pq.write_table(
            pa.table({"device": [d for d, _ in rows], "site": [s for _, s in rows]}), hidden / "devices.parquet"
        )
    hidden.rename(folder / snapshot_folder_name(at(valid_from)))


def golden_rows() -> dict[str, tuple]:
    """event id → (partition, offset, arrival µs, key, payload), offsets per partition in order."""
    out, offsets = {}, {}
    for event_id, device, time, partition in GOLDEN["events"]:
        offset = offsets[partition] = offsets.get(partition, -1) + 1
        stamp = f"{GOLDEN['date']}T{time}:00Z"
        payload = {"id": event_id, "device": device, "eventTime": stamp}
        out[event_id] = (partition, offset, parse_time_us(stamp), None, json.dumps(payload))
    return out


def cuts() -> dict[str, list[list[str]]]:
    """Event ids per micro-batch: one batch; the transcript's; the arrival order cut at random."""
    ordered = [e[0] for e in sorted(GOLDEN["events"], key=lambda e: (at(e[2]), e[3]))]
    cut = sorted(np.random.default_rng(7).choice(np.arange(1, len(ordered)), 3, replace=False))
    return {
        "whole": [ordered],
        "transcript": GOLDEN["batches"],
        "random": [ordered[a:b] for a, b in zip([0, *cut], [*cut, len(ordered)], strict=True)],
    }


def run(spark, tmp_path, name: str, batches: list[list[str]], fmt: str = "csv", kind: str = "left") -> list[list]:
    """The engine over ``batches``, a new driver half way when there are more than two; the
    late snapshot published just before the first batch holding an event of its time."""
    folder = tmp_path / f"ref-{name}"
    for valid_from in GOLDEN["snapshots"]:
        if valid_from != GOLDEN["published_late"]:
            publish(folder, valid_from, fmt)
    rows, late = golden_rows(), at(GOLDEN["published_late"])
    make = lambda: Engine(spark, golden_spec(folder, fmt, kind), JobPaths(tmp_path / name), [0, 1])  # noqa: E731
    engine = make()
    for batch_id, ids in enumerate(batches):
        if batch_id == len(batches) // 2 and len(batches) > 2:
            engine = make()  # a new driver
        if not (folder / snapshot_folder_name(late)).exists() and max(rows[i][2] for i in ids) >= late:
            publish(folder, GOLDEN["published_late"], fmt)
        batch = [rows[i] for i in ids]
        raw = spark.createDataFrame(batch, RAW).select(
            "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload"
        )
        engine.process_batch(raw, batch_id, max(r[2] for r in batch))
    out = spark.read.parquet(str(engine.paths.output)).orderBy("partition", "offset", "site")
    return [
        [r.id, r.site, format_time_us(r.snap)[11:16] if r.snap is not None else None]
        for r in out.select("id", "site", F.unix_micros("reference_snapshot").alias("snap")).collect()
    ]


def test_every_cut_of_the_stream_and_a_restart_join_the_golden_transcripts_snapshots(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", str(tmp_path))
    for name, batches in cuts().items():
        assert run(spark, tmp_path, name, batches) == GOLDEN["left"], name


def test_an_inner_join_on_parquet_snapshots_drops_the_events_nothing_matched(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", str(tmp_path))
    expected = [row for row in GOLDEN["left"] if row[1] is not None]
    assert run(spark, tmp_path, "inner", cuts()["whole"], fmt="parquet", kind="inner") == expected


def test_a_snapshot_changed_after_the_job_joined_it_stops_the_next_batch(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", str(tmp_path))
    folder = tmp_path / "ref"
    publish(folder, "12:00")
    rows = golden_rows()
    engine = Engine(spark, golden_spec(folder), JobPaths(tmp_path / "run"), [0, 1])
    raw = spark.createDataFrame([rows["e2"]], RAW).select(
        "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload"
    )
    engine.process_batch(raw, 0, rows["e2"][2])
    record = tmp_path / "run" / "reference" / "devices" / f"{snapshot_folder_name(at('12:00'))}.json"
    assert json.loads(record.read_text())["files"][0][0] == "devices.csv"
    (folder / snapshot_folder_name(at("12:00")) / "devices.csv").write_text("device,site\nd1,elsewhere\n")
    with pytest.raises(ConfigError, match="changed after the job joined it"):
        engine.process_batch(raw, 1, rows["e2"][2])


def test_the_example_as_a_stream_across_a_restart_equals_the_batch_path_and_a_replay_its_tail(
    spark, tmp_path, monkeypatch
):
    """The demo's readings through the example job with a device table of four snapshots (one
    empty, one holding a device twice); the second one published between the two runs."""
    from platform_support import fill
    from tidegate.jobspec import load_spec
    from tidegate.spark.pipeline.runner import run_batch, run_stream
    from tidegate.spark.tools.compare import compare

    # the example's own snapshots (jobs/) and the test's
    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", f"{tmp_path}{os.pathsep}{REPO / 'jobs'}")
    start, folder, s = parse_time_us("2026-03-01T12:00:00Z"), tmp_path / "devices", 1_000_000
    tables = {
        0: [(f"dev-{i:04d}", f"a{i}", 21.0) for i in range(6)],
        40 * s: [(f"dev-{i:04d}", f"b{i}", 20.0) for i in range(2, 8)] + [("dev-0003", "b3-annex", 22.0)],
        90 * s: [],
        220 * s: [(f"dev-{i:04d}", f"c{i}", 23.0) for i in range(8)],
    }

    def publish_table(offset_us):
        snapshot = folder / snapshot_folder_name(start + offset_us)
        snapshot.mkdir(parents=True)
        (snapshot / "devices.csv").write_text(
            "deviceId,site,max_temperature\n" + "".join(f"{d},{site},{t}\n" for d, site, t in tables[offset_us])
        )

    job = load_spec(REPO / "jobs" / "device_over_limit.yaml").to_dict()
    spec = parse_spec(job | {"reference": job["reference"] | {"path": str(folder)}, "filter": None})
    for offset_us in (0, 40 * s, 90 * s):
        publish_table(offset_us)
    event_log = tmp_path / "event-log"
    fill(event_log, 150, seed=5, start_us=start)
    first = run_stream(spark, spec, event_log, tmp_path / "run", extra_options={"maxEventsPerBatch": "60"})
    publish_table(220 * s)  # a refresh, before the readings of its time arrive
    fill(event_log, 150, seed=6, start_us=start + 200 * s)
    second = run_stream(spark, spec, event_log, tmp_path / "run", extra_options={"maxEventsPerBatch": "90"})
    assert first.batches + second.batches >= 4
    reference = spark.read.parquet(str(run_batch(spark, spec, event_log, tmp_path / "batch").paths.output))
    diff = compare(reference, spark.read.parquet(str(tmp_path / "run" / "output")))
    assert diff.equal, diff
    snapshots = {r.snap for r in reference.select(F.unix_micros("reference_snapshot").alias("snap")).collect()}
    # every snapshot joined some reading (and readings stamped before 12:00 joined none)
    assert snapshots - {None} == {start + t for t in tables}
    assert reference.where("site = 'b3-annex'").count() > 0 and reference.where("site IS NULL").count() > 0
    replay_at = start + 230 * s  # a replay from T − L joins the readings after T as the batch path does
    replay = run_batch(spark, spec, event_log, tmp_path / "replay", from_arrival_us=replay_at - spec.lookback_us,
                       emit_after_us=replay_at)  # fmt: skip
    after = F.unix_micros("system_time") > replay_at
    diff = compare(reference.where(after), spark.read.parquet(str(replay.paths.output)).where(after))
    assert diff.equal and reference.where(after).count() > 20, diff
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "run" / "reference" / "devices").glob("*.json"))]
    assert len(records) == 4
    # the refresh was published before the watermark reached its time: not late
    assert records[-1]["late"] is False and records[-1]["first_read_at_watermark"] < records[-1]["valid_from"]


# A snapshot published late, through a stream restarted from its checkpoint twice:
#
#   stream 1   p0: e1 11:59  e2 12:00  e4 12:29  e6 12:45      p1: e3 12:10  e5 12:30  e7 12:59
#              → processed through 12:59, job watermark 12:45: past 12:30
#   publish    12:30's snapshot (late): in effect from 12:59:00.000001, as its record says
#   stream 2   p0: x1 12:59:30                                   → 12:30's
#   stream 3   p1: x2 12:59:15 (arriving 13:00)  e9 13:10        → x2 12:30's, by the record:
#              p0: e8 13:00                                          a new driver reading the
#                                                                    job's progress would say 12:00's
LATE = [  # [id, device, event time, partition, arrival] per stream start
    [
        ["e1", "d1", "11:59", 0, "11:59"],
        ["e2", "d1", "12:00", 0, "12:00"],
        ["e4", "d3", "12:29", 0, "12:29"],
        ["e6", "d2", "12:45", 0, "12:45"],
        ["e3", "d2", "12:10", 1, "12:10"],
        ["e5", "d3", "12:30", 1, "12:30"],
        ["e7", "d1", "12:59", 1, "12:59"],
    ],
    [["x1", "d3", "12:59:30", 0, "12:59:30"]],
    [["x2", "d1", "12:59:15", 1, "13:00"], ["e8", "d1", "13:00", 0, "13:00"], ["e9", "d4", "13:10", 1, "13:10"]],
]
LATE_ROWS = [  # the stream's rows in (partition, offset, site) order: [id, site, snapshot]
    ["e1", None, None],
    ["e2", "hall-a", "12:00"],
    ["e4", None, "12:00"],
    ["e6", "hall-b", "12:00"],  # on time, 12:30's: d2 gone
    ["x1", "yard", "12:30"],
    ["e8", "roof", "13:00"],
    ["e8", "roof-annex", "13:00"],
    ["e3", "hall-b", "12:00"],
    ["e5", None, "12:00"],  # on time, 12:30's: yard
    ["e7", "hall-a", "12:00"],  # on time, 12:30's: hall-c
    ["x2", "hall-c", "12:30"],
    ["e9", None, "13:00"],
]


def test_a_snapshot_published_late_joins_from_its_recorded_start_in_the_stream_its_restarts_a_replay_and_the_batch_path(
        spark, tmp_path, monkeypatch):  # fmt: skip
    from tidegate.inputs.event_log import EventLog
    from tidegate.spark.pipeline.runner import run_batch, run_stream

    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", str(tmp_path))
    folder, event_log = tmp_path / "ref", tmp_path / "event-log"
    spec = golden_spec(folder, policy={"late_arrival_tolerance": "10m"})
    publish(folder, "12:00")
    publish(folder, "13:00")
    log = EventLog.create(event_log, partitions=2, clock="manual")
    stamp = lambda t: parse_time_us(f"{GOLDEN['date']}T{t}{':00' if t.count(':') == 1 else ''}Z")  # noqa: E731
    for appended in LATE:
        for p in (0, 1):
            mine = [e for e in appended if e[3] == p]
            if mine:
                log.append(p, [None] * len(mine),
                           [json.dumps({"id": i, "device": d, "eventTime": format_time_us(stamp(t))})
                            for i, d, t, _, _ in mine],
                           [stamp(a) for *_, a in mine])  # fmt: skip
        run_stream(
            spark, spec, event_log, tmp_path / "run"
        )  # each start after the first: a restart from the checkpoint
        if appended is LATE[0]:
            publish(folder, "12:30")

    def rows(output) -> list[list]:
        out = spark.read.parquet(str(output)).orderBy("partition", "offset", "site")
        return [
            [r.id, r.site, format_time_us(r.snap)[11:16] if r.snap is not None else None]
            for r in out.select("id", "site", F.unix_micros("reference_snapshot").alias("snap")).collect()
        ]

    run_paths = JobPaths(tmp_path / "run")
    assert rows(run_paths.output) == LATE_ROWS
    record = json.loads(run_paths.reference_record("devices", snapshot_folder_name(at("12:30"))).read_text())
    assert record["late"] is True and record["effective_from"] == "2026-03-01T12:59:00.000001Z"
    assert record["first_read_at_watermark"] == "2026-03-01T12:45:00Z"
    # the batch path joins by the lineage's records: the same rows
    assert rows(run_batch(spark, spec, event_log, tmp_path / "batch", records_of=run_paths).paths.output) == LATE_ROWS
    # a replay from T − L into a new lineage that keeps the records: the stream's rows after T
    replay_at = at("12:40")
    replay = run_batch(spark, spec, event_log, tmp_path / "replay", from_arrival_us=replay_at - spec.lookback_us,
                       emit_after_us=replay_at, records_of=run_paths)  # fmt: skip
    replayed = rows(replay.paths.output)  # read back from T − L: the events after T and some before
    assert {r[0] for r in replayed} >= {"e6", "e7", "x1", "x2", "e8", "e9"}  # e6, e7: 12:00's by the records
    assert replayed == [r for r in LATE_ROWS if r[0] in {r[0] for r in replayed}]
