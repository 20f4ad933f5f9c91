"""The deploy DAG's source params: a spec or a Stream Analytics query (with its side file), exactly
one; the translate step fails naming what was wrong — a query's line and column — and registers
nothing; a query's paths are confined to the spec folders as a spec's is."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tidegate.control.db import ControlDB
from tidegate.errors import ConfigError
from tidegate_airflow.dag_defaults import SPEC
from tidegate_airflow.deploy_source import DeploySource, deploy_source

REPO = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize(
    "spec, query, inputs, chosen",
    [
        ("jobs/a.yaml", "", "", DeploySource(spec="jobs/a.yaml")),
        (SPEC, "jobs/q.asaql", "", DeploySource(query="jobs/q.asaql")),  # the form's default spec gives way
        ("", " jobs/q.asaql ", "jobs/q.inputs.yaml", DeploySource(query="jobs/q.asaql", inputs="jobs/q.inputs.yaml")),
        (None, "jobs/q.asaql", None, DeploySource(query="jobs/q.asaql")),
    ],
)
def test_the_form_deploys_a_spec_or_a_query(spec, query, inputs, chosen):
    assert deploy_source(spec, query, inputs) == chosen


@pytest.mark.parametrize(
    "spec, query, inputs, problem",
    [
        ("jobs/a.yaml", "jobs/q.asaql", "", "both spec and query are given.*clear spec"),
        ("", "", "", "neither spec nor query is given"),
        (SPEC, "", "jobs/q.inputs.yaml", "inputs is a query's side file, and no query is given"),
        (SPEC, ["jobs/q.asaql"], "", "query is \\['jobs/q.asaql'\\], not a path"),
    ],
)
def test_a_form_that_names_no_single_source_is_refused_saying_which_field_to_change(spec, query, inputs, problem):
    with pytest.raises(ConfigError, match=problem):
        deploy_source(spec, query, inputs)


def _operator(kind: str, tmp_path, monkeypatch, **source):
    from tidegate_airflow.operators import lifecycle

    url = f"sqlite:///{tmp_path / 'control.db'}"
    env = {"TIDEGATE_HOME": str(tmp_path), "TIDEGATE_CONTROL_DB": url, "TIDEGATE_SPEC_DIRS": str(tmp_path / "jobs")}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    operator = getattr(lifecycle, f"Tidegate{kind}Operator")
    return operator(task_id=kind.lower(), tidegate_conn_id="", **source), ControlDB(url)


@pytest.fixture
def jobs(tmp_path) -> Path:
    folder = tmp_path / "jobs"
    folder.mkdir()
    for name in ("tumbling_counts.asaql", "tumbling_counts.inputs.yaml"):
        shutil.copy(REPO / "asa" / name, folder / name)
    (folder / "hop.asaql").write_text(
        "SELECT a\nINTO output\nFROM input TIMESTAMP BY t\nGROUP BY a, HoppingWindow(minute, 1)\n"
    )
    return folder


def test_the_translate_step_fails_naming_the_querys_line_and_column_and_registers_nothing(tmp_path, monkeypatch, jobs):
    from airflow.sdk.exceptions import AirflowFailException

    step, db = _operator("Translate", tmp_path, monkeypatch, spec_path=SPEC, query_path=str(jobs / "hop.asaql"))
    with pytest.raises(AirflowFailException, match=r"hop\.asaql:4:13: HoppingWindow takes 2 sizes"):
        step.execute({})
    assert db.jobs() == []


def test_the_translate_step_gives_paths_and_hashes_and_the_deploy_records_them(tmp_path, monkeypatch, jobs):
    source = {
        "spec_path": "",
        "query_path": "tumbling_counts.asaql",  # found in the spec folder
        "inputs_path": "tumbling_counts.inputs.yaml",
    }
    step, db = _operator("Translate", tmp_path, monkeypatch, **source)
    checked = step.execute({})
    assert checked["query_path"] == str(jobs / "tumbling_counts.asaql") and len(checked["inputs_sha256"]) == 64
    assert "query_text" not in checked and db.jobs() == []  # XCom gets no text; nothing registered yet
    deploy, _ = _operator("Deploy", tmp_path, monkeypatch, **source)
    result = deploy.execute({})
    assert result["job"] == "tumbling_counts" and result["new"]
    assert db.version("tumbling_counts", 1).source_path == checked["query_path"]


@pytest.mark.parametrize(
    "query, inputs, problem",
    [
        ("/etc/passwd", "", "the query path '/etc/passwd' is outside the spec folders"),
        ("tumbling_counts.asaql", "/etc/passwd", "the side file path '/etc/passwd' is outside the spec folders"),
        ("jobs/../jobs/hop.asaql", "", "contains '..'"),
        ("tumbling_counts.inputs.yaml", "", "a query is a .asaql file"),
    ],
)
def test_a_querys_paths_are_confined_to_the_spec_folders(tmp_path, monkeypatch, jobs, query, inputs, problem):
    from airflow.sdk.exceptions import AirflowFailException

    for kind in ("Translate", "Deploy"):
        step, db = _operator(kind, tmp_path, monkeypatch, spec_path="", query_path=query, inputs_path=inputs)
        with pytest.raises(AirflowFailException) as refused:
            step.execute({})
        message = str(refused.value)
        assert problem in message and " — " in message, message  # what was wrong — what to do
        assert "root:" not in message and db.jobs() == []
