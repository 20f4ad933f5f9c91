"""The one way Tidegate makes a SparkSession: UTC, quiet, small, with the ``tidegate`` source registered.

Every entry point (jobs, demo, tests, benchmarks) calls :func:`build_session`, so a job
behaves the same under ``spark-submit``, ``python`` and pytest.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from tidegate.errors import ConfigError
from tidegate.jvm.class_archive import APPENDED_CLASS_PATH, LAUNCHER_CLASS_PATH_ENV, append_class_path
from tidegate.jvm.options import java_options
from tidegate.spark.gateway import import_short_names
from tidegate.spark.locked_conf import LOCKED_SQL_CONF
from tidegate.storage.spark import CHECKPOINT_FILE_MANAGER, CHECKPOINT_MANAGER_SETTING

DEFAULT_MASTER = "local[2]"
DEFAULT_SHUFFLE_PARTITIONS = 4

# Static settings only take effect when the JVM starts; on an existing session they are skipped.
_STATIC_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}
_RUNTIME_DEFAULTS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": str(DEFAULT_SHUFFLE_PARTITIONS),
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # the event log is local; adaptive coalescing only adds planning time on tiny batches
    "spark.sql.adaptive.enabled": "false",
    # the engine caches each micro-batch once, for that batch only: compressing the cache
    # costs CPU on the batch's critical path and saves memory nobody needs back
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    # the engine plans dozens of DataFrame operations per micro-batch; recording the Python
    # call site of each (two extra JVM calls and a stack walk) doubled the driver's JVM calls
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}


def build_session(
    app_name: str,
    master: str = DEFAULT_MASTER,
    conf: dict[str, str] | None = None,
    *,
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
    log_level: str = "WARN",
    quick_jvm: bool = False,
) -> SparkSession:
    """The active session if there is one (settings re-applied), else a new one.

    ``conf`` overrides the defaults (e.g. ``{"spark.sql.shuffle.partitions": "8"}`` or
    ``{"spark.ui.enabled": "true"}``). Under ``spark-submit`` its ``--master`` wins over
    ``master``. Static settings (UI, JVM options) apply only when the session is new.
    Idempotent: calling it twice returns the same session with the source registered.
    ``quick_jvm``: a new JVM starts with :data:`~tidegate.jvm.options.QUICK_JVM`, for
    short work over one span (checks, batch references), not for a driver's long run.
    """
    # Python workers must run this interpreter (the venv with tidegate), not whatever
    # ``python3`` is on PATH, or every Python UDF and data source read fails on import.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    java = java_options(quick=quick_jvm)  # UTC, and TIDEGATE_JVM_OPTIONS
    settings = (
        _STATIC_DEFAULTS
        | {"spark.driver.extraJavaOptions": java, "spark.executor.extraJavaOptions": java}
        | _RUNTIME_DEFAULTS
        | {"spark.sql.shuffle.partitions": str(shuffle_partitions)}
        | {k: str(v) for k, v in (conf or {}).items()}
        | LOCKED_SQL_CONF  # last: spec text is untrusted, and no caller's conf turns these back on
    )

    spark = SparkSession.getActiveSession()
    if spark is None:
        from tidegate.spark.pipeline.java_source import session_jar

        jar = session_jar()  # the JVM reader of the event log; None: jobs read through Python
        if jar is not None:
            settings["spark.jars"] = ",".join(filter(None, [settings.get("spark.jars"), str(jar)]))
        _put_checkpoint_manager_on_class_path(settings, jar)
        from tidegate.jvm.deps import connector_jars_or_none

        connector = connector_jars_or_none()  # Spark's Kafka connector: the batch path of Kafka jobs
        if connector:
            settings["spark.jars"] = ",".join(filter(None, [settings.get("spark.jars"), *map(str, connector)]))
        appended = settings.pop(APPENDED_CLASS_PATH, None)
        builder = SparkSession.builder.appName(app_name)
        if master and not _under_spark_submit():
            builder = builder.master(master)
        for key, value in settings.items():
            builder = builder.config(key, value)
        with _launch_environment(appended):
            spark = builder.getOrCreate()
    else:
        settings.pop(APPENDED_CLASS_PATH, None)  # the JVM's class path is set at its start
        for key, value in settings.items():
            if spark.conf.isModifiable(key):
                spark.conf.set(key, value)
    spark.sparkContext.setLogLevel(log_level)
    import_short_names(spark)
    register_sources(spark)
    return spark


@contextmanager
def _launch_environment(appended: str | None):
    """This process's environment as the launcher of a new session's JVM reads it: with
    ``appended`` after Spark's jars — after whatever :data:`LAUNCHER_CLASS_PATH_ENV` already
    holds (a Hadoop-free Spark's own Hadoop jars) — then as it was."""
    if not appended:
        yield
        return
    before = os.environ.get(LAUNCHER_CLASS_PATH_ENV)
    os.environ[LAUNCHER_CLASS_PATH_ENV] = os.pathsep.join(filter(None, (before, appended)))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(LAUNCHER_CLASS_PATH_ENV, None)
        else:
            os.environ[LAUNCHER_CLASS_PATH_ENV] = before


def _put_checkpoint_manager_on_class_path(settings: dict[str, str], jar: Path | None) -> None:
    """A session whose checkpoints go through Tidegate's file manager (an S3 root's session,
    :func:`tidegate.storage.spark.session_conf`) loads it where hadoop-aws is: on the JVM's
    class path, after Spark's jars, which Spark's own class loading of the manager sees from
    any thread."""
    if settings.get(CHECKPOINT_MANAGER_SETTING) != CHECKPOINT_FILE_MANAGER:
        return
    if jar is None:  # the log is read through Python here, but the manager is needed all the same
        from tidegate.spark.pipeline.java_source import build_jar

        try:
            jar = build_jar()
        except ConfigError as exc:
            raise ConfigError(
                f"this session checkpoints on an object store through Tidegate's checkpoint "
                f"file manager, whose jar could not be built: {exc.problem}",
                exc.fix,
            ) from exc
    append_class_path(settings, [str(jar)])


def register_sources(spark: SparkSession) -> None:
    """Register the ``tidegate`` data source on ``spark`` (re-registering is harmless)."""
    from tidegate.spark.pipeline.source import TidegateDataSource

    spark.dataSource.register(TidegateDataSource)


def _under_spark_submit() -> bool:
    # spark-submit starts the JVM first and hands Python its gateway port; its --master
    # (default local[*]) must win over ours
    return "PYSPARK_GATEWAY_PORT" in os.environ
