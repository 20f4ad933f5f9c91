"""A join of an event log and a Kafka topic (inputs that read their own logs) on a real broker:
orders in the embedded log, payments in a topic with the provider's own fields and time
format; the stream, through the JVM reader jobs use, equals the batch path (which reads the
span through the same planner; both readers over a set of logs: tests/spark/pipeline/test_source_log_set.py)."""

from __future__ import annotations

import json
import time

import pytest
from pyspark.sql import functions as F

from tidegate.inputs.event_log import EventLog
from tidegate.inputs.kafka.producer import TopicWriter
from tidegate.inputs.log_set import LogSet
from tidegate.jobspec import parse_spec
from tidegate.spark.pipeline.java_source import READER_ENV
from tidegate.spark.pipeline.runner import run_batch, run_stream
from tidegate.spark.tools.compare import compare

pytestmark = pytest.mark.spark
S = 1_000_000


def spec_for(topic, event_log):
    return parse_spec(
        {
            "name": "event-log-and-kafka",
            "version": 1,
            "inputs": {
                "orders": {
                    "source": {"event_log": str(event_log)},
                    "payload": {"orderId": "string", "orderedAt": "string"},
                    "timestamp_by": "orderedAt",
                    "policy": {"late_arrival_tolerance": "5s"},
                },
                "payments": {
                    "source": {"kafka": {"bootstrap_servers": topic.bootstrap_servers, "topic": topic.topic}},
                    "payload": {"orderId": "string", "paid": "double", "paidAt": "string"},
                    "timestamp_by": "paidAt",
                    "time_format": "yyyy-MM-dd HH:mm:ss",
                    "policy": {"late_arrival_tolerance": "1s"},
                },
            },
            "join": {
                "left": "orders",
                "right": "payments",
                "keys": ["orders.orderId = payments.orderId"],
                "within": "DATEDIFF(minute, orders, payments) BETWEEN 0 AND 15",
            },
            "select": {"orderId": "orders.orderId", "paid": "payments.paid"},
        }
    )


def test_orders_in_an_event_log_and_payments_in_a_topic_stream_as_the_batch_path_reads(
    spark, topic_factory, tmp_path, monkeypatch
):
    monkeypatch.setenv(READER_ENV, "jvm")
    topic = topic_factory(partitions=2)
    now = time.time_ns() // 1000
    orders = EventLog.create(tmp_path / "orders", partitions=1, clock="manual")
    orders.advance_clock(now - 120 * S)
    at = [now - 100 * S + i * S for i in range(20)]
    orders.append(
        0,
        [None] * 20,
        [json.dumps({"orderId": f"o{i}", "orderedAt": _iso(t)}) for i, t in enumerate(at)],
        arrival_times=[t + S for t in at],
    )
    orders.advance_clock(now + 30 * S)  # the orders' log has moved on: the topic's clock holds the job back
    writer = TopicWriter(topic)
    for p in (0, 1):  # each even order paid 30 s after it, the payments spread over the topic's partitions
        paid = [i for i in range(20) if i % 2 == 0 and i % 4 // 2 == p]
        writer.append(p, [None] * len(paid),
                      [json.dumps({"orderId": f"o{i}", "paid": 5.0, "paidAt": _text(at[i] + 30 * S)})
                       for i in paid])  # fmt: skip
    time.sleep(8)  # a later record moves the broker's clock past the payments' (adjusted) times
    writer.append(0, [None], [json.dumps({"orderId": "none", "paid": 0.0, "paidAt": _text(time.time_ns() // 1000)})])

    spec, logs = spec_for(topic, tmp_path / "orders"), LogSet((("orders", orders.root), ("payments", topic)))
    stream = run_stream(spark, spec, logs, tmp_path / "run", extra_options={"maxEventsPerBatch": "9"})
    assert stream.batches >= 3
    batch = run_batch(spark, spec, logs, tmp_path / "batch")
    out = spark.read.parquet(str(tmp_path / "run" / "output"))
    reference = spark.read.parquet(str(batch.paths.output))
    assert reference.where("paid IS NOT NULL").count() == 10  # every payment matched its order
    assert {r.right_partition for r in reference.select("right_partition").collect()} == {
        1,
        2,
    }  # the topic's partitions
    diff = compare(reference, out)
    assert diff.equal, diff
    assert out.select(F.max("system_time")).first()[0] is not None


def _iso(t_us: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t_us // S)) + f".{t_us % S:06d}Z"


def _text(t_us: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t_us // S))
