"""A later step that joins two steps' rows, end to end: the example job,
jobs/device_hour_peaks.yaml, on its samples; and the completeness check holding a stream of it
— stopped and restarted with more input — to the batch path, failing when one joined row is
gone. (The golden cases — in one batch, random cuts, a restart, substreams and a start at
13:00 — are in the steps transcript, tests/transcripts/steps_golden.yaml; the stream against
the batch path and a replay from T − L in test_steps_stream.py.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from platform_support import fill
from tidegate.eventtime.durations import parse_time_us
from tidegate.jobspec import load_spec, parse_spec
from tidegate.validation import check_completeness

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[3]


def test_test_query_runs_the_example_each_hours_peak_with_the_ten_minutes_that_held_it(spark, tmp_path, capsys):
    """jobs/device_hour_peaks.yaml on jobs/samples/device_readings.jsonl, by hand: dev-1's
    12:00–13:00 readings peak at 34.0 (12:20, in the ten minutes ending 12:20), dev-2's at 36.0
    (12:13, the same ten minutes); 13:00–14:00: dev-1 37.5 at 13:11 (ending 13:20), dev-2 29.0 at
    13:05 (ending 13:10); the hour before noon holds one reading each. Each row is timed by the
    hour's end, the later of its two rows."""
    from tidegate.cli import main

    code = main(["query", "test", "--spec", "jobs/device_hour_peaks.yaml", "--input",
                 "jobs/samples/device_readings.jsonl", "--work-dir", str(tmp_path / "run")])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out.split("== per-event outcomes ==")[0]
    assert "== output (6 rows) ==" in out
    # [time, device, hour end, peak, end of the ten minutes that held it] (times of day)
    rows = [line.split() for line in out.splitlines() if line.strip().startswith("NaN")]
    assert [[r[5], r[6], r[8], r[9], r[11]] for r in rows] == [
        ["12:00:00", "dev-1", "12:00:00", "20.0", "12:00:00"],
        ["12:00:00", "dev-2", "12:00:00", "24.0", "12:00:00"],
        ["13:00:00", "dev-1", "13:00:00", "34.0", "12:20:00"],
        ["13:00:00", "dev-2", "13:00:00", "36.0", "12:20:00"],
        ["14:00:00", "dev-1", "14:00:00", "37.5", "13:20:00"],
        ["14:00:00", "dev-2", "14:00:00", "29.0", "13:10:00"],
    ]


@pytest.mark.slow
def test_the_completeness_check_holds_a_restarted_stream_to_the_batch_path_and_misses_a_lost_row(spark, tmp_path):
    from tidegate.spark.pipeline.runner import run_batch, run_stream

    job = load_spec(REPO / "jobs" / "device_hour_peaks.yaml").to_dict()
    tens, hours, peaks = job["steps"]
    spec = parse_spec(job | {"policy": {"late_arrival_tolerance": "30s"}, "steps": [
        tens | {"window": {"kind": "tumbling", "size": "10s"}},
        hours | {"window": {"kind": "tumbling", "size": "1m"}},
        peaks | {"join": peaks["join"] | {"within": "DATEDIFF(second, tens, hours) BETWEEN 0 AND 50"}},
    ]})  # fmt: skip
    event_log = tmp_path / "event-log"
    start = parse_time_us("2026-01-01T00:00:00Z")
    fill(event_log, 1200, seed=5, start_us=start)  # ten minutes, 2 events a second
    run_stream(spark, spec, event_log, tmp_path / "run", extra_options={"maxEventsPerBatch": "300"})
    fill(event_log, 1200, seed=6, start_us=start + 601_000_000)
    run_stream(spark, spec, event_log, tmp_path / "run", extra_options={"maxEventsPerBatch": "450"})
    batch = run_batch(spark, spec, event_log, tmp_path / "batch").paths

    project = tmp_path / "expectations"
    shutil.copytree(REPO / "expectations", project, ignore=shutil.ignore_patterns("uncommitted"))
    stream, reference = spark.read.parquet(str(tmp_path / "run" / "output")), spark.read.parquet(str(batch.output))
    # the stream emits what its watermark passed; the batch path closes with the log's clock
    through = stream.agg(F.max(F.unix_micros("system_time"))).first()[0]
    span = (start - 60_000_000, through)  # a reading exactly at the start ends a window there
    assert reference.where(F.unix_micros("system_time") <= through).count() > 10
    passed = check_completeness(spark, spec, stream, reference, span, label="test", project_dir=project,
                                data_docs=False)  # fmt: skip
    assert passed.success, passed.describe()
    short = stream.exceptAll(stream.orderBy("system_time", "deviceId").limit(1))  # one joined row lost
    failed = check_completeness(spark, spec, short, reference, span, label="test", project_dir=project,
                                data_docs=False)  # fmt: skip
    assert [r.rule for r in failed.rules if not r.success] == ["no_missing_rows"]
