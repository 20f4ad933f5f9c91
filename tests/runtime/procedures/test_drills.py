"""A drill's record: estimate vs actual, the estimate's basis beside the measured terms, and how far
the consumer view fell behind — on a real SQLite control database, no driver. And where a
region-loss drill moves a job's storage, on a folder and on a real S3 store (tests/s3.py)."""

from __future__ import annotations

import json
import time

import pytest

from s3 import BUCKETS, region_env
from support import Clock
from tidegate.errors import TidegateError
from tidegate.runtime.jobs.config import Region, load_config
from tidegate.runtime.jobs.controller import Controller
from tidegate.runtime.procedures.drills import finish, move_storage_aside, move_storage_back, remove_moved_storage
from tidegate.storage.uri import parse_root

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
    run = c.db.create_run(
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
        requested_at=1_080.0,
    )
    c.db.record_batch(
        run_id=run,
        job=JOB,
        region="east",
        batch_id=0,
        processed_at=1_120.0,
        batch_seconds=20.0,
        input_events=9_000,
        quarantined=0,
        rows_emitted=5,
    )
    if caught_up:
        c.db.update_run(run, caught_up_at=1_150.0)
    return run


def test_a_passed_drill_records_which_term_of_its_estimate_was_off(controller):
    procedure = controller.db.start_procedure("drill:region-loss", JOB, "east")
    run = recovered_run(controller, caught_up=True)
    broken = {
        "kind": "region-loss",
        "job": JOB,
        "region": "east",
        "at": 1_000.0,
        "failover": {"switched": True, "waited_s": 50.0},
    }
    basis = {
        "seconds": 75.0,
        "terms": {"break_s": 5.0, "failover_wait_s": 40.0, "restart_s": 20.0, "catch_up_s": 10.0},
        "inputs": {},
    }
    controller.clock.advance(200)
    summary = finish(controller, procedure, broken, {"run_id": run}, [PASSED], 75.0, basis)
    recorded = json.loads(controller.db.procedure(procedure).detail)
    assert recorded["actual_s"] == 150.0 and recorded["estimate_basis"] == basis
    # broken at 1000, the failover waited 50 s, the restart asked at 1080, began at 1100, caught up at 1150
    assert recorded["actual_terms"] == {"restart_s": 20.0, "catch_up_s": 50.0, "failover_wait_s": 50.0, "break_s": 30.0}
    assert recorded["term_errors"] == {
        "restart_s": 0.0,
        "catch_up_s": -40.0,
        "failover_wait_s": -10.0,
        "break_s": -25.0,
    }
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


@pytest.fixture(params=["local", "s3"])
def region(request, tmp_path, monkeypatch):
    """The east region on a folder, or on an S3 store reached through its TIDEGATE_S3_EAST_* settings."""
    if request.param == "local":
        return Region("east", storage=tmp_path / "east")
    stores = request.getfixturevalue("s3_stores")
    for name, value in region_env("east", stores["east"]).items():
        monkeypatch.setenv(name, value)
    return Region("east", storage=f"s3a://{BUCKETS['east']}/drills-{time.time_ns()}", work=tmp_path / "work")


def test_storage_a_drill_moved_aside_goes_back_unless_a_recovery_made_the_place_again(region):
    store = region.store()
    place = store.path_of(region.job_root(JOB))
    store.write_bytes(place / "lineages" / "l1" / "checkpoint" / "offsets" / "0", b"v1")
    moved = move_storage_aside(region, JOB, 1_000.5)
    aside = store.path_of(parse_root(moved))
    assert moved == (
        str(region.storage.path / "lost" / "fleet-1000")
        if region.storage.is_local
        else f"{region.storage.uri}/lost/fleet-1000"
    )
    assert not store.exists(place) and store.read_bytes(aside / "lineages/l1/checkpoint/offsets/0") == b"v1"
    assert move_storage_back(region, JOB, moved)  # a drill that failed half way: put back as it was
    assert store.read_bytes(place / "lineages/l1/checkpoint/offsets/0") == b"v1" and not store.exists(aside)

    moved = move_storage_aside(region, JOB, 2_000.0)
    store.write_bytes(place / "lineages" / "l2" / "lineage.json", b"{}")  # the recovery's replay began
    assert not move_storage_back(region, JOB, moved)  # the replay is the region's storage now
    assert not store.exists(place / "lineages" / "l1")
    assert remove_moved_storage(region, moved) and not store.exists(store.path_of(parse_root(moved)))
