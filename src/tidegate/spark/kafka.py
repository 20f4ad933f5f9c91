"""Reading Kafka or Azure Event Hubs (through its Kafka endpoint) into Tidegate's input columns.

Spark's Kafka source gives ``key binary, value binary, topic, partition int, offset long,
timestamp timestamp, timestampType int, ...``; :func:`from_kafka_columns` maps that onto
the columns of the ``tidegate`` source (``partition, offset, arrival_time, key, payload``),
so the engine runs unchanged on either input. The broker's ``timestamp`` is the arrival
time only when the topic stamps it (``message.timestamp.type=LogAppendTime``; Event Hubs
always does); with ``CreateTime`` it is the producer's clock and may go backwards.

The Kafka connector is not part of PySpark and cannot be downloaded in this environment,
so only the mapping (on a batch DataFrame with Kafka's schema) and the "connector missing"
error are tested here. To use it, start Spark with the connector::

    spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0 ...

or put its jar and dependencies on the classpath (``--jars`` / ``spark.jars``).
"""

from __future__ import annotations

from typing import Mapping

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tidegate.errors import TidegateError

KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
KAFKA_SCHEMA_DDL = (
    "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, "
    "timestamp TIMESTAMP, timestampType INT"
)
EVENT_HUBS_KAFKA_PORT = 9093


class KafkaConnectorMissing(TidegateError):
    """Spark's Kafka connector is not on the classpath."""


def from_kafka_columns(df: DataFrame) -> DataFrame:
    """Kafka source columns → ``partition int, offset long, arrival_time timestamp, key string, payload string``.

    Keys and values are decoded as UTF-8 text (Event Hubs and most producers send JSON);
    a null key stays null.
    """
    return df.select(
        F.col("partition").cast("int").alias("partition"),
        F.col("offset").cast("long").alias("offset"),
        F.col("timestamp").cast("timestamp").alias("arrival_time"),
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("payload"),
    )


def event_hubs_options(namespace: str, connection_string: str, event_hub: str) -> dict[str, str]:
    """Kafka source options for an Event Hubs namespace's Kafka endpoint (Standard tier or above).

    The event hub is the Kafka topic; the password is the namespace (or hub) connection string.
    """
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="$ConnectionString" password="{connection_string}";'
    )
    return {
        "kafka.bootstrap.servers": f"{namespace}.servicebus.windows.net:{EVENT_HUBS_KAFKA_PORT}",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": jaas,
        "subscribe": event_hub,
    }


def kafka_stream(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """``readStream.format("kafka")`` with ``options``, mapped by :func:`from_kafka_columns`.

    Raises :class:`KafkaConnectorMissing` with how to add the connector when Spark cannot
    find it (it is not bundled with PySpark).
    """
    try:
        raw = spark.readStream.format("kafka").options(**dict(options)).load()
    except (AnalysisException, CapturedException, Py4JJavaError) as exc:
        if _is_missing_connector(exc):
            raise KafkaConnectorMissing(
                "Spark's Kafka connector is not on the classpath (data source 'kafka' not found)",
                f"start Spark with --packages {KAFKA_PACKAGE} (or add the spark-sql-kafka-0-10 jar and "
                "kafka-clients with --jars / spark.jars, e.g. via build_session(conf={'spark.jars.packages': "
                f"'{KAFKA_PACKAGE}'}}) on a fresh session). For Event Hubs use its Kafka endpoint: "
                f"kafka.bootstrap.servers=<namespace>.servicebus.windows.net:{EVENT_HUBS_KAFKA_PORT}, "
                "kafka.security.protocol=SASL_SSL, kafka.sasl.mechanism=PLAIN, kafka.sasl.jaas.config with "
                'username="$ConnectionString" — see tidegate.spark.kafka.event_hubs_options',
            ) from None
        raise
    return from_kafka_columns(raw)


def _is_missing_connector(exc: Exception) -> bool:
    text = str(exc)
    return any(
        marker in text
        for marker in ("DATA_SOURCE_NOT_FOUND", "Failed to find data source: kafka", "ClassNotFoundException")
    )
