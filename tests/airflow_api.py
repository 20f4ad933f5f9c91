"""Airflow's REST API as the tests and benchmarks drive it: trigger a run, read its state and
its tasks, wait for it, each call retried while the API cannot answer (a promotion of the
metadata database under it). SimpleAuthManager with every user an admin: no token."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from datetime import datetime

from support import wait_for


class Api:
    """One Airflow API server's REST API."""

    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(
            f"{self.url}/api/v2{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as res:
            return json.loads(res.read())

    def trigger(self, dag_id: str, timeout_s: float = 60, conf: dict | None = None) -> str:
        """A new run of ``dag_id``; retried while the API cannot write (a promotion)."""
        body = {"logical_date": None} | ({"conf": conf} if conf else {})
        return wait_for(
            lambda: self._try(lambda: self.call("POST", f"/dags/{dag_id}/dagRuns", body)),
            timeout_s,
            f"triggering {dag_id}",
        )["dag_run_id"]

    def runs(self, dag_id: str) -> list[dict]:
        """The DAG's runs, oldest first (none while the API cannot read)."""
        found = self._try(lambda: self.call("GET", f"/dags/{dag_id}/dagRuns?order_by=start_date&limit=100"))
        return found["dag_runs"] if found else []

    def run_state(self, dag_id: str, run_id: str) -> str | None:
        found = self._try(lambda: self.call("GET", f"/dags/{dag_id}/dagRuns/{run_id}"))
        return found["state"] if found else None

    def task_instances(self, dag_id: str, run_id: str) -> dict[str, dict]:
        found = self._try(lambda: self.call("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances"))
        return {ti["task_id"]: ti for ti in found["task_instances"]} if found else {}

    @staticmethod
    def _try(call):
        try:
            return call()
        except (OSError, urllib.error.HTTPError, ValueError):
            return None


def succeeded(api: Api, dag_id: str, run_id: str, timeout_s: float) -> None:
    try:
        state = wait_for(lambda: (s := api.run_state(dag_id, run_id)) in ("success", "failed") and s, timeout_s, run_id)
    except AssertionError as late:
        raise AssertionError(f"{late}; its tasks: {api.task_instances(dag_id, run_id)}") from None
    assert state == "success", api.task_instances(dag_id, run_id)


def at(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
