"""The deploy's start retried the way Airflow retries it, with real drivers, a real supervisor and
real Spark: its first driver's JVM dies while the SparkSession is being built (as a loaded
machine's did, dropping its Py4J connection), the region supervisor relaunches the run, and
the retry of the same task in the same DAG run adopts the relaunched run instead of refusing
it; the job then catches up (see :mod:`tidegate.runtime.jobs.adoption`). The deploy's first
start, and a planned stop's start of a new version after its stop (as the failover's restore
starts too); every DAG's start is held to the rule without Spark in
``tests/providers/tidegate_airflow/operators/test_retried_start_operators.py``.
"""

from __future__ import annotations

import signal
import threading
import time

import psutil
import pytest

from platform_support import fill
from tidegate.runtime.jobs.controller import ControllerError
from tidegate.runtime.jobs.liveness import LIVE

pytestmark = [pytest.mark.spark, pytest.mark.slow]
JOB = "device-fleet-counts"
RUN = "manual__2026-11-29T18:00:00+00:00"


def kill_jvm_while_its_session_is_built(db, found: dict, after_run: int = 0, timeout_s: float = 240.0) -> None:
    """Wait for the job's next driver (of a run after ``after_run``) to start its Spark JVM —
    which it does building its SparkSession, before the query starts — and kill -9 the JVM
    alone: the driver loses its Py4J gateway and its session never comes up. ``found``: the
    run, and its status when killed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = db.latest_run(JOB, "east")
        if run is not None and run.id > after_run and run.pid and run.started_at is not None:  # claimed
            try:
                jvm = next((c for c in psutil.Process(run.pid).children(recursive=True) if c.name() == "java"), None)
            except psutil.NoSuchProcess:
                jvm = None  # the driver ended already: the next run's is watched for
            if jvm is not None:
                jvm.send_signal(signal.SIGKILL)
                found.update(run=run.id, status=db.run(run.id).status)
                return
        time.sleep(0.02)
    found["error"] = "no driver started its JVM"


def retried_start_adopts_the_relaunch(p, start) -> int:
    """Run ``start`` (a DAG's start operator) as Airflow would: its first attempt fails because
    its driver's JVM is killed while the session is built; once the supervisor relaunched the
    run, the retry — the same task in the same DAG run — returns that run. The relaunched run."""
    db = p.controller.db
    before = db.latest_run(JOB, "east")
    killed: dict = {}
    killer = threading.Thread(
        target=kill_jvm_while_its_session_is_built, args=(db, killed, before.id if before else 0), daemon=True
    )
    killer.start()
    with pytest.raises(ControllerError, match="while starting|before it started"):
        start.execute({"run_id": RUN})  # the first attempt: its driver died, the task fails
    killer.join(timeout=30)
    assert "error" not in killed, killed["error"]
    first = db.run(killed["run"])
    assert killed["status"] == "starting" and first.status in ("failed", "lost"), [
        (r.id, r.status, r.status_detail) for r in db.runs(JOB, "east")
    ]
    assert first.first_batch_at is None  # its session never came up (Py4J: connection refused, or the like)

    # the supervisor (the start asked to keep the job running) relaunches the run from where it stood
    deadline = time.monotonic() + 120
    while (relaunch := db.latest_run(JOB, "east")).id == first.id and time.monotonic() < deadline:
        time.sleep(0.2)
    assert relaunch.id != first.id and relaunch.status in LIVE, "the supervisor did not relaunch the run"

    result = start.execute({"run_id": RUN})  # Airflow's retry: the same task in the same DAG run

    assert result["run_id"] == relaunch.id and result["status"] == "running"
    assert f"relaunched by the region supervisor from run {first.id}" in result["adopted"]
    assert [r.id for r in db.runs(JOB, "east")][:2] == [relaunch.id, first.id]  # the retry launched nothing
    status = p.wait_caught_up(JOB, "east")
    assert status.run_id == relaunch.id and status.caught_up
    return relaunch.id


@pytest.fixture
def platform(platform_factory, tmp_path, monkeypatch):
    fill(tmp_path / "event-log", 1_500, seed=17)
    p = platform_factory("retried-start", tmp_path / "event-log")
    for name, value in p.env.items():  # the operators' hook reads the platform's environment
        monkeypatch.setenv(name, value)
    return p


def start_operator(task_id: str, mode: str, version: int | None):
    from tidegate_airflow.operators.lifecycle import TidegateStartOperator

    return TidegateStartOperator(
        task_id=task_id, job=JOB, region="east", mode=mode, version=version, keep_running=True, tidegate_conn_id=""
    )


def deploy(p, **changes) -> dict:
    from tidegate_airflow.operators.lifecycle import TidegateDeployOperator

    spec = str(p.spec_file(**changes))
    return TidegateDeployOperator(task_id="deploy", spec_path=spec, tidegate_conn_id="").execute({})


def test_a_deploys_start_retried_after_its_driver_died_building_its_session_adopts_the_relaunch(platform):
    deployed = deploy(platform)
    retried_start_adopts_the_relaunch(platform, start_operator("start", "auto", deployed["version"]))


def test_a_planned_stops_start_of_the_new_version_retried_so_adopts_the_relaunch_of_that_version(platform):
    """The turn's start (and the failover's restore, which starts the same way): after a stop,
    last-stopped, keeping the job running."""
    first = deploy(platform)
    platform.controller.start(JOB, "east", version=first["version"], mode="now")
    platform.wait_caught_up(JOB, "east")
    platform.controller.stop(JOB, "east")
    assert deploy(platform, version=2)["version"] == 2  # the same logic under a new number
    run = retried_start_adopts_the_relaunch(platform, start_operator("region_1.start", "last-stopped", 2))
    assert platform.controller.db.run(run).version == 2
