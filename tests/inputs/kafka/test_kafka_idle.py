"""semantics §2 idle units over Kafka, through Spark: a silent partition does not hold the job
watermark back, and a replayed micro-batch reuses the broker clock its offsets recorded.

Timeline (arrivals stamped by the broker, event time = send time, late-arrival tolerance 2 s,
1-second tumbling windows, no ``over``: the job watermark is the minimum over partitions)::

    partition 1  q q q q q ·····························  silent after Aq
    partition 0  ··········· b b b b b b b b b b b b b b  for 4 s after Aq
                            ^ Aq               clock ≈ Aq + 4 s

Without the broker clock, partition 1's watermark would stay at Aq − 2 s and no window
ending after it would close; with it, partition 1 follows the clock (≈ Aq + 4 s − 2 s).
"""

from __future__ import annotations

import json
import time

import pytest
import yaml
from pyspark.sql import functions as F

from platform_support import REPO
from tidegate.inputs.kafka.log import KafkaLog
from tidegate.inputs.kafka.producer import TopicWriter
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import BATCH_COLUMN, LAYOUT_COLUMNS
from tidegate.spark.pipeline.runner import run_batch, run_stream
from tidegate.spark.tools.compare import compare

pytestmark = [pytest.mark.spark, pytest.mark.slow]
S = 1_000_000


def send(writer: TopicWriter, partition: int, device: str, events: int, every_s: float) -> None:
    """``events`` readings of ``device``, one every ``every_s``, each stamped with its send time."""
    for i in range(events):
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"
        writer.append(
            partition,
            [device],
            [json.dumps({"deviceId": device, "eventTime": stamp, "temperature": 20.0 + i % 7, "humidity": 50.0})],
        )
        time.sleep(every_s)


def spec():
    data = yaml.safe_load((REPO / "jobs" / "device_fleet_seconds.yaml").read_text())
    data.pop("over")  # one unit per partition: the silent one is in every window's minimum
    data["window"]["size"] = "1s"
    return parse_spec(data)


def test_a_silent_partition_lets_windows_close_and_a_replayed_batch_emits_the_same_rows(spark, topic_factory, tmp_path):
    topic = topic_factory(partitions=2)
    writer = TopicWriter(topic)
    send(writer, 1, "quiet", 5, 0.1)
    send(writer, 0, "busy", 80, 0.05)
    log = KafkaLog(topic)
    silent_since = log.arrival_at(1, 4)
    assert log.snapshot().clock_us - silent_since > 3 * S  # partition 0 went on for seconds after

    root = tmp_path / "stream"
    options = {"maxEventsPerBatch": "30"}
    first = run_stream(spark, spec(), topic, root, extra_options=options)
    assert first.batches >= 3
    output = spark.read.parquet(str(first.paths.output))
    # the silent partition's watermark followed the broker clock (clock − late), not its own
    # last record (silent_since − late): it is the job watermark, and windows past its last
    # record closed
    end = first.reports[-1]
    assert end.clock_us - silent_since > 3 * S and end.job_watermark_us == end.clock_us - 2 * S
    latest_end = output.agg(F.max(F.unix_micros("window_end"))).first()[0]
    assert latest_end > silent_since, (latest_end, silent_since)
    assert output.where(F.col("deviceId") == "quiet").agg(F.sum("readings")).first()[0] == 5

    # replay the last micro-batch after the broker clock has moved on: Spark runs it again
    # from its offset log, whose recorded clock (not a new one) decides which windows close
    last = max(int(f.name) for f in (root / "checkpoint" / "commits").iterdir() if f.name.isdigit())
    emitted = output.where(F.col(BATCH_COLUMN) == last).drop(*LAYOUT_COLUMNS)
    assert emitted.count() > 0  # the batch closed windows: a re-estimated clock would close more
    recorded_clock = max(r.clock_us for r in first.reports)
    for name in (str(last), f".{last}.crc"):  # as if the driver died before Spark's commit
        (root / "checkpoint" / "commits" / name).unlink()
    send(writer, 0, "busy", 40, 0.05)
    assert log.snapshot().clock_us > recorded_clock + S
    second = run_stream(spark, spec(), topic, root, extra_options=options)
    replayed = spark.read.parquet(str(first.paths.output)).where(F.col(BATCH_COLUMN) == last).drop(*LAYOUT_COLUMNS)
    diff = compare(emitted, replayed)
    assert diff.equal, diff

    # and the whole stream, replay included, is the batch path over the topic, up to the
    # watermark the stream reached (the batch path runs later: a silent topic's clock, this
    # host's less the skew, has closed more windows by then)
    batch = run_batch(spark, spec(), topic, tmp_path / "batch")
    frontier = max(r.job_watermark_us for r in (*first.reports, *second.reports))
    closed = spark.read.parquet(str(batch.paths.output)).where(F.unix_micros("window_end") < frontier)
    diff = compare(
        closed.drop(*LAYOUT_COLUMNS),
        spark.read.parquet(str(first.paths.output)).drop(*LAYOUT_COLUMNS),
    )
    assert diff.equal, diff


def test_a_silent_topic_closes_its_windows_on_this_hosts_clock_less_the_skew(
    spark, topic_factory, tmp_path, monkeypatch
):
    """semantics §2 idle units, the whole input silent: no record moves the broker clock, so the
    clock is this host's less the maximum skew (default 5 s). A run that starts once the
    clock passed the last window's end by the late tolerance emits every window, the last
    ones included, which a clock moved only by records could never close."""
    from tidegate.inputs.kafka.log import SKEW_ENV
    from tidegate.spark.pipeline import java_source

    monkeypatch.setenv(SKEW_ENV, "5s")  # the default; the driver plans the micro-batches, here
    assert java_source.available(spark, kafka=True)  # the JVM reader: its planner is this process
    topic = topic_factory(partitions=2)
    writer = TopicWriter(topic)
    send(writer, 0, "a", 10, 0.05)
    send(writer, 1, "b", 10, 0.05)
    log = KafkaLog(topic)
    last_append = max(log.arrival_at(p, 9) for p in (0, 1))
    late, skew = 2 * S, 5 * S
    time.sleep(max(0.0, (last_append + late + skew + 2 * S) / S - time.time()))
    assert log.snapshot().clock_us > last_append + late + S  # the clock moved without a record

    result = run_stream(spark, spec(), topic, tmp_path / "stream", extra_options={"idleClockInterval": "1s"})
    output = spark.read.parquet(str(result.paths.output))
    assert output.agg(F.sum("readings")).first()[0] == 20  # every reading is in an emitted window
    latest_end = output.agg(F.max(F.unix_micros("window_end"))).first()[0]
    assert latest_end > last_append - late  # past where the records alone would have moved the watermark
    batch = run_batch(spark, spec(), topic, tmp_path / "batch")
    diff = compare(spark.read.parquet(str(batch.paths.output)).drop(*LAYOUT_COLUMNS), output.drop(*LAYOUT_COLUMNS))
    assert diff.equal, diff
