"""A retried start or stop against a real control database: it adopts what its first attempt left
in flight and refuses anything else (see :mod:`tidegate.runtime.jobs.adoption`).

No driver runs: each live run is a row whose driver holds the job's lease from another host,
as one the supervisor relaunched there would.
"""

from __future__ import annotations

import json
import time

import pytest

from platform_support import Platform, fill
from tidegate.runtime.jobs.controller import Controller, ControllerError, JobStatus
from tidegate.runtime.jobs.process import job_lease

JOB = "device-fleet-counts"
STEP = {"dag_run": "manual__2026-11-29T18:00:00+00:00", "task": "start"}
ELSEWHERE = "driver-host-elsewhere"


@pytest.fixture
def platform(tmp_path) -> Platform:
    fill(tmp_path / "event-log", 300, seed=3)
    root = tmp_path / "platform"
    root.mkdir()
    p = Platform(root, tmp_path / "event-log")
    p.controller.deploy(p.spec_file())
    p.controller.deploy(p.spec_file(version=2))  # the same logic under a newer number
    return p


def live_run(p: Platform, version: int = 1, status: str = "running", region: str = "east", **context) -> int:
    """A run of ``version`` whose driver runs elsewhere and holds the job's lease."""
    db = p.controller.db
    _, spec = p.controller.spec(JOB, version)
    run = db.create_run(
        job=JOB, region=region, version=version, fingerprint=spec.fingerprint, lineage="lin-1", kind="job",
        input=str(p.event_log), start_mode="now", checkpoint="fresh", checkpoint_reason="first start",
        status=status, host=ELSEWHERE, pid=4242, started_at=time.time(), context=context or None,
    )  # fmt: skip
    assert db.acquire_lease(job_lease(JOB, region), f"run-{run}", 60, host=ELSEWHERE, pid=4242)
    db.set_deployment(JOB, region, version=version, desired="running", current_run=run)
    return run


def dead_run(p: Platform, version: int = 1, **context) -> int:
    _, spec = p.controller.spec(JOB, version)
    return p.controller.db.create_run(
        job=JOB, region="east", version=version, fingerprint=spec.fingerprint, lineage="lin-1", kind="job",
        input=str(p.event_log), start_mode="now", checkpoint="fresh", checkpoint_reason="first start",
        status="failed", status_detail="Py4JNetworkError: Answer from Java side is empty", context=context,
    )  # fmt: skip


# -- start ------------------------------------------------------------------------------------


def test_a_retried_start_adopts_the_run_the_supervisor_relaunched_from_its_first_attempt(platform):
    """The observed failure: the first driver's JVM dropped its Py4J connection while the
    SparkSession was being built, the supervisor relaunched the run, and the retry was refused."""
    first = dead_run(platform, **STEP, asked={"mode": "auto", "at_us": None})
    relaunched = live_run(platform, status="starting", auto_restart=1, relaunch_of=first)

    result = platform.controller.start(JOB, "east", version=1, mode="auto", context=STEP, wait_s=0)

    assert (result.run_id, result.version, result.status) == (relaunched, 1, "starting")
    assert result.adopted and f"relaunched by the region supervisor from run {first}" in result.adopted
    assert result.plan.reason.startswith("adopted: ")
    db = platform.controller.db
    assert [r.id for r in db.runs(JOB, "east")] == [relaunched, first]  # no run of its own
    assert db.operations(JOB)[0].outcome == "done" and "adopted" in db.operations(JOB)[0].detail


def test_a_retried_start_adopts_its_own_run_once_it_runs(platform):
    mine = live_run(platform, **STEP, asked={"mode": "custom", "at_us": 1_000})
    result = platform.controller.start(JOB, "east", version=1, mode="custom", at=1_000, context=STEP)
    assert (result.run_id, result.status) == (mine, "running")  # waited for: it runs
    assert "was started by this step" in (result.adopted or "")


def test_a_live_run_of_another_version_is_refused_with_the_same_message_as_ever(platform):
    other = live_run(platform, version=1, **STEP, asked={"mode": "auto", "at_us": None})
    with pytest.raises(ControllerError, match=f"job {JOB} already runs in east \\(run {other}, running") as refused:
        platform.controller.start(JOB, "east", version=2, mode="auto", context=STEP, wait_s=0)
    assert "stop it first" in str(refused.value)
    assert [r.id for r in platform.controller.db.runs(JOB, "east")] == [other]


def test_someone_elses_run_from_another_start_point_is_refused(platform):
    live_run(platform, actor="cli", asked={"mode": "now", "at_us": None})
    with pytest.raises(ControllerError, match="already runs in east"):
        platform.controller.start(JOB, "east", version=1, mode="last-stopped", context=STEP, wait_s=0)


def test_a_start_records_the_start_point_it_was_asked_for_and_a_race_lost_to_another_start_is_refused(platform):
    winner = live_run(platform, region="west", actor="cli")  # a start from a shell, at the same moment
    loser = Controller(platform.config, actor="racer")
    loser.status_of = lambda job, region: JobStatus(job, region, "never")  # type: ignore[method-assign]  # looked first
    with pytest.raises(ControllerError, match="at the same moment"):
        loser.start(JOB, "west", version=1, mode="now", context=STEP, wait_s=0)
    refused = platform.controller.db.runs(JOB, "west")[0]
    assert refused.id != winner and json.loads(refused.context)["asked"] == {"mode": "now", "at_us": None}


def test_a_retry_that_loses_the_lease_race_to_the_supervisors_relaunch_adopts_it(platform):
    first = dead_run(platform, **STEP, asked={"mode": "auto", "at_us": None})
    relaunched = live_run(platform, status="starting", auto_restart=1, relaunch_of=first)
    retry = Controller(platform.config, actor="airflow")
    retry.status_of = lambda job, region: JobStatus(job, region, "failed")  # type: ignore[method-assign]  # looked first

    result = retry.start(JOB, "east", version=1, mode="auto", context=STEP, wait_s=0)

    assert result.run_id == relaunched and result.adopted
    statuses = [r.status for r in platform.controller.db.runs(JOB, "east")]
    assert statuses == ["refused", "starting", "failed"]  # its own attempt refused, the relaunch adopted


# -- stop -------------------------------------------------------------------------------------


def pair(p: Platform) -> None:
    """West deployed and never run: east is the job's last healthy duplicate."""
    p.controller.db.set_deployment(JOB, "west", version=1, desired="running")


def test_a_stop_of_the_last_healthy_duplicate_is_refused(platform):
    live_run(platform)
    pair(platform)
    with pytest.raises(ControllerError, match="refusing to stop job .* last healthy duplicate"):
        platform.controller.stop(JOB, "east", wait=False)


@pytest.mark.parametrize("status", ["stopping", "running"])  # running: its driver not yet at the request
def test_a_retried_stop_adopts_the_stop_its_first_attempt_asked_for(platform, status):
    """Its partner went down meanwhile: a new stop would be refused, but this one is under way."""
    run, requested = live_run(platform, status=status), time.time() - 5
    platform.controller.db.update_run(run, stop_requested_at=requested)
    pair(platform)

    stopped = platform.controller.stop(JOB, "east", wait=False, reason="dag run manual__1")

    db = platform.controller.db
    assert stopped.run_id == run
    assert db.run(run).stop_requested_at == requested  # asked once, not again
    assert db.deployment(JOB, "east").desired == "stopped"
    operation = db.operations(JOB)[0]
    assert (operation.action, operation.outcome) == ("stop", "done") and "already" in operation.detail


def test_a_retried_stop_of_a_run_that_already_stopped_reports_it(platform):
    run = live_run(platform)
    db = platform.controller.db
    db.update_run(run, status="stopped", ended_at=time.time())
    db.release_lease(job_lease(JOB, "east"), f"run-{run}")
    pair(platform)
    assert platform.controller.stop(JOB, "east").state == "stopped"
