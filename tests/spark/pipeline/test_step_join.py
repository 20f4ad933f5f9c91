"""A later step that joins two steps' rows, end to end: the example job,
jobs/device_hour_peaks.yaml, on its samples. (The golden cases — in one batch, random cuts, a
restart and a start at 13:00 — are in the steps transcript, tests/transcripts/steps_golden.yaml;
the stream against the batch path and a replay from T − L in test_steps_stream.py; the GX
check of a DAG restart, passing and then failing on a lost joined row, in
tests/dags/test_dag_runs.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

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
