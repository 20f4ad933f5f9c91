"""Thin operators over the Tidegate hook: each asks the controller one thing and returns its figures.

What each returns is pushed to XCom and logged, so every step of a DAG run shows its
numbers in the task log and to the next task. Waiting is deferred to the triggerer
(:class:`JobStateTrigger`): no worker slot is held while a job catches up.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from tidegate_airflow import commands
from tidegate_airflow.hooks import TidegateHook
from tidegate_airflow.triggers import JobStateTrigger

TIDEGATE_ENV_PREFIX = "TIDEGATE_"


def _tidegate_environment() -> dict[str, str]:
    """The TIDEGATE_* settings of this worker, handed to the trigger (which may run elsewhere)."""
    return {k: v for k, v in os.environ.items() if k.startswith(TIDEGATE_ENV_PREFIX)}


def _none(value: Any) -> Any:
    """Params forms send "" for an empty optional field."""
    return None if value in ("", "None") else value


class TidegateDeployOperator(BaseOperator):
    """Register a job version from its spec file (idempotent for unchanged logic)."""

    template_fields: Sequence[str] = ("spec_path",)

    def __init__(self, *, spec_path: str, tidegate_conn_id: str = TidegateHook.default_conn_name, **kwargs) -> None:
        super().__init__(**kwargs)
        self.spec_path = spec_path
        self.tidegate_conn_id = tidegate_conn_id

    def execute(self, context) -> dict[str, Any]:
        from tidegate.errors import ConfigError

        try:
            return TidegateHook(self.tidegate_conn_id).deploy(self.spec_path)
        except ConfigError as exc:  # a bad spec or path is bad again on a retry
            raise AirflowFailException(str(exc)) from None


class TidegateStartOperator(BaseOperator):
    """Start a job in a region with a start mode; the driver runs detached and outlives the task."""

    template_fields: Sequence[str] = ("job", "region", "mode", "at", "version", "keep_running")

    def __init__(
        self,
        *,
        job: str,
        region: str,
        mode: str = "auto",
        at: str | None = None,
        version: Any = None,
        accept_partial: bool = False,
        keep_running: Any = None,
        tidegate_conn_id: str = TidegateHook.default_conn_name,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.job, self.region, self.mode, self.at, self.version = job, region, mode, at, version
        self.accept_partial = accept_partial
        self.keep_running = keep_running
        self.tidegate_conn_id = tidegate_conn_id

    def execute(self, context) -> dict[str, Any]:
        version = _none(self.version)
        return TidegateHook(self.tidegate_conn_id).start(
            self.job,
            self.region,
            mode=self.mode,
            at=_none(self.at),
            version=int(version) if version else None,
            accept_partial=self.accept_partial,
            keep_running=_flag(self.keep_running),
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


class TidegateWaitOperator(BaseOperator):
    """Wait until a job is caught up / healthy / stopped, deferred to the triggerer. On
    timeout the task fails with the job's backlog, watermark and lag in the message."""

    template_fields: Sequence[str] = ("job", "region", "run_id", "timeout_s")

    def __init__(
        self,
        *,
        job: str,
        region: str,
        condition: str = "caught_up",
        run_id: Any = None,
        timeout_s: float | str = 1800.0,  # templated: a Jinja string until rendered, read with float()
        poll_s: float = 2.0,
        max_lag_s: float | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.job, self.region, self.condition, self.run_id = job, region, condition, run_id
        self.timeout_s, self.poll_s, self.max_lag_s = timeout_s, poll_s, max_lag_s

    def execute(self, context) -> None:
        run_id = _none(self.run_id)
        self.defer(
            trigger=JobStateTrigger(
                self.job,
                self.region,
                self.condition,
                float(self.timeout_s),
                self.poll_s,
                int(run_id) if run_id else None,
                self.max_lag_s,
                _tidegate_environment(),
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context, event: dict[str, Any]) -> dict[str, Any]:
        status = event.get("job_status") or {}
        figures = (
            f"state {status.get('state')}, backlog {status.get('backlog_events')} events, "
            f"watermark {status.get('job_watermark') or 'unknown'}, "
            f"watermark delay {_s(status.get('watermark_delay_s'))}, "
            f"processing-time lag {_s(status.get('processing_lag_s'))}"
        )
        if event["status"] == "ok":
            self.log.info(
                "job %s in %s is %s after %.1f s: %s", self.job, self.region, self.condition, event["waited_s"], figures
            )
            return {"waited_s": event["waited_s"], **status}
        if event["status"] == "timeout":
            raise AirflowException(
                f"job {self.job} in {self.region} was not {self.condition} after {event['waited_s']:.0f} s: {figures} "
                f"— look at `tidegate job status {self.job}` and the driver log {status.get('log_path')}; "
                "raise timeout_s if it is merely slow"
            )
        raise AirflowException(
            f"job {self.job} in {self.region} cannot become {self.condition}: {figures}; {status.get('detail')} "
            f"— see the driver log {status.get('log_path')}"
        )


class TidegateSparkSubmitOperator(SparkSubmitOperator):
    """spark-submit of one of Tidegate's batch applications, on a region's Spark connection
    (``tidegate_spark_<region>``: the region's master), with Tidegate's settings. Each reads
    one span, so its JVM starts quick (C1 only, serial GC: half the start-up CPU)."""

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "region")

    def __init__(self, *, region: str = "east", conn_id: str | None = None, conf: dict | None = None, **kwargs) -> None:
        kwargs.setdefault("name", kwargs.get("task_id", "tidegate"))
        self.region = region
        self.fixed_conn_id = conn_id
        super().__init__(conn_id=conn_id or "tidegate_spark_east", conf=commands.spark_conf(conf), **kwargs)

    def execute(self, context) -> None:
        self._conn_id = self.fixed_conn_id or f"tidegate_spark_{self.region}"  # the region is templated
        if self.jars is None:  # looked up when the task runs, not when the DAG file is parsed
            self.jars = commands.spark_jars()
        self.conf = commands.locked(commands.with_java_options(self.conf or {}, quick=True))  # one span: a quick JVM
        super().execute(context)

    def _run_warm(self, command: str):
        """``tidegate <command> <application_args>`` run by the platform's warm check service
        (started here when none runs, for this task and the ones after it); None: run it as a
        spark-submit. The service runs Spark locally beside Airflow: a check or a batch
        reference reads one span, which a warm local session does in seconds, where a
        submission pays a Spark start."""
        from tidegate.runtime.checks import check_service

        args = self.application_args
        if args is None:  # the subclass's execute sets them before it asks for the service
            raise AirflowException(f"no application arguments set for the {command}")
        config = TidegateHook().controller.config
        idle_s, starting = check_service.start_unless_off(config.home, env=config.driver_environment())
        if idle_s is None:
            return None
        if starting is not None:
            self.log.info(
                "started the check service of %s (pid %s; exits after %.0f s idle)", config.home, starting, idle_s
            )
        served = check_service.run(config.home, [command, *args], starting=starting)
        if served is None:
            self.log.warning(
                "the check service of %s did not take the %s (see %s): running it as a spark-submit",
                config.home,
                command,
                check_service.service_dir(config.home) / "service.log",
            )
            self.application_args = [*args, "--here"]  # not handed to a service again
        return served


class TidegateBatchReferenceOperator(TidegateSparkSubmitOperator):
    """The batch path of a job over a span: what a stream started at ``from_time`` emits."""

    template_fields: Sequence[str] = (
        *TidegateSparkSubmitOperator.template_fields,
        "job",
        "from_time",
        "output_dir",
        "version",
    )

    def __init__(
        self, *, job: str, from_time: str, output_dir: str | None = None, version: Any = None, **kwargs
    ) -> None:
        self.job, self.from_time, self.output_dir, self.version = job, from_time, output_dir, version
        super().__init__(application=commands.batch_reference_application(), **kwargs)

    # the provider types SparkSubmitOperator.execute -> None, narrower than BaseOperator.execute -> Any:
    # an operator's return value is its XCom, and this one's is what the next task reads
    def execute(self, context) -> dict[str, Any]:  # type: ignore[override]  # see the comment above
        from tidegate.lineage.layout import JobPaths

        version = _none(self.version)
        output = _none(self.output_dir) or str(self._beside_stream(context))
        self.application_args = commands.batch_reference_args(
            self.job, self.from_time, output, int(version) if version else None
        )
        served = self._run_warm("batch-reference")
        if served is None:
            super().execute(context)
        else:
            self.log.info("ran in the warm check service (%.1f s):\n%s", served.seconds, served.output)
            if served.exit_code:
                raise AirflowException(
                    f"the batch reference of {self.job} exited {served.exit_code}: "
                    f"{served.output.strip()[-2000:] or 'no output'}"
                )
        return {"job": self.job, "from": self.from_time, "output": str(JobPaths(Path(output)).output)}

    def _beside_stream(self, context) -> Path:
        """``<region storage>/jobs/<job>/batch_reference/<dag run>``."""
        region = TidegateHook().controller.config.region(self.region)
        run = str(context["run_id"]).replace(":", "_").replace("+", "_")
        return region.job_dir(self.job) / "batch_reference" / run


class TidegateCompletenessOperator(TidegateSparkSubmitOperator):
    """The Great Expectations completeness suite (semantics §8) over the span a run affected, or
    a given span, for one target or several (``target=[region, "consumer"]``): several run
    in one spark-submit, one Spark session and one batch reference. Pushes ``outcomes`` (one
    per target, in order); fails the task naming what is missing, doubled or different, and
    logs where the Data Docs are."""

    template_fields: Sequence[str] = (
        *TidegateSparkSubmitOperator.template_fields,
        "job",
        "target",
        "run",
        "span_from",
        "span_to",
        "reference",
    )

    def __init__(
        self,
        *,
        job: str,
        target: str | Sequence[str],
        run: Any = None,
        span_from: str | None = None,
        span_to: str | None = None,
        reference: str | None = None,
        result_dir: str | None = None,
        **kwargs,
    ) -> None:
        self.job, self.target, self.run, self.reference = job, target, run, reference
        self.span_from, self.span_to = span_from, span_to
        self.result_dir = result_dir
        super().__init__(application=commands.completeness_application(), **kwargs)

    @property
    def targets(self) -> list[str]:
        return [self.target] if isinstance(self.target, str) else list(self.target)

    # the provider types SparkSubmitOperator.execute -> None, narrower than BaseOperator.execute -> Any:
    # an operator's return value is its XCom, and this one's is what the next task reads
    def execute(self, context) -> list[dict[str, Any]]:  # type: ignore[override]  # see the comment above
        started = time.monotonic()
        name = "+".join(self.targets)
        result = (
            Path(self.result_dir or os.environ.get("TIDEGATE_HOME", "var"))
            / "checks"
            / (f"{self.job}-{name}-{context['run_id']}-{int(time.time() * 1000)}.json".replace(":", "_"))
        )
        run = _none(self.run)
        # several targets: each check's label gets its target appended
        label = f"{self.job} {context['run_id']}" if len(self.targets) > 1 else f"{self.job} {name} {context['run_id']}"
        self.application_args = commands.completeness_args(
            self.job,
            self.targets,
            str(result),
            run_id=int(run) if run else None,
            span_from=_none(self.span_from),
            span_to=_none(self.span_to),
            reference=_none(self.reference),
            label=label,
        )
        failure: Exception | None = None
        served = self._run_warm("check")
        if served is not None:
            self.log.info("checked in the warm check service (%.1f s):\n%s", served.seconds, served.output)
            if served.exit_code:
                failure = AirflowException(
                    f"the check exited {served.exit_code}: {served.output.strip().splitlines()[-1:] or ['no output']}"
                )
        else:
            try:
                super().execute(context)
            except Exception as exc:  # the check exits 1 on a failed suite: report its findings below
                failure = exc
        if not result.exists():  # recorded as a failed check: a check that could not run is no pass
            error = f"{failure or 'it wrote no result'} — see the check's output in this task's log"
            controller = TidegateHook().controller
            outcomes = [
                controller.check_could_not_run(
                    self.job, target, error, {"airflow_run": str(context["run_id"])}
                ).to_dict()
                for target in self.targets
            ]
            context["ti"].xcom_push(key="outcomes", value=outcomes)
            raise AirflowException("; ".join(outcome["message"] for outcome in outcomes))
        outcomes = json.loads(result.read_text())
        for outcome in outcomes:  # from task start to the recorded result, Spark's start-up included
            outcome["task_s"] = round(time.monotonic() - started, 1)
            outcome["warm"] = served is not None
        context["ti"].xcom_push(key="outcomes", value=outcomes)  # read by records, also when one failed
        for outcome in outcomes:
            self.log.info("%s", outcome["summary"])
            if outcome.get("data_docs"):
                self.log.info("Data Docs: %s", outcome["data_docs"])
        failed = [outcome["message"] for outcome in outcomes if not outcome["success"]]
        if failed:
            raise AirflowException("; ".join(failed))
        return outcomes


def _flag(value: Any) -> bool | None:
    """A boolean that may arrive rendered from a template ("True", "false")."""
    if value is None or isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "1", "yes")


def _s(value: Any) -> str:
    return "unknown" if value is None else f"{float(value):.1f} s"
