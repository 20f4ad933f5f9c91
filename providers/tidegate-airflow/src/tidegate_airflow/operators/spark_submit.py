"""Tidegate's batch applications on a region's Spark: the batch reference and the completeness check.

Each runs in the platform's warm check service when one serves (or can be started), else as a
``spark-submit`` through the Apache Spark provider in client mode on the region's master, so
its output lands in the task log and a failure fails the task. The commands are built by the
pure functions of :mod:`tidegate_airflow.commands`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException

from tidegate_airflow import commands
from tidegate_airflow.hooks.tidegate import TidegateHook


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
                "started the check service of %s (pid %s; exits after %.0f s idle)", config.home, starting.pid, idle_s
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
        self, *, job: str, from_time: str, output_dir: str | None = None, version: int | None = None, **kwargs
    ) -> None:
        self.job, self.from_time, self.output_dir, self.version = job, from_time, output_dir, version
        kwargs.setdefault("multiple_outputs", True)  # reference.output["output"]
        super().__init__(application=commands.batch_reference_application(), **kwargs)

    # the provider types SparkSubmitOperator.execute -> None, narrower than BaseOperator.execute -> Any:
    # an operator's return value is its XCom, and this one's is what the next task reads
    def execute(self, context) -> dict[str, Any]:  # type: ignore[override]  # see the comment above
        from tidegate.lineage.layout import JobPaths

        output = self.output_dir or str(self._beside_stream(context))
        self.application_args = commands.batch_reference_args(self.job, self.from_time, output, self.version)
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
        """``<region storage>/jobs/<job>/batch_reference/<dag run>``, and a retry's
        ``<dag run>.try<N>``: its first attempt may have left a half-written run in the first,
        which a batch reference refuses to write over."""
        region = TidegateHook().controller.config.region(self.region)
        run = str(context["run_id"]).replace(":", "_").replace("+", "_")
        attempt = getattr(context.get("ti"), "try_number", None) or 1
        return region.job_dir(self.job) / "batch_reference" / (run if attempt <= 1 else f"{run}.try{attempt}")


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
        run: int | None = None,
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
        # several targets: each check's label gets its target appended
        label = f"{self.job} {context['run_id']}" if len(self.targets) > 1 else f"{self.job} {name} {context['run_id']}"
        self.application_args = commands.completeness_args(
            self.job,
            self.targets,
            str(result),
            run_id=self.run,
            span_from=self.span_from,
            span_to=self.span_to,
            reference=self.reference,
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
