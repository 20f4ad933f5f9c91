"""Thin operators over the Tidegate hook: each asks the controller one thing and returns its figures.

What each returns is pushed to XCom and logged, so every step of a DAG run shows its
numbers in the task log and to the next task (as an XComArg: ``start.output["run_id"]``).
Their fields take native values — an int version, a bool, None for "not given" — which the
DAGs pass as XComArgs or render from their params as native objects (``dag_defaults()``).
Waiting for a job is the sensor's (:mod:`tidegate_airflow.sensors.job_state`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from tidegate_airflow.hooks.tidegate import TidegateHook


class _DeploySource(BaseOperator):
    """An operator given a deploy's source: a spec path, or a Stream Analytics query and its side
    file (:mod:`tidegate_airflow.deploy_source` decides which, exactly one)."""

    template_fields: Sequence[str] = ("spec_path", "query_path", "inputs_path")

    def __init__(
        self,
        *,
        spec_path: str | None = None,
        query_path: str | None = None,
        inputs_path: str | None = None,
        tidegate_conn_id: str = TidegateHook.default_conn_name,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.spec_path, self.query_path, self.inputs_path = spec_path, query_path, inputs_path
        self.tidegate_conn_id = tidegate_conn_id


class TidegateTranslateOperator(_DeploySource):
    """Check the deploy's source, registering nothing: a spec path, or a Stream Analytics query
    (with its side file) translated into a spec the spec loader accepts. Fails — naming the
    query's line and column — for a query without a Tidegate form; returns the confined paths
    and the query's and side file's SHA-256 (never the text)."""

    def execute(self, context) -> dict[str, Any]:
        from tidegate.errors import ConfigError

        try:
            return TidegateHook(self.tidegate_conn_id).translate(self.spec_path, self.query_path, self.inputs_path)
        except ConfigError as exc:  # a bad path or query is bad again on a retry
            raise AirflowFailException(str(exc)) from None


class TidegateDeployOperator(_DeploySource):
    """Register a job version from its spec file, or from a Stream Analytics query and its side
    file (:mod:`tidegate_airflow.deploy_source`: exactly one), idempotent for unchanged logic;
    returns the job, its version, the logic's fingerprint and whether the version is new, each an
    output of its own too (``deploy.output["job"]``)."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("multiple_outputs", True)  # deploy.output["job"], ["version"]
        super().__init__(**kwargs)

    def execute(self, context) -> dict[str, Any]:
        from tidegate.errors import ConfigError
        from tidegate_airflow.deploy_source import deploy_source

        try:
            source = deploy_source(self.spec_path, self.query_path, self.inputs_path)
            hook = TidegateHook(self.tidegate_conn_id)
            if source.query is not None:
                return hook.deploy_query(source.query, source.inputs)
            return hook.deploy(source.spec)  # type: ignore[arg-type]  # deploy_source: a spec when no query
        except ConfigError as exc:  # a bad spec, query or path is bad again on a retry
            raise AirflowFailException(str(exc)) from None


class TidegateStartOperator(BaseOperator):
    """Start a job in a region with a start mode; the driver runs detached and outlives the task.
    Returns the start's summary (:func:`~tidegate_airflow.hooks.tidegate.start_summary`), each
    figure an output of its own too (``start.output["run_id"]``)."""

    template_fields: Sequence[str] = ("job", "region", "mode", "at", "version", "keep_running")

    def __init__(
        self,
        *,
        job: str,
        region: str,
        mode: str = "auto",
        at: str | None = None,
        version: int | None = None,
        accept_partial: bool = False,
        keep_running: bool | None = None,
        tidegate_conn_id: str = TidegateHook.default_conn_name,
        **kwargs,
    ) -> None:
        kwargs.setdefault("multiple_outputs", True)  # start.output["run_id"]
        super().__init__(**kwargs)
        self.job, self.region, self.mode, self.at, self.version = job, region, mode, at, version
        self.accept_partial = accept_partial
        self.keep_running = keep_running
        self.tidegate_conn_id = tidegate_conn_id

    def execute(self, context) -> dict[str, Any]:
        if not (self.version is None or isinstance(self.version, int)):
            raise AirflowFailException(
                f"version {self.version!r} is not a version number: pass an int or None (a DAG renders "
                "its params as native objects with dag_defaults(); an empty form field is None)"
            )
        return TidegateHook(self.tidegate_conn_id).start(
            self.job,
            self.region,
            mode=self.mode,
            at=self.at,
            version=self.version,
            accept_partial=self.accept_partial,
            keep_running=self.keep_running,
            context={"dag_run": context["run_id"], "task": self.task_id},
        )


class TidegateStopOperator(BaseOperator):
    """Stop a job gracefully (finish the micro-batch, commit, exit), forced after the grace time."""

    template_fields: Sequence[str] = ("job", "region")

    def __init__(
        self,
        *,
        job: str,
        region: str,
        grace_s: float = 60.0,
        force: bool = False,
        tidegate_conn_id: str = TidegateHook.default_conn_name,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.job, self.region, self.grace_s, self.force = job, region, grace_s, force
        self.tidegate_conn_id = tidegate_conn_id

    def execute(self, context) -> dict[str, Any]:
        return TidegateHook(self.tidegate_conn_id).stop(
            self.job, self.region, grace_s=self.grace_s, force=self.force, reason=f"dag run {context['run_id']}"
        )
