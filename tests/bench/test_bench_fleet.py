"""bench_fleet's verdicts: when a duplicate keeps up, when a side holds N, and the table it
files. The run itself needs the machine to itself (bench/)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import bench_fleet  # noqa: E402
from bench_fleet import Duplicate  # noqa: E402


def duplicate(side="Tidegate", *, backlog=50, age=0.5, latencies=(0.4, 0.5, 0.6), keeps_up=True):
    return Duplicate(side, "fleet0", "east", 0.3, 900.0, list(latencies), backlog, age, keeps_up)


def test_a_duplicate_keeps_up_while_its_backlog_is_three_triggers_at_most_and_it_triggered_lately():
    assert bench_fleet.keeps_up(duplicate(backlog=300, age=6.0), rate=100, trigger_s=1.0)
    assert not bench_fleet.keeps_up(duplicate(backlog=301), rate=100, trigger_s=1.0)
    assert not bench_fleet.keeps_up(duplicate(age=6.1), rate=100, trigger_s=1.0)
    assert not bench_fleet.keeps_up(duplicate(backlog=None), rate=100, trigger_s=1.0)


def test_a_side_holds_n_only_when_every_duplicate_keeps_up_within_the_latency_target():
    good = [duplicate(), duplicate(latencies=[1.0] * 18 + [9.0] * 2)]  # two slow emissions in 20: its p95
    assert bench_fleet.holds(good, target_s=9.0)
    assert not bench_fleet.holds(good, target_s=5.0)
    assert not bench_fleet.holds([duplicate(), duplicate(keeps_up=False)], target_s=5.0)
    assert not bench_fleet.holds([duplicate(latencies=[])], target_s=5.0)  # no emission measured: no verdict
    assert not bench_fleet.holds([], target_s=5.0)


def test_the_table_gives_each_side_per_n_and_the_largest_n_each_held(capsys):
    class Args:
        rate, trigger, measure, settle, latency_target = 100.0, "1s", 60.0, 20.0, 5.0

    rounds = [
        {"n": 1, "duplicates": [vars(duplicate()), vars(duplicate("plain Spark"))],
         "holds": {"Tidegate": True, "plain Spark": True}},
        {"n": 2, "duplicates": [vars(duplicate()), vars(duplicate("plain Spark", keeps_up=False))],
         "holds": {"Tidegate": True, "plain Spark": False}},
    ]  # fmt: skip
    bench_fleet.report(rounds, Args())
    out = capsys.readouterr().out
    assert "| 2 | plain Spark | 0.30, 0.30 | 0.30 | 900 | 0.50 / 0.60 | 0 of 1 | no |" in out
    assert "largest N held, Tidegate: 2" in out and "largest N held, plain Spark: 1" in out


def test_a_held_duplicate_may_leave_a_stretch_of_input_and_trigger_that_long_ago():
    assert bench_fleet.keeps_up(duplicate(backlog=3300, age=36.0), rate=100, trigger_s=1.0, stretch_s=30.0)
    assert not bench_fleet.keeps_up(duplicate(backlog=3301), rate=100, trigger_s=1.0, stretch_s=30.0)
    assert not bench_fleet.keeps_up(duplicate(age=36.1), rate=100, trigger_s=1.0, stretch_s=30.0)


def test_a_rows_latency_counts_the_wait_for_its_batch_from_when_its_window_could_close():
    from types import SimpleNamespace as NS

    S = 1_000_000
    batches = [
        NS(batch_id=1, batch_seconds=0.5, job_watermark_us=100 * S),  # wrote nothing
        NS(batch_id=2, batch_seconds=0.5, job_watermark_us=121 * S),  # its window closed 1 s before it read
        NS(batch_id=3, batch_seconds=0.4, job_watermark_us=170 * S),  # rows released by a key ahead of the floor
        NS(batch_id=4, batch_seconds=None, job_watermark_us=200 * S),
    ]
    ends = {2: 120 * S, 3: 180 * S, 4: 180 * S}
    assert bench_fleet.release_latencies(batches, ends) == [0.5 + (S - 1) / 1e6, 0.4]


def test_an_n_the_memory_would_not_hold_is_reported_as_not_run(capsys):
    class Args:
        rate, trigger, stretch, measure, settle, latency_target = 100.0, "1s", "30s", 60.0, 20.0, 5.0

    rounds = [
        {"n": 4, "duplicates": [vars(duplicate())], "holds": {"Tidegate": True}},
        {"n": 8, "duplicates": [], "holds": {}, "memory_mb": {"need": 30 * 1024, "available": 20 * 1024}},
    ]
    bench_fleet.report(rounds, Args())
    out = capsys.readouterr().out
    assert "Tidegate's stretch 30s" in out
    assert "N = 8 not run: it would need about 30.0 GiB, 20.0 GiB available" in out
    assert "largest N held, Tidegate: 4" in out


def test_a_one_jvm_worker_is_measured_once_every_job_wrote_rows_and_its_batches_read_as_a_driver_s():
    S = 1_000_000
    report = {
        "batches": {
            "fleet0": [[10.0, 1, 0.5, 100 * S, 0, 20], [11.0, 2, 0.5, 121 * S, 8, 10]],  # (time, id, s, wm, rows, left)
            "fleet1": [[10.5, 1, 0.4, 90 * S, 0, 5]],
        }
    }
    assert not bench_fleet._emitted(report) and not bench_fleet._emitted(None)
    report["batches"]["fleet1"].append([12.0, 2, 0.4, 130 * S, 3, 0])
    assert bench_fleet._emitted(report)
    rows = [bench_fleet._Batch(*row) for row in report["batches"]["fleet0"]]
    assert bench_fleet.release_latencies(rows, {2: 120 * S}) == [0.5 + (S - 1) / 1e6]


def test_the_one_jvm_side_without_a_stretch_is_refused_before_any_work():
    with pytest.raises(SystemExit, match="give it a --stretch"):
        bench_fleet.main(["--jobs", "1", "--sides", "Tidegate one JVM", "--stretch", "0s"])
