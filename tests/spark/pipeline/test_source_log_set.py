"""The ``tidegate`` source over inputs that read their own logs: two event logs read as one stream,
each event under the job's partition number, every event exactly once across a restart, the
earlier clock recorded, and the batch read equal — through the JVM reader and the Python source."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from tidegate.inputs.event_log import EventLog
from tidegate.inputs.log import source_options
from tidegate.inputs.log_set import LogSet
from tidegate.lineage.offsets import batch_offsets
from tidegate.spark.pipeline.java_source import READER_ENV
from tidegate.spark.pipeline.read import read_log, read_log_stream

pytestmark = pytest.mark.spark
T0 = 1_767_268_800_000_000
S = 1_000_000


@pytest.fixture(autouse=True, params=["jvm", "python"])
def reader(request, monkeypatch):
    monkeypatch.setenv(READER_ENV, request.param)
    return request.param


def fill(log: EventLog, first: int, count: int, clock_s: int) -> None:
    for p in range(log.partitions):
        log.append(
            p,
            [None] * count,
            [json.dumps({"log": log.root.name, "p": p, "i": i}) for i in range(first, first + count)],
            arrival_times=[T0 + i * S for i in range(first, first + count)],
        )
    log.advance_clock(T0 + clock_s * S)


def rows(df) -> list[tuple]:
    return [tuple(r) for r in df.select("partition", "offset", F.unix_micros("arrival_time"), "payload").collect()]


def test_two_logs_stream_as_one_exactly_once_with_the_earlier_clock(spark, tmp_path):
    orders = EventLog.create(tmp_path / "orders", partitions=2, clock="manual")
    payments = EventLog.create(tmp_path / "payments", partitions=1, clock="manual")
    for log in (orders, payments):
        log.advance_clock(T0)
    fill(orders, 0, 5, clock_s=60)
    fill(payments, 0, 4, clock_s=10)  # the payments' log is behind
    options = source_options(LogSet((("orders", orders.root), ("payments", payments.root))))
    checkpoint = tmp_path / "ck"
    seen: list = []

    def run() -> None:
        def each(df, batch_id):
            seen.append((batch_offsets(checkpoint, batch_id)[1], rows(df)))

        stream = read_log_stream(spark, options | {"maxEventsPerBatch": "6"})
        query = (stream.writeStream.foreachBatch(each).option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())  # fmt: skip
        query.awaitTermination(120)
        assert query.exception() is None, query.exception()

    run()
    fill(payments, 20, 2, clock_s=30)  # more payments while the job is stopped
    run()
    read = [r for _, batch in seen for r in batch]
    assert len(read) == len(set(read)) == 2 * 5 + 1 * 6
    by_partition = {p: [json.loads(v) for q, _, _, v in read if q == p] for p in range(3)}
    assert {(e["log"], e["p"]) for e in by_partition[0]} == {("orders", 0)}
    assert {(e["log"], e["p"]) for e in by_partition[2]} == {("payments", 0)}
    assert sorted(e["i"] for e in by_partition[2]) == [0, 1, 2, 3, 20, 21]
    assert seen[-1][0].offsets == {0: 5, 1: 5, 2: 6}
    assert seen[-1][0].clock_us == T0 + 30 * S  # the earlier of the two clocks (orders' is at 60 s)
    assert sorted(rows(read_log(spark, options))) == sorted(read)  # the batch path reads the same events
