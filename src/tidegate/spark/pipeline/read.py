"""How jobs read their log: the JVM reader when the session has it, else the Python data source.

Both readers give the same rows and record the same offsets
(:mod:`tidegate.spark.pipeline.java_source` drives the Python source's planning from the
JVM; :mod:`tidegate.spark.pipeline.source` is the Python data source itself), so a
checkpoint moves between them. This module only chooses.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from tidegate.errors import ConfigError
from tidegate.spark.pipeline import java_source
from tidegate.spark.pipeline.release_gate import ReleaseGate
from tidegate.spark.pipeline.source import SOURCE_NAME

logger = logging.getLogger(__name__)


def read_log_stream(spark, options: Mapping[str, str], reader: str | None = None, gate: ReleaseGate | None = None):
    """The log as a streaming DataFrame (columns :data:`~tidegate.spark.pipeline.source.SOURCE_SCHEMA`):
    how jobs read it.

    ``reader``: ``jvm`` — the JVM source (:mod:`tidegate.spark.pipeline.java_source`; its jar must be
    on the session, built with Kafka's reader for a Kafka topic); ``python`` — the Python data
    source (:mod:`tidegate.spark.pipeline.source`); None — the JVM source when the session has it, unless
    ``$TIDEGATE_SOURCE_READER`` is ``python``. Both give the
    same rows and record the same offsets, so a checkpoint moves between them.

    ``gate``: a release gate that holds triggers (:mod:`~tidegate.spark.pipeline.release_gate`);
    only the JVM source's planner runs in this process, so the Python source reads every trigger.
    """
    if _jvm_reader(spark, options, reader):
        return java_source.read_stream(spark, dict(options), gate=gate)
    if gate is not None:
        logger.warning(
            "the release gate needs the JVM reader of the log: this query reads at every trigger "
            "(build the reader with python -m tidegate.spark.pipeline.java_source, or unset TIDEGATE_TRIGGER_STRETCH)"
        )
    return spark.readStream.format(SOURCE_NAME).options(**options).load()


def read_log(spark, options: Mapping[str, str], reader: str | None = None):
    """The log as a batch DataFrame (the batch path's input), chosen as :func:`read_log_stream` chooses."""
    if _jvm_reader(spark, options, reader):
        return java_source.read_batch(spark, dict(options))
    return spark.read.format(SOURCE_NAME).options(**options).load()


def _jvm_reader(spark, options: Mapping[str, str], reader: str | None) -> bool:
    choice = (reader or os.environ.get(java_source.READER_ENV, "auto")).strip().lower()
    if choice not in ("auto", "jvm", "python"):
        raise ConfigError(f"{java_source.READER_ENV}={choice!r} is not a reader", "use auto, jvm or python")
    kafka = any(str(k).lower() == "kafka.bootstrap.servers"
                or (str(k).lower() == "inputs" and "kafka.bootstrap.servers" in str(v))
                for k, v in options.items())  # fmt: skip
    if choice != "python":
        if java_source.available(spark, kafka=kafka):
            return True
        if choice == "jvm":
            raise ConfigError(
                f"the JVM reader of the event log{' and of Kafka' if kafka else ''} is not on this Spark session",
                "build it (python -m tidegate.spark.pipeline.java_source, needs a JDK"
                f"{' and the Kafka jars bootstrap fetches' if kafka else ''}) and start a new session "
                "with tidegate.spark.session.build_session",
            )
    return False
