"""Waiting until a job × region is caught up, healthy or stopped: a sensor that defers.

By default the sensor hands the wait to :class:`~tidegate_airflow.triggers.job_state.JobStateTrigger`
on the triggerer, so no worker slot is held while a job catches up; with ``deferrable=False``
it pokes the control database itself (``mode="reschedule"`` frees the slot between pokes).
Either way the verdict is :func:`~tidegate_airflow.triggers.job_state.evaluate` of the job's
status, the task returns the job's figures when the condition holds, and a timeout or a run
that can never get there fails the task naming its backlog, watermark and lag.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout

from tidegate_airflow.hooks.tidegate import TidegateHook
from tidegate_airflow.triggers.job_state import CONDITIONS, JobStateTrigger, evaluate

TIDEGATE_ENV_PREFIX = "TIDEGATE_"
# settings whose name says they hold a secret (or where one is): the trigger never gets them
_SECRET_NAMES = ("PASSWORD", "SECRET", "TOKEN", "CREDENTIAL")


def tidegate_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The TIDEGATE_* settings of this worker handed to the trigger (which may run elsewhere),
    without a secret: Airflow stores a trigger's arguments in its metadata database while the
    task is deferred. Left out are settings named for a secret (a SASL password, its file) and
    any URL that carries a password (a control database's ``user:password@host``): the
    triggerer reads those from its own environment, as the worker did."""
    env = os.environ if env is None else env
    out = {}
    for name, value in env.items():
        if not name.startswith(TIDEGATE_ENV_PREFIX) or any(s in name.upper() for s in _SECRET_NAMES):
            continue
        if "://" in value and _has_password(value):
            continue
        out[name] = value
    return out


def _has_password(url: str) -> bool:
    try:
        return bool(urlsplit(url.strip()).password)
    except ValueError:  # not a URL Python can read: it may still hold one
        return "@" in url


class TidegateWaitSensor(BaseSensorOperator):
    """Wait until ``job`` in ``region`` meets ``condition`` (``caught_up``, ``healthy`` — caught
    up with its processing-time lag under ``max_lag_s`` — or ``stopped``); with ``run_id``, that
    run of it. ``timeout_s`` bounds the wait (templated, so a DAG's form can set it); the
    sensor's ``poke_interval`` is how often the job's status is read."""

    template_fields: Sequence[str] = ("job", "region", "run_id", "timeout_s")

    def __init__(
        self,
        *,
        job: str,
        region: str,
        condition: str = "caught_up",
        run_id: int | None = None,
        timeout_s: float | str = 1800.0,  # a number, or a template that renders to one
        max_lag_s: float | None = None,
        deferrable: bool = True,
        poke_interval: float = 2.0,
        tidegate_conn_id: str = TidegateHook.default_conn_name,
        **kwargs,
    ) -> None:
        if condition not in CONDITIONS:
            raise ValueError(f"condition {condition!r} is not one of {', '.join(CONDITIONS)}")
        super().__init__(poke_interval=poke_interval, **kwargs)
        self.job, self.region, self.condition, self.run_id = job, region, condition, run_id
        self.timeout_s, self.max_lag_s = timeout_s, max_lag_s
        self.deferrable = deferrable
        self.tidegate_conn_id = tidegate_conn_id
        self._started = 0.0
        self._last: dict[str, Any] = {}

    def execute(self, context) -> Any:
        self.timeout = float(self.timeout_s)  # known once the template is rendered
        if not self.deferrable:
            self._started = time.time()
            try:
                return super().execute(context)
            except AirflowSensorTimeout:
                raise AirflowSensorTimeout(self._timed_out(time.time() - self._started, self._last)) from None
        self.defer(
            trigger=JobStateTrigger(
                self.job,
                self.region,
                self.condition,
                self.timeout,
                self.poke_interval,
                self.run_id,
                self.max_lag_s,
                tidegate_environment(),
            ),
            method_name="execute_complete",
        )

    def poke(self, context) -> bool | PokeReturnValue:
        hook = TidegateHook(self.tidegate_conn_id, actor="airflow-sensor")
        try:
            status = self._last = hook.status(self.job, self.region)
        finally:
            hook.controller.close()
        verdict = evaluate(status, self.condition, self.run_id, self.max_lag_s)
        if verdict == "failed":
            raise AirflowFailException(self._cannot(status))
        if verdict == "ok":
            return PokeReturnValue(True, self._met(time.time() - self._started, status))
        return False

    def execute_complete(self, context, event: dict[str, Any]) -> dict[str, Any]:
        """What the trigger fired: the job's figures when the condition holds; otherwise the task
        fails — a timeout as a sensor timeout, a run that cannot get there without a retry."""
        status = event.get("job_status") or {}
        if event["status"] == "ok":
            return self._met(event["waited_s"], status)
        if event["status"] == "timeout":
            raise AirflowSensorTimeout(self._timed_out(event["waited_s"], status))
        raise AirflowFailException(self._cannot(status))

    def _met(self, waited_s: float, status: dict[str, Any]) -> dict[str, Any]:
        self.log.info(
            "job %s in %s is %s after %.1f s: %s", self.job, self.region, self.condition, waited_s, figures(status)
        )
        return {"waited_s": waited_s, **status}

    def _timed_out(self, waited_s: float, status: dict[str, Any]) -> str:
        return (
            f"job {self.job} in {self.region} was not {self.condition} after {waited_s:.0f} s: {figures(status)} "
            f"— look at `tidegate job status {self.job}` and the driver log {status.get('log_path')}; "
            "raise timeout_s if it is merely slow"
        )

    def _cannot(self, status: dict[str, Any]) -> str:
        return (
            f"job {self.job} in {self.region} cannot become {self.condition}: {figures(status)}; "
            f"{status.get('detail')} — see the driver log {status.get('log_path')}"
        )


def figures(status: dict[str, Any]) -> str:
    """A job's state, backlog, watermark and lags in one line, for the task log and its failures."""
    return (
        f"state {status.get('state')}, backlog {status.get('backlog_events')} events, "
        f"watermark {status.get('job_watermark') or 'unknown'}, "
        f"watermark delay {_seconds(status.get('watermark_delay_s'))}, "
        f"processing-time lag {_seconds(status.get('processing_lag_s'))}"
    )


def _seconds(value: Any) -> str:
    return "unknown" if value is None else f"{float(value):.1f} s"
