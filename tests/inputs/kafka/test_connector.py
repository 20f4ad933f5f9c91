"""Spark's Kafka connector (the batch path of Kafka jobs): its columns map onto the source's,
and it reads exactly the offset range Tidegate planned from a real broker."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pyspark.sql import functions as F

from tidegate.inputs.kafka.log import KafkaLog
from tidegate.inputs.kafka.producer import TopicWriter
from tidegate.spark.kafka import KAFKA_SCHEMA_DDL, from_kafka_columns, read_range
from tidegate.spark.pipeline.source import SOURCE_SCHEMA

pytestmark = pytest.mark.spark


def test_kafka_columns_map_onto_the_tidegate_schema(spark):
    at = datetime(2026, 3, 1, 12, 0, 7, 250_000, tzinfo=UTC)
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


def test_the_connector_and_tidegates_reader_return_the_same_rows_for_a_planned_range(spark, topic_factory):
    topic = topic_factory(partitions=2)
    writer = TopicWriter(topic)
    for p in (0, 1):
        writer.append(p, [f"d{i}" for i in range(25)], [f'{{"i": {i}, "p": {p}}}' for i in range(25)])
    starts, ends = {0: 3, 1: 0}, {0: 20, 1: 25}
    theirs = read_range(spark, topic, starts, ends).orderBy("partition", "offset")
    log = KafkaLog(topic)
    ours = [
        row
        for p in (0, 1)
        for b in log.read_batches(p, starts[p], ends[p])
        for row in zip(*b.to_pydict().values(), strict=True)
    ]
    got = [(r.partition, r.offset, r.arrival_time.replace(tzinfo=UTC), r.key, r.payload) for r in theirs.collect()]
    assert got == [(p, o, a, k, v) for p, o, a, k, v in ours] and len(got) == 17 + 25
