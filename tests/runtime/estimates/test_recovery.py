"""A recovery's estimate term by term — the break, the failover's wait, the restart, the catch-up —
and the measured recovery split the same way, on a real SQLite control database."""

from __future__ import annotations

import json
from types import SimpleNamespace as NS

import pytest

from support import Clock
from tidegate.runtime.estimates import recovery

JOB = "fleet"


@pytest.fixture
def controller(tmp_path, monkeypatch):
    from tidegate.control.db import ControlDB
    from tidegate.runtime.jobs.config import load_config

    clock = Clock(1_000.0)
    db = ControlDB(load_config(env={"TIDEGATE_HOME": str(tmp_path)}).control_db, now=clock)
    # the restart's model, as the estimate module would make it from recorded batches
    model = NS(seconds=50.0, startup_s=20.0, backlog_events=30_000, note="")
    monkeypatch.setattr("tidegate.runtime.estimates.estimate.model_estimate", lambda *a, **k: model)
    yield NS(db=db, clock=clock)
    db.dispose()


PLAN = NS(mode="last-stopped", checkpoint="fresh", input_from_us=5_000_000, output_start_us=9_000_000)


def drill_record(db, kind: str, break_s: float) -> None:
    p = db.start_procedure(f"drill:{kind}", JOB, "east")
    db.finish_procedure(p, "passed", detail=json.dumps({"actual_terms": {"break_s": break_s}}))


def recorded_run(db, **fields) -> int:
    """A run of the job in the control database, ``fields`` over a fresh start's."""
    base = dict(job=JOB, version=1, fingerprint="f" * 64, lineage="l1", input="/h", start_mode="now",
                checkpoint="fresh", checkpoint_reason="test")  # fmt: skip
    return db.create_run(**(base | fields))


def test_a_region_loss_of_the_region_consumers_read_counts_the_break_the_failovers_wait_and_the_replay(controller):
    for break_s in (4.0, 30.0, 6.0, 5.0):  # the latest three drills of the kind: 30, 6 and 5 s
        drill_record(controller.db, "region-loss", break_s)
    drill_record(controller.db, "node-failure", 99.0)  # another kind's break is not this one's
    e = recovery.estimate(
        controller, JOB, "east", PLAN, spec=None, kind="region-loss", failover_lag_us=45_000_000, failover_bound_s=120.0
    )
    assert e.terms == {"restart_s": 20.0, "catch_up_s": 30.0, "break_s": 6.0, "failover_wait_s": 45.0}
    assert e.seconds == 101.0
    basis = e.basis()
    assert basis["inputs"]["recorded_breaks_s"] == [30.0, 6.0, 5.0] and basis["inputs"]["survivor_behind_s"] == 45.0
    assert (
        basis["inputs"]["plan"]["input_from_us"] == 5_000_000 and basis["inputs"]["model"]["backlog_events"] == 30_000
    )


@pytest.mark.parametrize(
    "lag_us, wait_s",
    [
        (-3_000_000, 0.0),  # the survivor is ahead: consumers move at once
        (500_000_000, 120.0),  # far behind: the failover waits its bound, then switches anyway
    ],
)
def test_the_failovers_wait_is_the_survivors_lag_within_the_failovers_bound(controller, lag_us, wait_s):
    e = recovery.estimate(
        controller, JOB, "east", PLAN, spec=None, kind="region-loss", failover_lag_us=lag_us, failover_bound_s=120.0
    )
    assert e.terms["failover_wait_s"] == wait_s
    assert e.terms["break_s"] == recovery.FIRST_BREAK_S == 2.0  # no drill recorded yet: a supervisor's interval


def test_a_first_upgrade_drill_takes_its_break_from_the_jobs_graceful_stops_then_the_hand_over(controller):
    db = controller.db
    # newest last: 30 s in west, and a driver that died while stopping (lost), are not east's stops
    for stop_s, region, status in (
        (9.0, "east", "stopped"),
        (3.0, "east", "stopped"),
        (4.0, "east", "stopped"),
        (5.0, "east", "stopped"),
        (60.0, "east", "lost"),
        (30.0, "west", "stopped"),
    ):
        recorded_run(db, region=region, status=status, stop_requested_at=100.0, ended_at=100.0 + stop_s)
    # no drill yet: the stop, then one supervisor interval to the restart's request
    e = recovery.estimate(controller, JOB, "east", PLAN, spec=None, kind="upgrade")
    assert e.terms["break_s"] == 4.0 + recovery.FIRST_BREAK_S and e.basis()["inputs"]["recorded_stops_s"] == [
        3.0,
        4.0,
        5.0,
    ]
    # a node failure drilled before: its break is the hand-over an upgrade's stop is followed by
    drill_record(db, "node-failure", 2.5)
    e = recovery.estimate(controller, JOB, "east", PLAN, spec=None, kind="upgrade")
    assert e.terms["break_s"] == 6.5 and e.basis()["inputs"]["recorded_other_breaks_s"] == [2.5]
    drill_record(db, "upgrade", 7.5)  # once the drill itself is recorded, its own breaks count
    assert recovery.estimate(controller, JOB, "east", PLAN, spec=None, kind="upgrade").terms["break_s"] == 7.5
    # a region loss is no stop: before its first drill, the drills of other kinds tell how long a
    # break hands over to the restart (the median of the latest three)
    e = recovery.estimate(controller, JOB, "east", PLAN, spec=None, kind="region-loss")
    assert e.terms["break_s"] == 5.0 and e.basis()["inputs"]["recorded_other_breaks_s"] == [2.5, 7.5]
    drill_record(db, "upgrade", 3.5)
    assert recovery.estimate(controller, JOB, "east", PLAN, spec=None, kind="region-loss").terms["break_s"] == 3.5


def test_a_restart_alone_is_its_start_up_and_its_catch_up(controller):
    e = recovery.estimate(controller, JOB, "east", PLAN, spec=None)
    assert (e.seconds, e.terms) == (50.0, {"restart_s": 20.0, "catch_up_s": 30.0})


def test_the_measured_recovery_is_split_into_the_same_terms_and_each_terms_error_named(controller):
    db = controller.db
    run = db.create_run(
        job=JOB,
        region="east",
        version=1,
        fingerprint="f" * 64,
        lineage="l",
        input="/h",
        start_mode="last-stopped",
        checkpoint="fresh",
        checkpoint_reason="t",
        status="running",
        requested_at=1_100.0,
    )
    db.record_batch(
        run_id=run,
        job=JOB,
        region="east",
        batch_id=0,
        processed_at=1_150.0,
        batch_seconds=25.0,
        input_events=30_000,
        quarantined=0,
        rows_emitted=10,
    )
    db.update_run(run, caught_up_at=1_190.0)
    # broken at 1000; the failover waited 52 s of the 100 s before the restart's request
    measured = recovery.actual_terms(db, run, broken_at=1_000.0, failover_waited_s=52.0)
    assert measured == {"restart_s": 25.0, "catch_up_s": 65.0, "failover_wait_s": 52.0, "break_s": 48.0}
    estimated = {"restart_s": 20.0, "catch_up_s": 30.0, "break_s": 6.0, "failover_wait_s": 45.0}
    assert recovery.term_errors(estimated, measured) == {
        "restart_s": -5.0,
        "catch_up_s": -35.0,
        "failover_wait_s": -7.0,
        "break_s": -42.0,
    }


def test_a_failovers_hand_over_is_the_recorded_one_else_the_jobs_checks_then_a_drills_hand_over(controller):
    db, clock = controller.db, controller.clock
    inputs: dict = {}
    # nothing recorded: a check's assumed task, then one supervisor interval
    assert recovery.failover_handover(db, JOB, inputs) == recovery.FIRST_CHECK_S + recovery.FIRST_BREAK_S
    # the job's checks as planned stops and drills recorded them (a check without its task time is not counted)
    for task_s in (14.0, 22.0, None, 18.0):
        p = db.start_procedure("planned-stop", JOB, "east")
        db.finish_procedure(p, "passed", checks=[{"target": "consumer", "success": True, "task_s": task_s}])
    drill_record(db, "node-failure", 2.0)
    assert recovery.failover_handover(db, JOB, inputs) == 18.0 + 2.0
    assert inputs["recorded_check_tasks_s"] == [14.0, 22.0, 18.0]
    # a failover recorded: from its switch, less its wait for the survivor, to the restore's request
    for waited_s, handover_s in ((5.0, 31.0), (0.0, 26.0)):
        p = db.start_procedure("failover", JOB, "east")
        clock.advance(waited_s + handover_s)
        run = recorded_run(db, region="east", status="running", start_mode="last-stopped")
        detail = {"switch": {"waited_s": waited_s}, "restored_run": {"run_id": run}}
        db.finish_procedure(p, "passed", detail=json.dumps(detail))
    assert recovery.failover_handover(db, JOB, inputs) == 28.5
    assert inputs["recorded_failover_handovers_s"] == [31.0, 26.0]
