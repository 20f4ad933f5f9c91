"""A drill's record: estimate vs actual, the estimate's basis beside the measured terms, and how far
the consumer view fell behind — on a real SQLite control database, no driver."""

from __future__ import annotations

import json

import pytest

from support import Clock
from tidegate.errors import TidegateError
from tidegate.runtime.jobs.config import load_config
from tidegate.runtime.jobs.controller import Controller
from tidegate.runtime.procedures.drills import finish

JOB = "fleet"
PASSED = {"target": "east", "success": True}


@pytest.fixture
def controller(tmp_path):
    from tidegate.control.db import ControlDB

    clock = Clock(1_000.0)
    config = load_config(env={"TIDEGATE_HOME": str(tmp_path)})
    c = Controller(config, ControlDB(config.control_db, now=clock), actor="test", now=clock)
    c.clock = clock
    yield c
    c.close()


def recovered_run(c, *, caught_up: bool) -> int:
    run = c.db.create_run(job=JOB, region="east", version=1, fingerprint="f" * 64, lineage="l", input="/h",
                          start_mode="last-stopped", checkpoint="fresh", checkpoint_reason="t", status="running",
                          requested_at=1_080.0)
    c.db.record_batch(run_id=run, job=JOB, region="east", batch_id=0, processed_at=1_120.0, batch_seconds=20.0,
                      input_events=9_000, quarantined=0, rows_emitted=5)
    if caught_up:
        c.db.update_run(run, caught_up_at=1_150.0)
    return run


def test_a_passed_drill_records_which_term_of_its_estimate_was_off(controller):
    procedure = controller.db.start_procedure("drill:region-loss", JOB, "east")
    run = recovered_run(controller, caught_up=True)
    broken = {"kind": "region-loss", "job": JOB, "region": "east", "at": 1_000.0,
              "failover": {"switched": True, "waited_s": 50.0}}
    basis = {"seconds": 75.0, "terms": {"break_s": 5.0, "failover_wait_s": 40.0, "restart_s": 20.0,
                                        "catch_up_s": 10.0}, "inputs": {}}
    controller.clock.advance(200)
    summary = finish(controller, procedure, broken, {"run_id": run}, [PASSED], 75.0, basis)
    recorded = json.loads(controller.db.procedure(procedure).detail)
    assert recorded["actual_s"] == 150.0 and recorded["estimate_basis"] == basis
    # broken at 1000, the failover waited 50 s, the restart asked at 1080, began at 1100, caught up at 1150
    assert recorded["actual_terms"] == {"restart_s": 20.0, "catch_up_s": 50.0, "failover_wait_s": 50.0,
                                        "break_s": 30.0}
    assert recorded["term_errors"] == {"restart_s": 0.0, "catch_up_s": -40.0, "failover_wait_s": -10.0,
                                       "break_s": -25.0}
    assert summary["consumer_gap"] == recorded["consumer_gap"] and "max_delay_s" in recorded["consumer_gap"]


def test_a_drill_whose_region_never_caught_up_fails_and_still_records_its_terms(controller):
    procedure = controller.db.start_procedure("drill:node-failure", JOB, "east")
    run = recovered_run(controller, caught_up=False)
    broken = {"kind": "node-failure", "job": JOB, "region": "east", "at": 1_000.0}
    with pytest.raises(TidegateError, match="never caught up"):
        finish(controller, procedure, broken, {"run_id": run}, [PASSED], 40.0, None)
    row = controller.db.procedure(procedure)
    assert row.result == "failed"
    assert json.loads(row.detail)["actual_terms"] == {"restart_s": 20.0, "catch_up_s": None, "break_s": 80.0}
