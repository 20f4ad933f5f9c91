"""Commands the Airflow side runs, built by pure functions (tests compare them exactly).

Spark work that is not a streaming driver — the batch reference and the completeness
check — runs as ``spark-submit`` applications through the Apache Spark provider's
SparkSubmitHook, in client mode on the region's master, so its output lands in the task
log and a failure fails the task.
"""

from __future__ import annotations

import os
from pathlib import Path

# providers/tidegate-airflow/src/tidegate_airflow/commands.py → the checkout (an editable install);
# an installed copy lives elsewhere, and the image sets TIDEGATE_JOBS_DIR
REPO_JOBS = Path(__file__).resolve().parents[4] / "jobs"


def jobs_dir() -> Path:
    """Where the spark-submit entry points are: ``$TIDEGATE_JOBS_DIR`` or the repo's ``jobs/``."""
    return Path(os.environ.get("TIDEGATE_JOBS_DIR") or REPO_JOBS)


def batch_reference_application() -> str:
    return str(jobs_dir() / "batch_reference.py")


def completeness_application() -> str:
    return str(jobs_dir() / "check_completeness.py")


def batch_reference_args(job: str, from_time: str, output: str, version: int | None = None) -> list[str]:
    args = [job, "--from", from_time, "--output", output]
    if version is not None:
        args += ["--version", str(version)]
    return args


def completeness_args(
    job: str,
    targets: str | list[str],
    result: str,
    *,
    run_id: int | None = None,
    span_from: str | None = None,
    span_to: str | None = None,
    reference: str | None = None,
    label: str | None = None,
) -> list[str]:
    """``--from`` alone checks up to where the output is final now; neither: the run's span.
    Several targets are checked in one session against one batch reference."""
    args = [job]
    for target in [targets] if isinstance(targets, str) else targets:
        args += ["--target", target]
    args += ["--result", result]
    if span_from:
        args += ["--from", span_from] + (["--to", span_to] if span_to else [])
    elif run_id is not None:
        args += ["--run", str(run_id)]
    if reference:
        args += ["--reference", reference]
    if label:
        args += ["--label", label]
    return args


def spark_jars() -> str | None:
    """``--jars`` of every Tidegate spark-submit: Spark's Kafka connector (the batch path of
    Kafka jobs reads through it), when bootstrap fetched it; a session's classpath is fixed
    before the application's Python runs, so it cannot add them itself."""
    from tidegate.jvm.deps import connector_jars_or_none

    jars = connector_jars_or_none()
    return ",".join(str(j) for j in jars) if jars else None


JAVA_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


def with_java_options(conf: dict[str, str], *, quick: bool = False) -> dict[str, str]:
    """``conf`` with the Java options of every Tidegate JVM (UTC, ``TIDEGATE_JVM_OPTIONS`` of
    the worker that runs the task; ``quick`` for work over one span) where the region set
    none of its own. Called when the task runs: DAG parsing imports no tidegate module."""
    from tidegate.jvm.options import java_options

    java = java_options(quick=quick)
    return {key: java for key in JAVA_OPTION_KEYS} | conf


def spark_conf(region_conf: dict[str, str] | None = None) -> dict[str, str]:
    """Settings every Tidegate spark-submit gets: UTC everywhere, the region's own on top
    (:func:`with_java_options` adds the JVMs' and :func:`locked` the untouchable ones when
    the task runs)."""
    conf = {
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
    }
    return conf | dict(region_conf or {})


def locked(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the settings that keep spec text from reading the environment or files
    (:mod:`tidegate.spark.locked_conf`), applied last: no region changes them. Called when
    the task runs: DAG parsing imports no tidegate module."""
    from tidegate.spark.locked_conf import LOCKED_SQL_CONF

    return dict(conf) | LOCKED_SQL_CONF
