"""Waiting for a job on the triggerer: the verdict table, and a real run against a control database."""

from __future__ import annotations

import asyncio

import pytest

from tidegate_airflow.triggers.job_state import JobStateTrigger, evaluate

RUNNING = {"state": "running", "run_id": 5, "caught_up": True, "processing_lag_s": 3.0}


@pytest.mark.parametrize(
    "status, condition, run_id, max_lag, verdict",
    [
        (RUNNING, "caught_up", None, None, "ok"),
        (RUNNING | {"caught_up": False}, "caught_up", None, None, None),  # still reading its backlog
        (RUNNING | {"state": "starting", "caught_up": False}, "caught_up", None, None, None),
        (RUNNING | {"state": "lost"}, "caught_up", None, None, "failed"),  # the driver died: it never will
        (RUNNING | {"state": "failed"}, "healthy", None, None, "failed"),
        (RUNNING, "caught_up", 4, None, "failed"),  # a newer run replaced the one we wait for
        (RUNNING | {"run_id": 3}, "caught_up", 4, None, None),  # ours is not even recorded yet
        (RUNNING, "healthy", None, 10.0, "ok"),
        (RUNNING | {"processing_lag_s": 30.0}, "healthy", None, 10.0, None),  # lagging: wait
        (RUNNING, "stopped", None, None, None),
        (RUNNING | {"state": "stopped"}, "stopped", None, None, "ok"),
        (RUNNING | {"state": "lost"}, "stopped", None, None, "ok"),
    ],
)
def test_when_the_wait_is_over(status, condition, run_id, max_lag, verdict):
    assert evaluate(status, condition, run_id, max_lag) == verdict


def test_the_trigger_serialises_to_what_rebuilds_it():
    trigger = JobStateTrigger("fleet", "east", "caught_up", 60, 1.0, 5, None, {"TIDEGATE_HOME": "/x"}, 100.0)
    path, kwargs = trigger.serialize()
    assert path == "tidegate_airflow.triggers.job_state.JobStateTrigger"
    assert JobStateTrigger(**kwargs).serialize() == (path, kwargs)


def test_an_unknown_condition_is_refused():
    with pytest.raises(ValueError, match="not one of"):
        JobStateTrigger("fleet", "east", "happy", 60)


def test_the_trigger_times_out_with_the_jobs_figures(tmp_path):
    env = {"TIDEGATE_HOME": str(tmp_path), "TIDEGATE_CONTROL_DB": f"sqlite:///{tmp_path / 'c.db'}"}
    trigger = JobStateTrigger("fleet", "east", "caught_up", timeout_s=0.5, poll_s=0.1, environment=env)

    async def first_event():
        async for event in trigger.run():
            return event.payload

    payload = asyncio.run(first_event())
    # a job that never ran cannot catch up: the trigger says so at once, with its status
    assert payload["status"] == "failed" and payload["job_status"]["state"] == "never"


def test_the_trigger_fires_once_a_stopped_job_is_seen(tmp_path):
    from tidegate.control.db import ControlDB

    url = f"sqlite:///{tmp_path / 'c.db'}"
    db = ControlDB(url)
    db.create_run(
        job="fleet",
        region="east",
        version=1,
        fingerprint="f" * 64,
        lineage="l",
        input="/h",
        start_mode="now",
        checkpoint="fresh",
        checkpoint_reason="t",
        status="stopped",
    )
    trigger = JobStateTrigger(
        "fleet",
        "east",
        "stopped",
        timeout_s=5,
        poll_s=0.1,
        environment={"TIDEGATE_HOME": str(tmp_path), "TIDEGATE_CONTROL_DB": url},
    )

    async def first_event():
        async for event in trigger.run():
            return event.payload

    assert asyncio.run(first_event())["status"] == "ok"
