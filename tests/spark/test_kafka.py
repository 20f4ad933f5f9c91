"""Kafka / Event Hubs input: Spark's Kafka columns map onto the tidegate source's columns.

The Kafka connector cannot be downloaded here, so the mapping is tested on a batch
DataFrame with the Kafka source's schema, and the missing connector on its error.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from pyspark.sql import functions as F

from tidegate.spark.kafka import (
    KAFKA_PACKAGE,
    KAFKA_SCHEMA_DDL,
    KafkaConnectorMissing,
    event_hubs_options,
    from_kafka_columns,
    kafka_stream,
)
from tidegate.spark.pipeline.source import SOURCE_SCHEMA

pytestmark = pytest.mark.spark


def test_kafka_columns_map_onto_the_tidegate_schema(spark):
    at = datetime(2026, 3, 1, 12, 0, 7, 250_000, tzinfo=timezone.utc)
    rows = [
        (b"device1", b'{"eventTime": "2026-03-01T12:00:07Z"}', "readings", 2, 41, at, 1),
        (None, "café".encode(), "readings", 0, 7, at, 1),  # no key; UTF-8 payload
    ]
    mapped = from_kafka_columns(spark.createDataFrame(rows, KAFKA_SCHEMA_DDL))
    assert mapped.schema == SOURCE_SCHEMA
    got = mapped.select("partition", "offset", F.unix_micros("arrival_time").alias("a"), "key", "payload").collect()
    at_us = int(at.timestamp()) * 1_000_000 + 250_000
    assert [tuple(r) for r in got] == [
        (2, 41, at_us, "device1", '{"eventTime": "2026-03-01T12:00:07Z"}'),
        (0, 7, at_us, None, "café"),
    ]


def test_a_missing_kafka_connector_says_how_to_add_it(spark):
    options = event_hubs_options("tidegate-ns", "Endpoint=sb://tidegate-ns.servicebus.windows.net/;SharedAccessKey=x", "readings")
    assert options["kafka.bootstrap.servers"] == "tidegate-ns.servicebus.windows.net:9093"
    with pytest.raises(KafkaConnectorMissing) as info:
        kafka_stream(spark, options)
    message = str(info.value)
    assert "Kafka connector is not on the classpath" in message
    assert f"--packages {KAFKA_PACKAGE}" in message
    assert "servicebus.windows.net:9093" in message and "SASL_SSL" in message
