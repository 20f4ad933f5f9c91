"""Spark's Kafka connector: the batch path of a Kafka job, over the offsets Tidegate planned.

A Kafka job streams through the ``tidegate`` source (:mod:`tidegate.spark.pipeline.source`
over :class:`tidegate.inputs.kafka.log.KafkaLog`), whose planner records each micro-batch's
offsets with the broker clock. Its batch path — the reference the stream must equal —
reads the same offset range through Spark's own connector (``spark-sql-kafka-0-10``),
mapped onto the source's columns by :func:`from_kafka_columns`: two readers that share no
code, so the equality the checks assert is also a check of the reader.

The connector's jars are fetched by ``scripts/bootstrap.sh`` (:mod:`tidegate.jvm.deps`);
:func:`tidegate.spark.session.build_session` puts them on every session when present.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tidegate.errors import TidegateError
from tidegate.inputs.kafka.client import KafkaTopic
from tidegate.inputs.kafka.headers import MAX_HEADER_BYTES, MAX_HEADERS
from tidegate.jobspec.fields import HEADERS

KAFKA_SCHEMA_DDL = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, timestampType INT"
)
LOG_APPEND_TIME_TYPE = 1  # the connector's timestampType of a broker-stamped record
_SORTED = "_headers_sorted"  # a projection of its own: the map's expression reads it more than once


class KafkaConnectorMissing(TidegateError):
    """Spark's Kafka connector is not on the session's classpath."""


def from_kafka_columns(df: DataFrame, headers: bool = False) -> DataFrame:
    """Kafka source columns → ``partition int, offset long, arrival_time timestamp, key string, payload string``
    (and ``headers map<string,string>`` with ``headers``: the connector read with ``includeHeaders``).

    Keys and values are decoded as UTF-8 text (Event Hubs and most producers send JSON);
    a null key stays null. Headers become the map every Tidegate reader makes
    (:mod:`tidegate.inputs.kafka.headers`).
    """
    columns = [
        F.col("partition").cast("int").alias("partition"),
        F.col("offset").cast("long").alias("offset"),
        F.col("timestamp").cast("timestamp").alias("arrival_time"),
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("payload"),
    ]
    if not headers:
        return df.select(*columns)
    read = df.select(*columns, _sorted_headers(F.col(HEADERS)).alias(_SORTED))
    return read.select(*(c for c in read.columns if c != _SORTED), _headers_map(F.col(_SORTED)).alias(HEADERS))


def _sorted_headers(raw: Column) -> Column:
    """The connector's headers (``array<struct<key string, value binary>>``, NULL for none) as
    entries ``(k, n, v)`` — name, minus the position, value as UTF-8 text (invalid bytes replaced)
    — sorted by name, a name's last header first."""
    entries = F.transform(raw, lambda h, i: F.struct(
        h["key"].alias("k"), (-i).alias("n"), F.make_valid_utf8(h["value"].cast("string")).alias("v")
    ))  # fmt: skip
    return F.array_sort(entries)


def _headers_map(entries: Column) -> Column:
    """The sorted entries as the ``headers`` map: each name's first entry (its last header); the
    empty map for none; NULL beyond :data:`~tidegate.inputs.kafka.headers.MAX_HEADERS` headers or
    :data:`~tidegate.inputs.kafka.headers.MAX_HEADER_BYTES` bytes of names and values."""
    size = F.aggregate(
        entries,
        F.lit(0).cast("bigint"),
        lambda n, e: n + F.octet_length(e["k"]) + F.coalesce(F.octet_length(e["v"]), F.lit(0)),
    )
    last = F.filter(entries, lambda e, j: (j == 0) | (entries[j - 1]["k"] != e["k"]))
    return (
        F.when(entries.isNull(), F.create_map().cast("map<string,string>"))
        .when((F.size(entries) > MAX_HEADERS) | (size > MAX_HEADER_BYTES), F.lit(None).cast("map<string,string>"))
        .otherwise(F.map_from_entries(F.transform(last, lambda e: F.struct(e["k"], e["v"]))))
    )


def read_range(
    spark: SparkSession, topic: KafkaTopic, starts: Mapping[int, int], ends: Mapping[int, int], headers: bool = False
) -> DataFrame:
    """Records ``[starts[p], ends[p])`` of every partition through Spark's connector, as the
    ``tidegate`` source's columns (with ``headers``: the records' headers too). Raises
    :class:`KafkaConnectorMissing` saying how to add it."""

    def positions(offsets: Mapping[int, int]) -> str:
        return json.dumps({topic.topic: {str(p): int(o) for p, o in sorted(offsets.items())}})

    options = topic.spark_options() | {
        "assign": json.dumps({topic.topic: sorted(int(p) for p in starts)}),
        "startingOffsets": positions(starts),
        "endingOffsets": positions(ends),
        "failOnDataLoss": "true",
        "includeHeaders": str(headers).lower(),
    }
    try:
        raw = spark.read.format("kafka").options(**options).load()
    except (AnalysisException, CapturedException, Py4JJavaError) as exc:
        if _is_missing_connector(exc):
            raise KafkaConnectorMissing(
                "Spark's Kafka connector is not on this session's classpath (data source 'kafka' not found)",
                "run `bash scripts/bootstrap.sh` (it fetches the connector into var/jvm/kafka-connector) and build the "
                "session with tidegate.spark.session.build_session; under spark-submit pass "
                '--jars "$(.venv/bin/python -m tidegate.spark.kafka)"',
            ) from None
        raise
    return from_kafka_columns(raw, headers)


def _is_missing_connector(exc: Exception) -> bool:
    text = str(exc)
    return any(
        marker in text
        for marker in ("DATA_SOURCE_NOT_FOUND", "Failed to find data source: kafka", "ClassNotFoundException")
    )


def main() -> int:
    """Print the connector's jars as a ``--jars`` list (for spark-submit)."""
    from tidegate.jvm.deps import CONNECTOR, jars

    print(",".join(str(j) for j in jars(CONNECTOR)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
