"""A reference join in a later step, end to end: each ten-minute row joins the snapshot its
window's end falls in; a snapshot published late joins from its recorded effective start in the
stream, across its restart, and in the batch path given the lineage's records, which the
completeness check holds the stream to; a changed snapshot stops the next batch; and the example
job, jobs/device_minutes_over_limit.yaml, on its samples. (The golden cases — in one batch,
random cuts and a restart — are in the steps transcript, tests/transcripts/steps_golden.yaml.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from support import checked_by_records_and_fresh
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.eventtime.reference import snapshot_folder_name
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import JobPaths

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[3]
DAY = "2026-03-01"


def at(hhmm: str) -> int:
    return parse_time_us(f"{DAY}T{hhmm}:00Z")


def minutes_spec(folder: Path):
    """Ten-minute peaks per device, each joined (left) with the limit of its device in the
    snapshot its window's end falls in."""
    return parse_spec({
        "name": "minutes-and-limits", "version": 1,
        "payload": {"deviceId": "string", "eventTime": "string", "temperature": "double"},
        "timestamp_by": "eventTime", "policy": {"late_arrival_tolerance": "1m"},
        "steps": [
            {"name": "minutes", "window": {"kind": "tumbling", "size": "10m"}, "group_by": ["deviceId"],
             "aggregates": {"peak": "max(temperature)"}},
            {"name": "limited", "from": "minutes", "select": {"deviceId": "deviceId", "peak": "peak",
                                                               "limit": "limits.max_temperature"},
             "reference": {"name": "limits", "path": str(folder), "type": "left",
                           "columns": {"deviceId": "string", "max_temperature": "double"},
                           "keys": ["deviceId = limits.deviceId"]}},
        ],
    })  # fmt: skip


def publish(folder: Path, valid_from: str, limit: int) -> None:
    hidden = folder / f".{valid_from}"
    hidden.mkdir(parents=True)
    (hidden / "limits.csv").write_text(f"deviceId,max_temperature\nd1,{limit}\n")
    hidden.rename(folder / snapshot_folder_name(at(valid_from)))


def rows_of(spark, output) -> list[tuple[str, float, str]]:
    """(window end, limit, snapshot) per row, as HH:MM, in time order."""
    out = spark.read.parquet(str(output)).orderBy("system_time")
    return [(format_time_us(r.t)[11:16], r.limit, format_time_us(r.s)[11:16])
            for r in out.select(F.unix_micros("system_time").alias("t"), "limit",
                                F.unix_micros("reference_snapshot_limits").alias("s")).collect()]  # fmt: skip


def test_a_late_snapshot_joins_window_rows_from_its_recorded_start_in_the_stream_its_restart_and_the_batch_path(
    spark, tmp_path, monkeypatch
):
    """The 12:10 snapshot is published after the stream processed readings through 12:22: its
    record starts it just after 12:22, so the row of the window ending 12:20 keeps the 12:00
    snapshot (limit 30) and every later row joins 12:10's (limit 40) — in the stream, its
    restart and the batch path by the records. Without the records every row from 12:10 on
    joins 12:10's, and the completeness check fails on those rows."""
    from tidegate.inputs.event_log import EventLog
    from tidegate.spark.pipeline.runner import run_batch, run_stream

    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", str(tmp_path))
    folder, event_log = tmp_path / "limits", tmp_path / "event-log"
    spec = minutes_spec(folder)
    publish(folder, "12:00", 30)
    log = EventLog.create(event_log, partitions=1, clock="manual")
    streams = [["12:01", "12:11", "12:21", "12:22"], ["12:31", "12:41", "12:51", "13:05"]]
    for n, times in enumerate(streams):
        payloads = [json.dumps({"deviceId": "d1", "eventTime": f"{DAY}T{t}:00Z", "temperature": 35}) for t in times]
        log.append(0, [None] * len(times), payloads, [at(t) for t in times])
        run_stream(spark, spec, event_log, tmp_path / "run")  # the second start is a restart
        if n == 0:
            publish(folder, "12:10", 40)
    run_paths = JobPaths(tmp_path / "run")
    record = json.loads(run_paths.reference_record("limits", snapshot_folder_name(at("12:10"))).read_text())
    assert record["late"] is True and record["effective_from"] == f"{DAY}T12:22:00.000001Z"
    expected = [("12:10", 30.0, "12:00"), ("12:20", 30.0, "12:00"), ("12:30", 40.0, "12:10"),
                ("12:40", 40.0, "12:10"), ("12:50", 40.0, "12:10")]  # fmt: skip
    assert rows_of(spark, run_paths.output)[:5] == expected
    by_records = run_batch(spark, spec, event_log, tmp_path / "batch", records_of=run_paths)
    assert rows_of(spark, by_records.paths.output) == rows_of(spark, run_paths.output)
    fresh = run_batch(spark, spec, event_log, tmp_path / "fresh")  # every snapshot on time
    assert rows_of(spark, fresh.paths.output)[:2] == [("12:10", 40.0, "12:10"), ("12:20", 40.0, "12:10")]

    passed, differs = checked_by_records_and_fresh(
        spark, spec, run_paths.output, by_records.paths.output, fresh.paths.output, tmp_path
    )
    assert passed.success, passed.describe()
    # a row of a window row has no position: it is identified by its time and every column, so
    # a row joined with another snapshot is one row missing and another extra
    assert [r.rule for r in differs.rules if not r.success] == ["no_missing_rows", "no_extra_rows"]


def test_a_snapshot_changed_after_a_step_joined_it_stops_the_next_batch(spark, tmp_path, monkeypatch):
    from tidegate.errors import ConfigError
    from tidegate.spark.pipeline.engine import Engine

    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", str(tmp_path))
    folder = tmp_path / "limits"
    publish(folder, "12:00", 30)
    engine = Engine(spark, minutes_spec(folder), JobPaths(tmp_path / "run"), [0])
    payload = json.dumps({"deviceId": "d1", "eventTime": f"{DAY}T12:01:00Z", "temperature": 35})
    schema = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
    raw = spark.createDataFrame([(0, 0, at("12:01"), None, payload)], schema)
    raw = raw.select("partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload")
    engine.process_batch(raw, 0, at("12:30"))
    assert rows_of(spark, engine.paths.output) == [("12:10", 30.0, "12:00")]
    (folder / snapshot_folder_name(at("12:00")) / "limits.csv").write_text("deviceId,max_temperature\nd1,99\n")
    with pytest.raises(ConfigError, match=r"reference limits: snapshot valid_from=2026-03-01T12:00:00Z changed"):
        engine.process_batch(raw.limit(0), 1, at("12:40"))


def test_test_query_runs_the_example_each_ten_minute_peak_with_the_limit_at_its_windows_end(
    spark, tmp_path, capsys, monkeypatch
):
    """jobs/device_minutes_over_limit.yaml on jobs/samples/device_sites.jsonl, by hand: dev-1's
    window ending 12:00 (peak 27) joins the 12:00 snapshot (limit 25): over; dev-2's ending 12:10
    (36) is over its 35; dev-1's ending 13:00 (28) joins 13:00's (limit 30): not over, though its
    reading at 12:59:59 was over the limit of its own time; dev-4 is in no snapshot: dropped."""
    from tidegate.cli import main

    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", str(REPO / "jobs" / "samples"))
    code = main(["query", "test", "--spec", "jobs/device_minutes_over_limit.yaml", "--input",
                 "jobs/samples/device_sites.jsonl", "--work-dir", str(tmp_path / "run")])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out.split("== per-event outcomes ==")[0]
    over, hours = out.split("== output site_hours, step site_hours (2 rows) ==")
    assert "== output (2 rows) ==" in over
    # [window end, device, site, peak, limit, snapshot]
    rows = [line.split() for line in over.splitlines() if line.strip().startswith("NaN")]
    assert [[r[3], r[4], r[5], r[6], r[7], r[9]] for r in rows] == [
        ["12:00:00", "dev-1", "hall-a", "27.0", "25.0", "12:00:00"],
        ["12:10:00", "dev-2", "hall-b", "36.0", "35.0", "12:00:00"],
    ]
    rows = [line.split() for line in hours.splitlines() if line.startswith("2026-")]
    assert [[r[1], r[3], r[4], r[5]] for r in rows] == [
        ["11:00:00", "12:00:00", "hall-a", "1"],
        ["12:00:00", "13:00:00", "hall-b", "1"],
    ]
