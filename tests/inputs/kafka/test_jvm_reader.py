"""Kafka read on the JVM (``java/kafka/KafkaRangeReader.java``) against the Python source, on a real broker.

Both readers plan with the same Python planner; only the executors' read differs (Kafka's
wire protocol into column vectors on a plaintext listener, Kafka's Java consumer on a SASL
one, or confluent-kafka in a Python worker). Over the same
ranges they must give the same rows — null keys, non-ASCII text and bytes that are not
UTF-8 included — and record the same offsets and broker clock, so a checkpoint written by
one resumes on the other.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tidegate.inputs.kafka.broker import free_port, set_consumer_quota
from tidegate.inputs.kafka.client import SASL_PASSWORD_ENV, SASL_USERNAME_ENV, KafkaTopic
from tidegate.inputs.kafka.connections import BOOTSTRAP_ENV, PROTOCOL_ENV
from tidegate.inputs.kafka.producer import TopicWriter
from tidegate.spark.pipeline import java_source
from tidegate.spark.pipeline.read import read_log_stream
from topic_streams import failed_read, stream

pytestmark = pytest.mark.spark


def fill(topic, first: int, n: int) -> None:
    """``n`` records per partition through the traffic writer, then a few a writer of text cannot send."""
    writer = TopicWriter(topic)
    for p in range(writer.partitions):
        writer.append(p, [f"dev{i % 3}" if i % 5 else None for i in range(first, first + n)],
                      [json.dumps({"i": i, "p": p, "note": "café ☕"}, ensure_ascii=False)
                       for i in range(first, first + n)])  # fmt: skip
    raw = Producer(topic.client_config())
    for value, key in ((b"\xffnot utf-8\xed\xa0\x80", b"\xc0\xaf"), (b"", None), (b'{"i": -1}', "ключ".encode())):
        raw.produce(topic.topic, value, key, partition=0)
    assert raw.flush(10) == 0


def test_jobs_read_kafka_through_the_jvm_reader(spark, topic_factory):
    topic = topic_factory(partitions=1)
    assert java_source.available(spark, kafka=True)
    plan = read_log_stream(spark, topic.source_options())._jdf.queryExecution().logical().toString()
    assert java_source.PROVIDER in plan  # not the Python data source


def test_the_readers_sizes_yield_to_the_jobs_settings_and_what_a_planned_range_needs_does_not(spark):
    def config(client: dict) -> dict:
        java = spark.sparkContext._jvm.java.util.HashMap()
        for key, value in client.items():
            java.put(key, value)
        return dict(spark.sparkContext._jvm.tidegate.jvm.ConsumerFeed.consumerConfig(java))

    defaults = config({"bootstrap.servers": "b:9092"})
    assert defaults["receive.buffer.bytes"] == "-1"  # the kernel's autotuning, not the client's 64 KiB
    assert (defaults["max.poll.records"], defaults["max.partition.fetch.bytes"]) == ("8192", str(16 << 20))
    spec = {"receive.buffer.bytes": "65536", "max.poll.records": "100", "max.partition.fetch.bytes": "1048576",
            "fetch.max.bytes": "2097152", "client.id": "payments", "isolation.level": "read_uncommitted",
            "group.id": "theirs", "enable.auto.commit": "true", "auto.offset.reset": "earliest"}  # fmt: skip
    chosen = config({"bootstrap.servers": "b:9092"} | spec)
    assert {k: chosen[k] for k in list(spec)[:5]} == {k: spec[k] for k in list(spec)[:5]}
    # committed records only, no group, no commits, no jump past a deleted offset: whatever the job says
    assert (chosen["isolation.level"], chosen["enable.auto.commit"], chosen["auto.offset.reset"]) == (
        "read_committed",
        "false",
        "none",
    )
    assert "group.id" not in chosen


def test_both_readers_give_the_same_rows_offsets_and_clock_over_the_same_ranges(spark, topic_factory, tmp_path):
    topic = topic_factory(partitions=3)
    fill(topic, 0, 40)
    options = {"maxEventsPerBatch": "30", "startingOffsets": json.dumps({"0": 4, "1": -2, "2": 39})}
    jvm = stream(spark, topic, tmp_path / "jvm", "jvm", **options)
    python = stream(spark, topic, tmp_path / "python", "python", **options)
    assert len(jvm) >= 3 and jvm == python
    rows = [r for b in jvm for r in b["rows"]]
    assert len(rows) == len(set(rows)) == (40 + 3 - 4) + 40 + 1
    by_offset = {(p, o): (k, v) for p, o, _, k, v in rows}
    assert by_offset[(0, 40)] == (
        "\ufffd\ufffd",
        "\ufffdnot utf-8\ufffd\ufffd\ufffd",
    )  # Python's "replace", byte for byte
    assert by_offset[(0, 41)] == (None, "") and by_offset[(0, 42)] == ("ключ", '{"i": -1}')
    assert by_offset[(1, 0)][0] is None and "café ☕" in by_offset[(1, 0)][1]


def test_a_range_of_several_column_batches_reads_as_the_python_source_does(spark, topic_factory, tmp_path):
    """The JVM reader refills the same column vectors for each 8,192 records: nulls, text that
    is not ASCII and bytes that are not UTF-8 behind eight ASCII bytes or more (tested a word at
    a time) read the same in every batch as through the Python source."""
    topic = topic_factory(partitions=1)
    writer, n = TopicWriter(topic), 12_000
    writer.append(0, [None if i % 7 == 0 else f"dev{i}" for i in range(n)],
                  [json.dumps({"i": i, "note": "café" if i % 3 == 0 else "plain"}, ensure_ascii=False)
                   for i in range(n)])  # fmt: skip
    raw = Producer(topic.client_config())
    raw.produce(topic.topic, b"0123456789abcdef\xff tail", b"01234567\xc3", partition=0)
    assert raw.flush(10) == 0
    writer.append(0, ["late"] * n, [json.dumps({"i": n + 1 + i}) for i in range(n)])
    jvm = stream(spark, topic, tmp_path / "jvm", "jvm")
    python = stream(spark, topic, tmp_path / "python", "python")
    assert jvm == python
    rows = {o: (k, v) for b in jvm for _, o, _, k, v in b["rows"]}
    assert sorted(rows) == list(range(2 * n + 1))
    assert rows[n] == ("01234567\ufffd", "0123456789abcdef\ufffd tail")
    assert sum(k is None for k, _ in rows.values()) == len(range(0, n, 7))
    assert rows[3] == ("dev3", '{"i": 3, "note": "café"}') and rows[2 * n] == ("late", json.dumps({"i": 2 * n}))


def test_committed_records_only_and_compressed_batches_read_as_the_python_source_reads_them(
    spark, topic_factory, tmp_path
):
    """An aborted transaction's records are never input, nor are the transaction markers that
    take offsets between records; batches a producer compressed read as plain ones, and so
    does a record far larger than the rest."""
    topic = topic_factory(partitions=2)
    config = topic.client_config()
    producer = Producer(config | {"transactional.id": f"tidegate-test-{topic.topic}"})
    producer.init_transactions(30)
    for outcome in ("commit", "abort", "commit", "abort"):
        producer.begin_transaction()
        for i in range(40):
            producer.produce(topic.topic, json.dumps({"tx": outcome, "i": i}), f"k{i}", partition=i % 2)
        producer.flush(10)
        (producer.commit_transaction if outcome == "commit" else producer.abort_transaction)(30)
    for codec in ("gzip", "lz4", "zstd", "snappy"):
        plain = Producer(config | {"compression.type": codec, "linger.ms": 20})
        for i in range(60):
            plain.produce(topic.topic, json.dumps({"codec": codec, "i": i, "note": "café"}, ensure_ascii=False),
                          None if i % 4 == 0 else f"c{i}", partition=i % 2)  # fmt: skip
        assert plain.flush(10) == 0
    big = Producer(config)  # one record of 400 KB: lengths of three varint bytes, read in place
    big.produce(topic.topic, json.dumps({"big": "é" * 200_000}, ensure_ascii=False), "big", partition=1)
    assert big.flush(10) == 0
    jvm = stream(spark, topic, tmp_path / "jvm", "jvm", maxEventsPerBatch="70")
    python = stream(spark, topic, tmp_path / "python", "python", maxEventsPerBatch="70")
    assert len(jvm) >= 3 and jvm == python
    read = [json.loads(v) for b in jvm for *_, v in b["rows"]]
    assert sorted((r["i"], r["tx"]) for r in read if "tx" in r) == sorted([(i, "commit") for i in range(40)] * 2)
    codecs = [r["codec"] for r in read if "codec" in r]
    assert {c: codecs.count(c) for c in set(codecs)} == {"gzip": 60, "lz4": 60, "zstd": 60, "snappy": 60}
    assert [r["big"] for r in read if "big" in r] == ["é" * 200_000]
    offsets = sorted(o for b in jvm for p, o, *_ in b["rows"] if p == 0)
    assert offsets[-1] - offsets[0] + 1 > len(offsets)  # markers and aborted records hold offsets no row has


def test_a_bootstrap_list_whose_first_broker_is_down_is_read_through_the_next(spark, topic_factory, tmp_path):
    topic = topic_factory(partitions=1)
    TopicWriter(topic).append(0, ["a", "b"], ['{"i": 1}', '{"i": 2}'])
    # the first broker refuses connections; the next names its listener, as Kafka's clients allow
    down = KafkaTopic(f"127.0.0.1:{free_port()},PLAINTEXT://{topic.bootstrap_servers}", topic.topic)
    batches = stream(spark, down, tmp_path / "ck", "jvm")
    assert [(o, k) for b in batches for _, o, _, k, _ in b["rows"]] == [(0, "a"), (1, "b")]


def test_a_checkpoint_written_by_the_python_reader_resumes_on_the_jvm_reader_exactly_once(
    spark, topic_factory, tmp_path
):
    topic = topic_factory(partitions=2)
    fill(topic, 0, 25)
    first = stream(spark, topic, tmp_path / "ck", "python")
    fill(topic, 25, 10)  # the producers go on while the job is stopped
    second = stream(spark, topic, tmp_path / "ck", "jvm")
    assert second[0]["start"] == first[-1]["end"]
    offsets = sorted((p, o) for b in first + second for p, o, *_ in b["rows"])
    assert offsets == [(0, o) for o in range(2 * (25 + 3) - 15)] + [(1, o) for o in range(35)]  # 3 raw records a fill


def test_a_range_the_broker_never_fills_fails_the_batch_naming_topic_broker_and_offsets(
    spark, topic_factory, tmp_path, monkeypatch
):
    topic = topic_factory(partitions=1)
    TopicWriter(topic).append(0, ["k"] * 5, ["{}"] * 5)
    plan = java_source.Planner.planRanges

    def past_the_end(self, stream, start, end):  # as if the broker lost records it had acknowledged
        reply = json.loads(plan(self, stream, start, end))
        for r in reply["ok"]:
            r["end"] += 3
            r["kafka"] = r["kafka"] | {"timeoutMs": 1500}
        return json.dumps(reply)

    monkeypatch.setattr(java_source.Planner, "planRanges", past_the_end)
    message = failed_read(spark, topic, tmp_path / "ck")
    assert f"Kafka topic '{topic.topic}' on {topic.bootstrap_servers}, partition 0" in message
    assert "no records arrived from offset 5 before 8 within 1 s" in message and "check the broker's health" in message


def test_a_sasl_listener_is_read_on_the_jvm_with_its_connections_credentials_and_none_stored(
    spark, kafka_broker, topic_factory, monkeypatch, sasl_user, tmp_path
):
    plain = topic_factory(partitions=1)
    TopicWriter(plain).append(0, ["a", "b", "c"], ['{"i": 1}', '{"i": 2}', '{"i": 3}'])
    topic = KafkaTopic(f"127.0.0.1:{kafka_broker.sasl_port}", plain.topic)
    user, password = sasl_user
    monkeypatch.setenv(BOOTSTRAP_ENV, topic.bootstrap_servers)  # the connection 'default': the SASL listener
    monkeypatch.setenv(PROTOCOL_ENV, "SASL_PLAINTEXT")
    monkeypatch.setenv(SASL_USERNAME_ENV, user)
    monkeypatch.setenv(SASL_PASSWORD_ENV, password)
    batches = stream(spark, topic, tmp_path / "ck", "jvm")
    assert [(o, k) for b in batches for _, o, _, k, _ in b["rows"]] == [(0, "a"), (1, "b"), (2, "c")]
    stored = [f for f in (tmp_path / "ck").rglob("*") if f.is_file() and password.encode() in f.read_bytes()]
    assert stored == []  # the checkpoint (offset log included) holds no credentials


def test_the_consumer_named_as_the_reader_gives_the_wire_readers_rows_offsets_and_clock(spark, topic_factory, tmp_path):
    topic = topic_factory(partitions=2)
    fill(topic, 0, 30)
    options = {"maxEventsPerBatch": "25"}
    wire = stream(spark, topic, tmp_path / "wire", "jvm", **options)
    consumer = KafkaTopic(topic.bootstrap_servers, topic.topic, reader="consumer")
    assert len(wire) >= 3 and stream(spark, consumer, tmp_path / "consumer", "jvm", **options) == wire


def test_the_wire_reader_named_for_a_sasl_listener_is_refused_saying_what_to_use(
    spark, kafka_broker, topic_factory, monkeypatch, sasl_user, tmp_path
):
    plain = topic_factory(partitions=1)
    TopicWriter(plain).append(0, ["a"], ['{"i": 1}'])
    monkeypatch.setenv(BOOTSTRAP_ENV, f"127.0.0.1:{kafka_broker.sasl_port}")
    monkeypatch.setenv(PROTOCOL_ENV, "SASL_PLAINTEXT")
    monkeypatch.setenv(SASL_USERNAME_ENV, sasl_user[0])
    monkeypatch.setenv(SASL_PASSWORD_ENV, sasl_user[1])
    topic = KafkaTopic(f"127.0.0.1:{kafka_broker.sasl_port}", plain.topic, reader="wire")
    message = failed_read(spark, topic, tmp_path / "ck")
    assert "source.kafka.reader is wire, but the topic's connection speaks SASL_PLAINTEXT" in message
    assert "use reader: consumer" in message and sasl_user[1] not in message


def damage_the_second_batch(kafka_broker, topic) -> None:
    """Overwrite bytes inside the compressed records of the partition's second batch, on the
    broker's disk: the broker serves the batch as it is, its CRC no longer matching; the first
    and last batches, which planning reads, stay whole."""
    segment = next((Path(kafka_broker.data_dir) / "logs" / f"{topic.topic}-0").glob("*.log"))
    with open(segment, "r+b") as f:
        first = int.from_bytes(f.read(12)[8:], "big") + 12  # offset (8 bytes), then the batch's length
        f.seek(first + 61 + 24)  # past the v2 batch header (61 bytes) and the start of the gzip stream
        f.write(b"\x5a" * 40)


@pytest.mark.parametrize(
    "reader, crcs, says",
    [
        ("wire", "true", "is corrupt"),
        ("wire", "false", "is damaged"),
        ("consumer", "true", "corrupt"),
    ],
)
def test_a_damaged_batch_fails_the_read_with_a_named_error_whether_or_not_crcs_are_checked(
    spark, kafka_broker, topic_factory, tmp_path, reader, crcs, says
):
    topic = topic_factory(partitions=1)
    producer = Producer(topic.client_config() | {"compression.type": "gzip", "linger.ms": 200})
    for batch in range(3):
        for i in range(200 * batch, 200 * batch + 200):
            producer.produce(topic.topic, json.dumps({"i": i, "text": f"reading {i} " * 4}), f"d{i % 3}", partition=0)
        assert producer.flush(10) == 0
    damage_the_second_batch(kafka_broker, topic)
    damaged = KafkaTopic(topic.bootstrap_servers, topic.topic, {"check.crcs": crcs}, reader=reader)
    message = failed_read(spark, damaged, tmp_path / "ck")
    assert says in message, message[-3000:]
    if reader == "wire":
        assert f"Kafka topic '{topic.topic}' on {topic.bootstrap_servers}, partition 0" in message
        assert "IndexOutOfBounds" not in message.split("Caused by")[0]


def test_a_broker_that_throttles_the_reader_is_waited_out_and_every_record_read(
    spark, kafka_broker, topic_factory, tmp_path
):
    topic = topic_factory(partitions=1)
    TopicWriter(topic).append(0, [f"dev{i % 5}" for i in range(400)], [json.dumps({"i": i, "pad": "x" * 900})
                                                                      for i in range(400)])  # fmt: skip
    set_consumer_quota(kafka_broker, "throttled-reader", 200_000)  # ~360 KB at 200 KB/s: throttled for seconds
    throttled = KafkaTopic(
        topic.bootstrap_servers, topic.topic, {"client.id": "throttled-reader", "max.partition.fetch.bytes": "32768"},
        reader="wire",
    )  # fmt: skip
    started = time.monotonic()
    batches = stream(spark, throttled, tmp_path / "ck", "jvm")
    took = time.monotonic() - started
    assert [o for b in batches for _, o, *_ in b["rows"]] == list(range(400))
    assert took >= 1.0, took  # the quota held the reads back (Kafka's quota window forgives its first second or so)
