"""The deploy operator: the spec path a DAG's form gives is confined to the spec folders, and a
relative one names the checkout's file."""

from __future__ import annotations

import pytest

from tidegate.control.db import ControlDB


def _deploy(tmp_path, monkeypatch, spec_path: str, **env: str):
    from tidegate_airflow.operators.lifecycle import TidegateDeployOperator

    url = f"sqlite:///{tmp_path / 'control.db'}"
    for name, value in {"TIDEGATE_HOME": str(tmp_path), "TIDEGATE_CONTROL_DB": url, **env}.items():
        monkeypatch.setenv(name, value)
    deploy = TidegateDeployOperator(task_id="deploy", spec_path=spec_path, tidegate_conn_id="")
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


@pytest.mark.parametrize("version", ["", "3", 2.0])
def test_a_start_given_a_version_that_is_not_a_number_fails_saying_how_to_pass_one(version):
    from airflow.sdk.exceptions import AirflowFailException

    from tidegate_airflow.operators.lifecycle import TidegateStartOperator

    start = TidegateStartOperator(task_id="start", job="fleet", region="east", version=version, tidegate_conn_id="")
    with pytest.raises(AirflowFailException, match=f"version {version!r} is not a version number.*native objects"):
        start.execute({"run_id": "manual__1", "task": None})
