"""Kafka record headers as the built-in column ``headers``, on a real broker: every reader —
confluent-kafka in Python, the JVM reader over Kafka's wire protocol (in place, and through
Kafka's iterator for compressed batches) and through Kafka's Java consumer, Spark's own
connector — gives each record the same map; and a job reading a header gives the same rows as a
stream and on the batch path."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from pyspark.sql import functions as F

from tidegate.inputs.kafka.headers import MAX_HEADER_BYTES, MAX_HEADERS
from tidegate.inputs.kafka.log import KafkaLog
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import LAYOUT_COLUMNS
from tidegate.spark.kafka import read_range
from tidegate.spark.pipeline.parse import HEADERS_TOO_LARGE
from tidegate.spark.pipeline.runner import run_batch, run_stream
from tidegate.spark.tools.compare import compare
from topic_streams import stream

pytestmark = pytest.mark.spark

SENT = [  # (headers as the producer sends them, the column every reader must give)
    (None, ()),
    ([("tenant", b"acme"), ("trace", b"t-1")], (("tenant", "acme"), ("trace", "t-1"))),
    ([("tenant", b"acme"), ("tenant", b"globex")], (("tenant", "globex"),)),  # the last value
    ([("tenant", b"acme"), ("trace", None)], (("tenant", "acme"), ("trace", None))),  # no value: NULL
    ([("tenant", b"globex"), ("v", b"\xffok\xed\xa0\x80")], (("tenant", "globex"), ("v", "\ufffdok" + "\ufffd" * 3))),
    ([("é", b"1"), ("a", b"2"), ("B", b"3")], (("B", "3"), ("a", "2"), ("é", "1"))),  # ordered by name
    ([(f"h{i}", b"") for i in range(MAX_HEADERS + 1)], None),  # past the bounds: not decoded
    ([("tenant", b"acme"), ("big", b"x" * MAX_HEADER_BYTES)], None),
]


@pytest.fixture(scope="module")
def headers_topic(kafka_broker):
    """Partition 0 as producers batch records plainly; partition 1 compressed (read through Kafka's iterator)."""
    from tidegate.inputs.kafka.client import KafkaTopic
    from tidegate.inputs.kafka.topics import create_topic

    topic = KafkaTopic(kafka_broker.bootstrap, "record-headers")
    create_topic(topic, 2)
    for partition, compression in ((0, "none"), (1, "lz4")):
        producer = Producer(topic.client_config() | {"compression.type": compression, "linger.ms": "50"})
        for i, (headers, _) in enumerate(SENT):
            producer.produce(topic.topic, f'{{"deviceId": "d{i}", "temperature": {i}}}'.encode(), f"d{i}".encode(),
                             partition=partition, headers=headers)  # fmt: skip
        assert producer.flush(10) == 0
    return topic


def expected() -> list[tuple[int, int, tuple | None]]:
    return [(p, o, column) for p in (0, 1) for o, (_, column) in enumerate(SENT)]


def test_every_reader_gives_each_record_the_same_headers(spark, headers_topic, tmp_path):
    log = KafkaLog.reading(headers_topic)
    python = [
        (p, o, None if h is None else tuple(h))
        for p in (0, 1)
        for batch in log.read_batches(p, 0, len(SENT), headers=True)
        for p, o, h in zip(*(batch.column(c).to_pylist() for c in ("partition", "offset", "headers")), strict=True)
    ]
    assert python == expected()
    for reader, options in (("jvm", {}), ("jvm", {"kafkaReader": "consumer"}), ("python", {})):
        batches = stream(spark, headers_topic, tmp_path / f"{reader}-{len(options)}", reader, headers=True, **options)
        assert sorted((p, o, h) for b in batches for p, o, *_, h in b["rows"]) == expected(), (reader, options)
    theirs = read_range(spark, headers_topic, {0: 0, 1: 0}, {0: len(SENT), 1: len(SENT)}, headers=True)
    entries = theirs.select("partition", "offset", F.map_entries("headers")).orderBy("partition", "offset").collect()
    connector = [(p, o, None if h is None else tuple((e[0], e[1]) for e in h)) for p, o, h in entries]
    assert connector == expected()


def test_headers_over_several_column_batches_read_as_the_python_source_reads_them(spark, topic_factory, tmp_path):
    """The JVM reader refills its map vector for each 8,192 records: every batch's maps are its own."""
    topic = topic_factory(partitions=1)
    producer, n = Producer(topic.client_config() | {"linger.ms": "20"}), 9_000
    for i in range(n):
        producer.produce(topic.topic, b"{}", partition=0, headers=[("n", str(i).encode())] * (1 + i % 3))
    assert producer.flush(30) == 0
    jvm = stream(spark, topic, tmp_path / "jvm", "jvm", headers=True)
    python = stream(spark, topic, tmp_path / "python", "python", headers=True)
    assert jvm == python
    assert sorted((o, h) for b in jvm for _, o, *_, h in b["rows"]) == [(o, (("n", str(o)),)) for o in range(n)]


def test_a_read_that_does_not_ask_for_headers_has_no_such_column(spark, headers_topic, tmp_path):
    (batch,) = KafkaLog.reading(headers_topic).read_batches(0, 0, len(SENT))
    assert "headers" not in batch.schema.names
    theirs = read_range(spark, headers_topic, {0: 0}, {0: len(SENT)})
    assert "headers" not in theirs.columns


@pytest.mark.slow
def test_a_job_filtering_and_selecting_by_a_header_gives_the_same_rows_as_a_stream_and_as_a_batch(
    spark, headers_topic, tmp_path
):
    spec = parse_spec({
        "name": "tenant-readings", "version": 1,
        "source": {"kafka": {"bootstrap_servers": headers_topic.bootstrap_servers, "topic": headers_topic.topic}},
        "payload": {"deviceId": "string", "temperature": "double"},
        "filter": "headers['tenant'] = 'acme' OR element_at(headers, 'tenant') = 'globex'",
        "select": {"deviceId": "deviceId", "tenant": "headers['tenant']", "trace": "headers['trace']",
                   "headerCount": "size(headers)"},
    })  # fmt: skip
    batch = run_batch(spark, spec, headers_topic, tmp_path / "batch")
    streamed = run_stream(spark, spec, headers_topic, tmp_path / "stream", extra_options={"maxEventsPerBatch": "5"})
    assert streamed.batches >= 2
    ours, reference = (
        spark.read.parquet(str(r.paths.output)).drop(*LAYOUT_COLUMNS).drop("system_time") for r in (streamed, batch)
    )
    diff = compare(reference, ours)
    assert diff.equal, diff
    rows = sorted((r.partition, r.offset, r.tenant, r.trace, r.headerCount) for r in ours.collect())
    assert rows == [
        (p, o, t, tr, n)
        for p in (0, 1)
        for o, t, tr, n in ((1, "acme", "t-1", 2), (2, "globex", None, 1), (3, "acme", None, 2), (4, "globex", None, 2))
    ]
    for result in (streamed, batch):
        assert result.input_events == 2 * len(SENT) and result.quarantined == 4  # two past the bounds per partition
        reasons = spark.read.parquet(str(result.paths.quarantine)).select("offset", "reason").collect()
        assert sorted(r.offset for r in reasons) == [6, 6, 7, 7]
        assert all(r.reason.startswith(f"{HEADERS_TOO_LARGE}: more than 1,024 headers") for r in reasons)
