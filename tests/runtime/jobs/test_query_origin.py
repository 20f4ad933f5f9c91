"""A job version deployed from a Stream Analytics query records where it came from: the query's
path, SHA-256 and text, the side file's path and SHA-256; one deployed from a spec records none."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tidegate.control.db import ControlDB
from tidegate.errors import ConfigError
from tidegate.runtime.jobs.config import load_config
from tidegate.runtime.jobs.controller import Controller
from tidegate.runtime.jobs.query_origin import confined_query_file

REPO = Path(__file__).resolve().parents[3]
QUERY, SIDE = REPO / "asa" / "tumbling_counts.asaql", REPO / "asa" / "tumbling_counts.inputs.yaml"


@pytest.fixture
def controller(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'control.db'}"
    return Controller(load_config(env={"TIDEGATE_HOME": str(tmp_path), "TIDEGATE_CONTROL_DB": url}), actor="test")


def test_a_version_deployed_from_a_query_records_the_query_and_side_file(controller):
    result = controller.deploy_query(QUERY, SIDE)
    assert result.new and result.job == "tumbling_counts" and result.version == 1
    row = controller.db.version("tumbling_counts", 1)
    origin = json.loads(row.origin)
    assert origin == {
        "query_path": str(QUERY),
        "query_sha256": hashlib.sha256(QUERY.read_bytes()).hexdigest(),
        "query_text": QUERY.read_text(),
        "inputs_path": str(SIDE),
        "inputs_sha256": hashlib.sha256(SIDE.read_bytes()).hexdigest(),
    }
    assert row.source_path == str(QUERY)  # not the translated spec's temporary file
    assert row.spec_text.startswith(f"# Translated from {QUERY}") and "\nwindow:" in row.spec_text  # the spec it became
    (op,) = [o for o in controller.db.operations() if o.action == "deploy"]
    assert json.loads(op.detail)["query"] == str(QUERY)


def test_the_same_query_deployed_again_is_the_same_version(controller):
    first = controller.deploy_query(QUERY, SIDE)
    again = controller.deploy_query(QUERY, SIDE)
    assert (again.version, again.fingerprint, again.new) == (first.version, first.fingerprint, False)


def test_a_version_deployed_from_a_spec_records_no_origin(controller):
    result = controller.deploy(REPO / "jobs" / "device_fleet.yaml")
    assert controller.db.version(result.job, result.version).origin is None


def test_a_query_without_a_tidegate_form_is_refused_with_its_line_and_column(controller, tmp_path):
    query = tmp_path / "hop.asaql"
    query.write_text("SELECT a\nINTO output\nFROM input TIMESTAMP BY t\nGROUP BY a, HoppingWindow(minute, 1)\n")
    with pytest.raises(ConfigError, match=r"hop\.asaql:4:13: HoppingWindow"):
        controller.deploy_query(query)
    assert controller.db.jobs() == []


def test_a_query_of_outputs_on_one_chain_deploys_as_one_job_with_its_named_outputs(controller):
    query, side = REPO / "asa" / "archive_and_alerts.asaql", REPO / "asa" / "archive_and_alerts.inputs.yaml"
    result = controller.deploy_query(query, side)
    assert result.new and result.job == "archive_and_alerts"
    spec_text = controller.db.version(result.job, result.version).spec_text
    assert "outputs:\n    alerts: {step: alerts}   # INTO alerts" in spec_text


def test_a_query_whose_outputs_fork_is_refused_naming_the_jobs_it_makes_and_nothing_is_deployed(controller):
    query = REPO / "asa" / "hot_and_cold_readings.asaql"
    with pytest.raises(ConfigError) as err:
        controller.deploy_query(query, query.with_suffix(".inputs.yaml"))
    assert "so they are 2 jobs: hot_and_cold_readings-hot, hot_and_cold_readings-cold" in err.value.problem
    assert "tidegate asa import" in err.value.fix
    assert controller.db.jobs() == []


@pytest.mark.parametrize(
    "given, side_file, problem",
    [
        ("", False, "the query path is empty"),
        ("/etc/passwd", False, "the query path '/etc/passwd' is outside the spec folders"),
        ("jobs/../secret.asaql", False, "contains '..'"),
        ("jobs/escape.asaql", False, "outside the spec folders (through a symlink)"),
        ("jobs/q.yaml", False, "a query is a .asaql file"),
        ("jobs/q.asaql", True, "a side file is a .yaml or .yml file"),
        ("jobs/none.asaql", False, "no such query file"),
    ],
)
def test_a_query_or_side_file_path_from_a_dag_is_confined_to_the_spec_folders(tmp_path, given, side_file, problem):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (tmp_path / "secret.asaql").write_text("SELECT hunter2")
    (jobs / "escape.asaql").symlink_to(tmp_path / "secret.asaql")
    (jobs / "q.yaml").write_text("inputs: {}\n")
    (jobs / "q.asaql").write_text("SELECT 1\n")
    with pytest.raises(ConfigError) as refused:
        confined_query_file(given, (jobs,), tmp_path, side_file=side_file)
    assert problem in str(refused.value) and "hunter2" not in str(refused.value)


def test_a_query_in_the_spec_folders_is_named_relative_to_the_checkout(tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "q.asaql").write_text("SELECT 1\n")
    assert confined_query_file("jobs/q.asaql", (tmp_path / "jobs",), tmp_path) == (tmp_path / "jobs" / "q.asaql")


def test_a_database_of_schema_3_gains_the_origin_column_on_open(tmp_path):
    from sqlalchemy import text

    url = f"sqlite:///{tmp_path / 'old.db'}"
    db = ControlDB(url)
    with db.engine.begin() as c:
        c.execute(text("ALTER TABLE job_versions DROP COLUMN origin"))
        c.execute(text("UPDATE tidegate_schema SET version = 3"))
    db.dispose()
    reopened = ControlDB(url)
    assert reopened.schema_version() == 4
    assert reopened.register_version("j", 1, "f" * 64, {}, "name: j", None, origin={"query_path": "/q.asaql"})
    assert json.loads(reopened.version("j", 1).origin) == {"query_path": "/q.asaql"}
