"""The walk-through's account of each planned-stop turn's rehearsal: how much faster its
correction said the restart would run, against how much faster the restart did, from the
control database's records (bench/bench_walkthrough.py)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import bench_walkthrough  # noqa: E402
from tidegate.control.db import ControlDB  # noqa: E402

JOB = "device-fleet-counts"


def start(db, kind: str, requested_at: float, began: float, events: int, seconds: float) -> int:
    """A run requested at ``requested_at`` whose first batch of ``events`` began at ``began``."""
    run_id = db.create_run(
        job=JOB,
        region="east",
        version=2,
        fingerprint="f",
        lineage=f"l{requested_at}",
        kind=kind,
        input="event_log",
        start_mode="now",
        checkpoint="fresh",
        checkpoint_reason="-",
        status="stopped",
        requested_at=requested_at,
    )
    db.record_batch(
        run_id=run_id,
        batch_id=0,
        job=JOB,
        region="east",
        processed_at=began + seconds,
        batch_seconds=seconds,
        input_events=events,
        quarantined=0,
        rows_emitted=0,
    )
    return run_id


def test_a_turn_shows_the_rehearsals_credited_speedups_beside_what_its_restart_gained(tmp_path, capsys):
    clock = [1000.0]
    db = ControlDB(f"sqlite:///{tmp_path}/control.db", now=lambda: clock[0])
    since = clock[0]
    # recorded in a walk-through on a half-speed machine: the rehearsal started in 45.9 s and read
    # 47,257 events in 59.7 s; its restart started in 27.6 s and read 61,340 in 47.3 s
    rehearsal = start(db, "rehearsal", 1100.0, 1145.9, 47_257, 59.7)
    db.add_estimate(
        JOB,
        "east",
        "rehearsal",
        138.2,
        {
            "run_id": rehearsal,
            "startup_speedup": 2.303,
            "catch_up_speedup": 2.225,
            "load": {"startup": {"partner_cpu_s": 21.4, "partner_busy": 0.81}, "catch_up": None},
        },
    )
    restart = start(db, "job", 1400.0, 1427.6, 61_340, 47.3)
    procedure = db.start_procedure("planned-stop", JOB, "east")
    db.finish_procedure(procedure, "passed", detail=f'{{"run_id": {restart}}}')
    bench_walkthrough.report_rehearsals(db, JOB, since)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| east")]
    assert rows == ["| east | 2.30 / 1.66 | 2.23 / 1.64 | 21.4, 81% | – |"]


def test_a_shuffled_walk_runs_every_kind_once_the_planned_stop_among_them_in_an_order_its_seed_repeats():
    kinds = [k for k in bench_walkthrough.KINDS if k != "planned-stop"]
    assert bench_walkthrough.walk_order(kinds, None) == list(bench_walkthrough.KINDS)  # the stop first, as given
    orders = {tuple(bench_walkthrough.walk_order(kinds, seed)) for seed in range(8)}
    assert all(sorted(order) == sorted(bench_walkthrough.KINDS) for order in orders)
    assert len(orders) > 1 and any(order[0] != "planned-stop" for order in orders)
    assert bench_walkthrough.walk_order(kinds, 5) == bench_walkthrough.walk_order(kinds, 5)
    assert bench_walkthrough.walk_order(["drill:upgrade"], 1) in (
        ["planned-stop", "drill:upgrade"],
        ["drill:upgrade", "planned-stop"],
    )


def test_the_estimates_line_counts_each_kinds_first_against_the_bar():
    every = [
        ("planned-stop", 100.0, 110.0),  # −9 %
        ("planned-stop", 100.0, 200.0),  # a later one, off by half: counted among all, not as a first
        ("drill:region-loss", 18.1, 90.4),  # −80 %
        ("drill:upgrade", None, 12.0),  # no estimate: not met
        ("deploy", None, None),  # no recovery to estimate: not counted
    ]
    line = bench_walkthrough.estimates_met(every)
    assert line.startswith("estimates within 25%: 1 of 4; each kind's first: 1 of 3 ")
    assert "planned-stop -9%" in line and "drill:region-loss -80%" in line and "drill:upgrade –" in line


def test_every_example_job_walked_through_loads_in_both_versions_and_the_second_changes_the_query(
    tmp_path, monkeypatch
):
    """Each --job's v1 and v2 are specs the platform loads, with the reference folder written
    and the second a changed query (a new fingerprint): the join of two steps keeps both
    outputs, its windows short enough to emit rows while the walk-through runs."""
    from tidegate.jobspec import load_spec

    monkeypatch.setenv("TIDEGATE_LOG_DIRS", str(tmp_path))
    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", str(tmp_path))
    for example in bench_walkthrough.JOBS:
        root = tmp_path / example
        root.mkdir()
        name = bench_walkthrough.write_specs(example, root, tmp_path / "event-log")
        v1, v2 = load_spec(root / "v1.yaml"), load_spec(root / "v2.yaml")
        assert v1.name == v2.name == name and (v1.version, v2.version) == (1, 2)
        assert v1.fingerprint != v2.fingerprint
    peaks = load_spec(tmp_path / "device_hour_peaks" / "v1.yaml")
    assert peaks.output_names == ("output", "over") and peaks.steps[1].join is not None
    assert peaks.span_us == 110_000_000  # one minute, then the join's 50 seconds
