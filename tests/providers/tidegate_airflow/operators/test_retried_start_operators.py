"""Every DAG's start, run again by Airflow after its first driver died while starting and the
supervisor relaunched it: the retry returns the relaunched run as its result; a run of another
version is still refused (see :mod:`tidegate.runtime.jobs.adoption`).

Each start is the DAG's own operator, with the DAG's arguments and task id, over a real SQLite
control database; no driver runs (the relaunched one is a row holding the job's lease from
another host). The real thing, with Spark: ``tests/runtime/jobs/test_start_retry_adopts.py``.
"""

from __future__ import annotations

import time

import pytest

from platform_support import Platform, fill
from tidegate.runtime.jobs.controller import ControllerError
from tidegate.runtime.jobs.process import job_lease, supervisor_lease

JOB = "device-fleet-counts"
RUN = "manual__2026-11-29T18:00:00+00:00"
ELSEWHERE = "driver-host-elsewhere"

# (DAG, the start's task id, its mode, its version, keep_running) as each DAG file declares it
STARTS = [
    ("tidegate_deploy", "start", "auto", 1, True),
    ("tidegate_restart", "start", "last-stopped", None, None),
    ("tidegate_planned_stop", "region_1.start", "last-stopped", 1, True),
    ("tidegate_failover", "restart_failed", "last-stopped", None, True),
]


@pytest.fixture
def platform(tmp_path, monkeypatch) -> Platform:
    fill(tmp_path / "event-log", 300, seed=3)
    root = tmp_path / "platform"
    root.mkdir()
    p = Platform(root, tmp_path / "event-log")
    for name, value in p.env.items():  # the operators' hook reads the platform's environment
        monkeypatch.setenv(name, value)
    p.controller.deploy(p.spec_file())
    # a supervisor holds the region: a start asking to keep the job running launches none here
    p.controller.db.acquire_lease(supervisor_lease("east"), "supervisor@elsewhere", 300, host=ELSEWHERE)
    return p


def first_attempt_and_relaunch(p: Platform, task_id: str, mode: str, version: int = 1) -> tuple[int, int]:
    """The first attempt's run, which died while its SparkSession was being built, and the
    supervisor's relaunch of it, running elsewhere."""
    db = p.controller.db
    _, spec = p.controller.spec(JOB, version)
    common = dict(
        job=JOB, region="east", version=version, fingerprint=spec.fingerprint, lineage="lin-1", kind="job",
        input=str(p.event_log), start_mode="now", checkpoint="fresh", checkpoint_reason="first start",
    )  # fmt: skip
    first = db.create_run(
        **common,
        status="failed",
        status_detail="Py4JNetworkError: Answer from Java side is empty",
        context={"dag_run": RUN, "task": task_id, "asked": {"mode": mode, "at_us": None}},
    )
    relaunched = db.create_run(
        **common,
        status="running",
        host=ELSEWHERE,
        pid=4242,
        started_at=time.time(),
        context={"auto_restart": 1, "relaunch_of": first},
    )
    assert db.acquire_lease(job_lease(JOB, "east"), f"run-{relaunched}", 60, host=ELSEWHERE, pid=4242)
    db.set_deployment(JOB, "east", version=version, desired="running", current_run=relaunched, keep_running=True)
    return first, relaunched


def start_operator(task_id: str, mode: str, version: int | None, keep_running: bool | None):
    from tidegate_airflow.operators.lifecycle import TidegateStartOperator

    return TidegateStartOperator(
        task_id=task_id,
        job=JOB,
        region="east",
        mode=mode,
        version=version,
        keep_running=keep_running,
        tidegate_conn_id="",
    )


@pytest.mark.parametrize(("dag", "task_id", "mode", "version", "keep_running"), STARTS, ids=[s[0] for s in STARTS])
def test_a_dags_retried_start_returns_the_run_the_supervisor_relaunched(
    platform, dag, task_id, mode, version, keep_running
):
    first, relaunched = first_attempt_and_relaunch(platform, task_id, mode)
    result = start_operator(task_id, mode, version, keep_running).execute({"run_id": RUN})
    assert (result["run_id"], result["status"], result["version"]) == (relaunched, "running", 1)
    assert f"relaunched by the region supervisor from run {first}" in result["adopted"]
    assert [r.id for r in platform.controller.db.runs(JOB, "east")] == [relaunched, first]  # nothing launched


@pytest.mark.parametrize(("dag", "task_id", "mode", "version", "keep_running"), STARTS, ids=[s[0] for s in STARTS])
def test_a_dags_start_in_another_dag_run_is_refused_while_the_job_runs(
    platform, dag, task_id, mode, version, keep_running
):
    first_attempt_and_relaunch(platform, task_id, "now")  # someone's start from another point
    with pytest.raises(ControllerError, match=f"job {JOB} already runs in east"):
        start_operator(task_id, mode, version, keep_running).execute({"run_id": "manual__2026-11-29T19:00:00+00:00"})


def test_a_planned_stops_start_of_the_new_version_is_refused_while_the_previous_one_runs(platform):
    platform.controller.deploy(platform.spec_file(version=2))
    first_attempt_and_relaunch(platform, "region_1.start", "last-stopped", version=1)
    with pytest.raises(ControllerError, match=f"job {JOB} already runs in east"):
        start_operator("region_1.start", "last-stopped", 2, True).execute({"run_id": RUN})
