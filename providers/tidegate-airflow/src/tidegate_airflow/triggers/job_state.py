"""Waiting for a streaming job without holding a worker slot: a trigger on the triggerer.

``JobStateTrigger`` polls the control database (in a thread: the database calls are
synchronous) until the job × region reaches a condition — ``caught_up`` (its run has
read the backlog a start left it), ``healthy`` (running, caught up, and its processing-
time lag under a bound) or ``stopped`` — or fails (the driver died), or the timeout passes.
The event it fires carries the job's figures, so the task can say how far behind it was.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

CONDITIONS = ("caught_up", "healthy", "stopped")


def evaluate(status: dict[str, Any], condition: str, run_id: int | None, max_lag_s: float | None) -> str | None:
    """ "ok" when ``condition`` holds, "failed" when it never will, None to keep waiting.

    A pure function of a status summary (:func:`tidegate_airflow.hooks.tidegate.status_summary`), so
    tests pin it down; the sensor decides its pokes by it too."""
    state = status.get("state")
    if run_id is not None and status.get("run_id") != run_id and condition != "stopped":
        return "failed" if status.get("run_id") and status["run_id"] > run_id else None
    if condition == "stopped":
        return "ok" if state not in ("starting", "running", "stopping") else None
    if state in ("failed", "lost", "stopped", "never"):
        return "failed"
    if state != "running" or not status.get("caught_up"):
        return None
    if condition == "healthy" and max_lag_s is not None:
        lag = status.get("processing_lag_s")
        return "ok" if lag is not None and lag <= max_lag_s else None
    return "ok"


class JobStateTrigger(BaseTrigger):
    def __init__(
        self,
        job: str,
        region: str,
        condition: str,
        timeout_s: float,
        poll_s: float = 2.0,
        run_id: int | None = None,
        max_lag_s: float | None = None,
        environment: dict | None = None,
        started_at: float | None = None,
    ) -> None:
        super().__init__()
        if condition not in CONDITIONS:
            raise ValueError(f"condition {condition!r} is not one of {', '.join(CONDITIONS)}")
        self.job = job
        self.region = region
        self.condition = condition
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.run_id = run_id
        self.max_lag_s = max_lag_s
        self.environment = environment or {}
        self.started_at = started_at or time.time()

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "job": self.job,
                "region": self.region,
                "condition": self.condition,
                "timeout_s": self.timeout_s,
                "poll_s": self.poll_s,
                "run_id": self.run_id,
                "max_lag_s": self.max_lag_s,
                "environment": self.environment,
                "started_at": self.started_at,
            },
        )

    def _status(self) -> dict[str, Any]:
        import os

        from tidegate.runtime.jobs.config import load_config
        from tidegate.runtime.jobs.controller import Controller
        from tidegate_airflow.hooks.tidegate import status_summary

        env = dict(os.environ) | self.environment
        controller = Controller(load_config(env=env), actor="airflow-trigger")
        try:
            return status_summary(controller.status_of(self.job, self.region))
        finally:
            controller.close()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = self.started_at + self.timeout_s
        while True:
            status = await asyncio.to_thread(self._status)
            verdict = evaluate(status, self.condition, self.run_id, self.max_lag_s)
            waited = time.time() - self.started_at
            if verdict is not None:
                yield TriggerEvent({"status": verdict, "waited_s": waited, "job_status": status})
                return
            if time.time() >= deadline:
                yield TriggerEvent({"status": "timeout", "waited_s": waited, "job_status": status})
                return
            await asyncio.sleep(self.poll_s)
