"""The Tidegate page shows which Stream Analytics query a job version came from: the query's
name, path and SHA-256, its text on request, and the side file's path and SHA-256 only; a job
deployed from a spec shows nothing more."""

from __future__ import annotations

import hashlib

import pytest
from ui_airflow import REPO

QUERY, SIDE = REPO / "asa" / "tumbling_counts.asaql", REPO / "asa" / "tumbling_counts.inputs.yaml"


@pytest.fixture
def query_control(tmp_path, monkeypatch):
    """A control database with a job translated from a query and one deployed from a spec."""
    from tidegate.runtime.jobs.config import load_config
    from tidegate.runtime.jobs.controller import Controller

    url = f"sqlite:///{tmp_path / 'control.db'}"
    monkeypatch.chdir(tmp_path)
    controller = Controller(load_config(env={"TIDEGATE_HOME": str(tmp_path), "TIDEGATE_CONTROL_DB": url}))
    controller.deploy_query(QUERY, SIDE)
    controller.deploy(REPO / "jobs" / "device_fleet.yaml")
    monkeypatch.setenv("TIDEGATE_UI_DB", url)
    return url


def test_the_jobs_route_names_the_query_a_version_came_from_with_the_hashes(client, auth, query_control):
    jobs = {j["job"]: j for j in client.get("/tidegate/api/jobs", headers=auth).json()["jobs"]}
    assert jobs["tumbling_counts"]["origin"] == {
        "query": "tumbling_counts.asaql",
        "query_path": str(QUERY),
        "query_sha256": hashlib.sha256(QUERY.read_bytes()).hexdigest(),
        "inputs_path": str(SIDE),
        "inputs_sha256": hashlib.sha256(SIDE.read_bytes()).hexdigest(),
    }
    assert jobs["device-fleet-counts"]["origin"] is None  # deployed from a spec


def test_the_query_route_gives_its_text_but_never_the_side_files(client, auth, query_control):
    res = client.get("/tidegate/api/jobs/tumbling_counts/versions/1/query", headers=auth)
    assert res.status_code == 200
    body = res.json()
    assert body["text"] == QUERY.read_text() and body["query"] == "tumbling_counts.asaql" and body["version"] == 1
    assert "eventsOutOfOrderPolicy" not in res.text  # the side file's content stays out


@pytest.mark.parametrize("route", ["device-fleet-counts/versions/1/query", "tumbling_counts/versions/2/query"])
def test_a_version_not_translated_from_a_query_has_no_query(client, auth, query_control, route):
    res = client.get(f"/tidegate/api/jobs/{route}", headers=auth)
    assert res.status_code == 404 and "was not translated from a query" in res.json()["detail"]


def test_the_query_route_refuses_a_request_without_a_token(client, query_control):
    assert client.get("/tidegate/api/jobs/tumbling_counts/versions/1/query").status_code == 401
