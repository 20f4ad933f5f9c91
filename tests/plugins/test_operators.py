"""Operators' own decisions, without Spark: what they record when their work cannot run,
how a wait defers and how it ends."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowException

from tidegate.control.db import ControlDB


class FakeTI:
    def __init__(self) -> None:
        self.pushed: dict = {}

    def xcom_push(self, key: str, value) -> None:
        self.pushed[key] = value


def test_a_completeness_check_that_could_not_run_is_recorded_as_a_failed_check(tmp_path, monkeypatch):
    from tidegate_airflow import operators

    url = f"sqlite:///{tmp_path / 'control.db'}"
    monkeypatch.setenv("TIDEGATE_HOME", str(tmp_path))
    monkeypatch.setenv("TIDEGATE_CONTROL_DB", url)
    monkeypatch.setenv("TIDEGATE_CHECK_SERVICE", "off")

    def spark_submit_dies(self, context):
        raise RuntimeError("spark-submit exited 1: java.io.FileNotFoundException: output/batch_id=245")

    monkeypatch.setattr(operators.TidegateSparkSubmitOperator, "execute", spark_submit_dies)
    check = operators.TidegateCompletenessOperator(
        task_id="check_completeness", job="fleet", target=["east", "consumer"], result_dir=str(tmp_path)
    )
    ti = FakeTI()
    with pytest.raises(AirflowException, match="could not run: spark-submit exited 1"):
        check.execute({"run_id": "manual__2026-11-23", "ti": ti})
    rows = ControlDB(url).checks("fleet")
    assert sorted(row.target for row in rows) == ["consumer", "east"] and not any(row.success for row in rows)
    assert all("could not run" in row.summary and "FileNotFoundException" in row.summary for row in rows)
    # the procedure's record sees a failed check per target, not none
    assert [(o["target"], o["success"]) for o in ti.pushed["outcomes"]] == [("east", False), ("consumer", False)]


def test_a_check_the_warm_service_ran_is_not_submitted_again_and_says_how_long_it_took(tmp_path, monkeypatch):
    import json

    from tidegate.runtime.checks import check_service
    from tidegate_airflow import operators

    monkeypatch.setenv("TIDEGATE_HOME", str(tmp_path))
    monkeypatch.setenv("TIDEGATE_CONTROL_DB", f"sqlite:///{tmp_path / 'control.db'}")
    monkeypatch.setenv("TIDEGATE_CHECK_SERVICE", "5m")
    asked = []

    def served(home, argv, **kwargs):  # the service's answer: the outcomes file the command writes
        asked.append((home, argv))
        result = Path(argv[argv.index("--result") + 1])
        result.parent.mkdir(parents=True)
        with open(result, "w") as out:
            json.dump([{"target": "east", "success": True, "summary": "complete", "message": ""}], out)
        return check_service.Served(0, "complete\n", 3.0)

    monkeypatch.setattr(
        check_service, "start", lambda home, idle_s, env=None: (asked.append(("start", idle_s)), None)[1]
    )
    monkeypatch.setattr(check_service, "run", served)
    monkeypatch.setattr(
        operators.TidegateSparkSubmitOperator,
        "execute",
        lambda self, context: pytest.fail("a check the service ran must not be submitted"),
    )
    ti = FakeTI()
    outcomes = operators.TidegateCompletenessOperator(
        task_id="check", job="fleet", target="east", result_dir=str(tmp_path)
    ).execute({"run_id": "r1", "ti": ti})
    assert (
        asked[0] == ("start", 300.0)
        and asked[1][0] == tmp_path
        and asked[1][1][:4] == ["check", "fleet", "--target", "east"]
    )
    assert outcomes == ti.pushed["outcomes"] and outcomes[0]["warm"] is True and outcomes[0]["task_s"] >= 0


def _deploy(tmp_path, monkeypatch, spec_path: str, **env: str):
    from tidegate_airflow import operators

    url = f"sqlite:///{tmp_path / 'control.db'}"
    for name, value in {"TIDEGATE_HOME": str(tmp_path), "TIDEGATE_CONTROL_DB": url, **env}.items():
        monkeypatch.setenv(name, value)
    deploy = operators.TidegateDeployOperator(task_id="deploy", spec_path=spec_path, tidegate_conn_id="")
    return deploy.execute({}), ControlDB(url)


@pytest.mark.parametrize(
    "spec_path, problem",
    [
        ("/etc/passwd", "is outside the spec folders"),
        ("jobs/../README.md", "contains '..'"),
        ("jobs/escape.yaml", "is outside the spec folders (through a symlink)"),
    ],
)
def test_the_deploy_dags_spec_param_is_confined_to_the_spec_folders(tmp_path, monkeypatch, spec_path, problem):
    from airflow_support import REPO

    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (tmp_path / "secret.yaml").write_text("name: hunter2\n")
    (jobs / "escape.yaml").symlink_to(tmp_path / "secret.yaml")
    monkeypatch.chdir(tmp_path)  # a relative path names the checkout's file, never one under the worker's cwd
    with pytest.raises(Exception) as refused:
        _deploy(
            tmp_path,
            monkeypatch,
            spec_path if spec_path != "jobs/escape.yaml" else str(jobs / "escape.yaml"),
            TIDEGATE_SPEC_DIRS=f"{REPO / 'jobs'}:{jobs}",
        )
    message = str(refused.value)
    assert problem in message and "TIDEGATE_SPEC_DIRS" in message, message
    assert "root:" not in message and "hunter2" not in message
    assert ControlDB(f"sqlite:///{tmp_path / 'control.db'}").jobs() == []  # nothing was registered


def test_the_deploy_dag_reads_specs_of_the_checkouts_jobs_by_default(tmp_path, monkeypatch):
    monkeypatch.delenv("TIDEGATE_SPEC_DIRS", raising=False)
    monkeypatch.chdir(tmp_path)
    result, db = _deploy(tmp_path, monkeypatch, "jobs/device_fleet.yaml")
    assert result["new"] and db.jobs() == [result["job"]]


def test_the_wait_defers_to_the_triggerer_with_this_workers_settings(monkeypatch):
    from airflow.sdk.exceptions import TaskDeferred

    from tidegate_airflow.operators import TidegateWaitOperator

    monkeypatch.setenv("TIDEGATE_HOME", "/srv/tidegate")
    wait = TidegateWaitOperator(task_id="wait", job="fleet", region="west", run_id="12", timeout_s=90.0, max_lag_s=5.0)
    with pytest.raises(TaskDeferred) as deferred:
        wait.execute({})
    trigger = deferred.value.trigger
    _, kwargs = trigger.serialize()
    assert (kwargs["job"], kwargs["region"], kwargs["condition"], kwargs["timeout_s"]) == (
        "fleet",
        "west",
        "caught_up",
        90.0,
    )
    assert kwargs["run_id"] == 12 and kwargs["max_lag_s"] == 5.0  # the run this task started, not a later one
    assert kwargs["environment"]["TIDEGATE_HOME"] == "/srv/tidegate"  # the triggerer may run elsewhere
    assert deferred.value.method_name == "execute_complete"


STATUS = {
    "state": "running",
    "backlog_events": 4200,
    "job_watermark": "2026-11-24T06:00:00Z",
    "watermark_delay_s": 125.0,
    "processing_lag_s": 3.5,
    "log_path": "/r/drivers/run-12.log",
    "detail": "the driver exited 1",
}


@pytest.mark.parametrize(
    "event, outcome",
    [
        ({"status": "ok", "waited_s": 42.5, "job_status": STATUS}, None),
        (
            {"status": "timeout", "waited_s": 90.0, "job_status": STATUS},
            "was not caught_up after 90 s: state running, backlog 4200 events.*raise timeout_s",
        ),
        (
            {"status": "failed", "waited_s": 3.0, "job_status": STATUS | {"state": "failed"}},
            "cannot become caught_up: state failed.*the driver exited 1.*run-12.log",
        ),
    ],
)
def test_the_wait_ends_saying_where_the_job_stands(event, outcome):
    from tidegate_airflow.operators import TidegateWaitOperator

    wait = TidegateWaitOperator(task_id="wait", job="fleet", region="west")
    if outcome is None:
        assert wait.execute_complete({}, event) == {"waited_s": 42.5, **STATUS}
    else:
        with pytest.raises(AirflowException, match=outcome):
            wait.execute_complete({}, event)
