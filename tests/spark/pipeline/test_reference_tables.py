"""Two reference tables joined in order, through the engine (tests/transcripts/reference_tables_golden.yaml):
the transcript in one batch, in its micro-batches with a new driver half way and in random
cuts, each table's later snapshot published only just before the first event of its time; a
snapshot of the second table published late, joined from its recorded effective start by the
stream, its restarts and the batch path given the lineage's records (which the completeness
check holds the stream to, table by table); a changed snapshot of the
second table refused; each table's folder held to the reference folders; and the example job,
jobs/device_over_site_limit.yaml, on its samples."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from pyspark.sql import functions as F

from support import TRANSCRIPTS, checked_by_records_and_fresh
from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.eventtime.reference import snapshot_folder_name
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine

pytestmark = pytest.mark.spark
GOLDEN = yaml.safe_load((TRANSCRIPTS / "reference_tables_golden.yaml").read_text())
RAW = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
HEADERS = {"devices": "device,siteId", "sites": "siteId,site"}
SNAPSHOTS = ("reference_snapshot_devices", "reference_snapshot_sites")
REPO = Path(__file__).resolve().parents[3]


def at(hhmm: str) -> int:
    return parse_time_us(f"{GOLDEN['date']}T{hhmm}{':00' if hhmm.count(':') == 1 else ''}Z")


def tables_spec(folder, **more):
    return parse_spec(more | {
        "name": "reference-tables-golden", "version": 1,
        "payload": {"id": "string", "device": "string", "eventTime": "string"},
        "timestamp_by": "eventTime",
        "reference": [
            {"name": "devices", "path": str(folder / "devices"), "columns": {"device": "string", "siteId": "string"},
             "keys": ["device = devices.device"]},
            {"name": "sites", "path": str(folder / "sites"), "type": "left",
             "columns": {"siteId": "string", "site": "string"}, "keys": ["devices.siteId = sites.siteId"]},
        ],
        "select": {"id": "id", "siteId": "devices.siteId", "site": "sites.site"},
    })  # fmt: skip


def publish(folder, table: str, valid_from: str) -> None:
    """One snapshot of ``table``, written under a hidden name and renamed into place whole."""
    hidden = folder / table / f".{valid_from}"
    hidden.mkdir(parents=True)
    rows = GOLDEN[table][valid_from]
    (hidden / f"{table}.csv").write_text(HEADERS[table] + "\n" + "".join(f"{a},{b}\n" for a, b in rows))
    hidden.rename(folder / table / snapshot_folder_name(at(valid_from)))


def output_rows(spark, output) -> list[list]:
    out = spark.read.parquet(str(output)).orderBy("partition", "offset", "site")
    snaps = [F.unix_micros(c).alias(c) for c in SNAPSHOTS]
    return [[r.id, r.siteId, r.site, *[None if r[c] is None else format_time_us(r[c])[11:16] for c in SNAPSHOTS]]
            for r in out.select("id", "siteId", "site", *snaps).collect()]  # fmt: skip


def golden_rows() -> dict[str, tuple]:
    """event id → (partition, offset, arrival µs, key, payload), offsets per partition in order."""
    out, offsets = {}, {}
    for event_id, device, time, partition in GOLDEN["events"]:
        offset = offsets[partition] = offsets.get(partition, -1) + 1
        payload = {"id": event_id, "device": device, "eventTime": format_time_us(at(time))}
        out[event_id] = (partition, offset, at(time), None, json.dumps(payload))
    return out


def cuts() -> dict[str, list[list[str]]]:
    """Event ids per micro-batch: one batch; the transcript's; the arrival order cut at random."""
    ordered = [e[0] for e in sorted(GOLDEN["events"], key=lambda e: (at(e[2]), e[3]))]
    cut = sorted(np.random.default_rng(11).choice(np.arange(1, len(ordered)), 4, replace=False))
    return {
        "whole": [ordered],
        "transcript": GOLDEN["batches"],
        "random": [ordered[a:b] for a, b in zip([0, *cut], [*cut, len(ordered)], strict=True)],
    }


def run(spark, tmp_path, name: str, batches: list[list[str]]) -> list[list]:
    """The engine over ``batches``, a new driver half way when there are more than two; each
    table's later snapshot published just before the first batch holding an event of its time."""
    folder = tmp_path / f"ref-{name}"
    for table in ("devices", "sites"):
        for valid_from in GOLDEN[table]:
            if valid_from != GOLDEN["published_later"][table]:
                publish(folder, table, valid_from)
    rows = golden_rows()
    make = lambda: Engine(spark, tables_spec(folder), JobPaths(tmp_path / name), [0, 1])  # noqa: E731
    engine = make()
    for batch_id, ids in enumerate(batches):
        if batch_id == len(batches) // 2 and len(batches) > 2:
            engine = make()  # a new driver
        for table, valid_from in GOLDEN["published_later"].items():
            later = folder / table / snapshot_folder_name(at(valid_from))
            if not later.exists() and max(rows[i][2] for i in ids) >= at(valid_from):
                publish(folder, table, valid_from)
        batch = [rows[i] for i in ids]
        raw = spark.createDataFrame(batch, RAW).select(
            "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload"
        )
        engine.process_batch(raw, batch_id, max(r[2] for r in batch))
    return output_rows(spark, engine.paths.output)


def test_every_cut_of_the_stream_and_a_restart_join_each_table_by_the_transcript(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", str(tmp_path))
    for name, batches in cuts().items():
        assert run(spark, tmp_path, name, batches) == GOLDEN["rows"], name
    records = sorted(p.name for p in (tmp_path / "random" / "reference" / "sites").glob("*.json"))
    assert records == [f"{snapshot_folder_name(at(t))}.json" for t in GOLDEN["sites"]]  # each table its own


def test_a_late_snapshot_of_the_second_table_joins_from_its_recorded_start_in_a_stream_its_restarts_and_the_batch_path(
        spark, tmp_path, monkeypatch):  # fmt: skip
    from tidegate.inputs.event_log import EventLog
    from tidegate.spark.pipeline.runner import run_batch, run_stream

    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", str(tmp_path))
    folder, event_log, late = tmp_path / "ref", tmp_path / "event-log", GOLDEN["late"]
    spec = tables_spec(folder, policy={"late_arrival_tolerance": "10m"})
    for table, valid_from in (("devices", "12:00"), ("devices", "12:30"), ("sites", "12:00")):
        publish(folder, table, valid_from)
    log = EventLog.create(event_log, partitions=2, clock="manual")
    for appended in late["streams"]:
        for p in (0, 1):
            mine = [e for e in appended if e[3] == p]
            if mine:
                log.append(p, [None] * len(mine),
                           [json.dumps({"id": i, "device": d, "eventTime": format_time_us(at(t))})
                            for i, d, t, _, _ in mine],
                           [at(a) for *_, a in mine])  # fmt: skip
        run_stream(spark, spec, event_log, tmp_path / "run")  # each start after the first: a restart
        if appended is late["streams"][0]:
            publish(folder, "sites", "12:40")
    run_paths = JobPaths(tmp_path / "run")
    assert output_rows(spark, run_paths.output) == late["rows"]
    record = json.loads(run_paths.reference_record("sites", snapshot_folder_name(at("12:40"))).read_text())
    assert record["late"] is True and record["effective_from"] == late["effective_from"]
    assert record["first_read_at_watermark"] == late["first_read_at_watermark"]
    devices = json.loads(run_paths.reference_record("devices", snapshot_folder_name(at("12:30"))).read_text())
    assert devices["late"] is False  # the other table's snapshots were there from the start
    by_records = run_batch(spark, spec, event_log, tmp_path / "batch", records_of=run_paths)
    assert output_rows(spark, by_records.paths.output) == late["rows"]
    fresh = run_batch(spark, spec, event_log, tmp_path / "fresh")  # no records: every snapshot on time
    assert output_rows(spark, fresh.paths.output) == late["rows_without_records"]
    # the completeness check compares each table's snapshot: the stream passes against the batch
    # path by its records, and fails against the fresh one on the rows the late snapshot moved
    passed, differs = checked_by_records_and_fresh(
        spark, spec, run_paths.output, by_records.paths.output, fresh.paths.output, tmp_path
    )
    assert passed.success, passed.describe()
    assert [r.rule for r in differs.rules if not r.success] == ["values_equal_reference"]
    columns = {m.column for s in differs.finding("values_equal_reference").samples for m in s.mismatches}
    assert columns == {"site", "reference_snapshot_sites"}


def test_a_snapshot_of_the_second_table_changed_after_the_job_joined_it_stops_the_next_batch(
    spark, tmp_path, monkeypatch
):
    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", str(tmp_path))
    folder = tmp_path / "ref"
    publish(folder, "devices", "12:00")
    publish(folder, "sites", "12:00")
    rows = golden_rows()
    engine = Engine(spark, tables_spec(folder), JobPaths(tmp_path / "run"), [0, 1])
    raw = spark.createDataFrame([rows["e2"]], RAW).select(
        "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload"
    )
    engine.process_batch(raw, 0, rows["e2"][2])
    assert output_rows(spark, engine.paths.output) == [GOLDEN["rows"][0]]
    (folder / "sites" / snapshot_folder_name(at("12:00")) / "sites.csv").write_text("siteId,site\ns1,elsewhere\n")
    with pytest.raises(ConfigError, match=r"reference sites: snapshot valid_from=2026-03-01T12:00:00Z changed"):
        engine.process_batch(raw, 1, rows["e2"][2])


def test_each_tables_folder_must_lie_inside_the_reference_folders_when_the_driver_starts(tmp_path, monkeypatch):
    from tidegate.spark.pipeline.reference_stage import ReferenceStage

    (tmp_path / "refs" / "devices").mkdir(parents=True)
    (tmp_path / "elsewhere" / "sites").mkdir(parents=True)
    (tmp_path / "refs" / "sites").symlink_to(tmp_path / "elsewhere" / "sites", target_is_directory=True)
    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", str(tmp_path / "refs"))
    with pytest.raises(ConfigError, match="outside the reference folders"):
        ReferenceStage(None, tables_spec(tmp_path / "refs").references, JobPaths(tmp_path / "run"), tmp_path)  # type: ignore[arg-type]


def test_test_query_runs_the_two_table_example_each_reading_with_the_snapshots_of_its_time(spark, tmp_path, capsys):
    """jobs/device_over_site_limit.yaml on jobs/samples/device_sites.jsonl: dev-1 is at s1 (limit
    26) until 12:30, then at s2 (limit 35, 30 from 13:00); dev-4 is at s9, which no site snapshot
    has (left join: kept, site NULL); a reading exactly at 13:00:00 joins the sites 13:00 snapshot."""
    from tidegate.cli import main

    code = main(["query", "test", "--spec", "jobs/device_over_site_limit.yaml", "--input",
                 "jobs/samples/device_sites.jsonl", "--work-dir", str(tmp_path / "run")])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert "== output (5 rows) ==" in out
    rows = [line.split() for line in out.split("== per-event outcomes ==")[0].splitlines() if line.startswith("  ")]
    # [device, time, temperature, site, region, devices snapshot, sites snapshot] (its time of day),
    # the readings over their site's limit, by hand from the samples
    assert [[r[4], r[5][11:19], r[6], r[7], r[8], r[10], r[12]] for r in rows] == [
        ["dev-1", "11:58:00", "27.0", "hall-a", "north", "00:00:00", "00:00:00"],
        ["dev-1", "12:00:00", "27.0", "hall-a", "north", "00:00:00", "00:00:00"],
        ["dev-2", "12:06:00", "36.0", "hall-b", "north", "00:00:00", "00:00:00"],
        ["dev-4", "12:20:00", "50.0", "None", "None", "00:00:00", "00:00:00"],
        ["dev-2", "13:05:00", "40.0", "hall-b", "north", "12:30:00", "13:00:00"],
    ]
