"""A Kafka topic answers the planner's questions as the embedded log does — on a real broker."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tidegate.inputs.event_log import RetentionError
from tidegate.inputs.kafka.client import KafkaLogError, KafkaTopic
from tidegate.inputs.kafka.log import KafkaLog
from tidegate.inputs.kafka.producer import TopicWriter
from tidegate.inputs.planning import plan_batch_end
from tidegate.lineage.offsets import SourceOffset
from tidegate.runtime.jobs.planning import RetentionGuardError, resolve_start


def _write(topic: KafkaTopic, partition: int, n: int, start: int = 0) -> None:
    TopicWriter(topic).append(
        partition, [f"k{i}" for i in range(start, start + n)], [f'{{"i": {i}}}' for i in range(start, start + n)]
    )


def test_offsets_arrivals_and_reads_follow_the_broker(topic_factory):
    topic = topic_factory(partitions=2)
    _write(topic, 0, 30)
    log = KafkaLog(topic)
    snap = log.snapshot()
    assert snap.end_offsets == (30, 0) and [log.start_offset(p) for p in (0, 1)] == [0, 0]
    table = [b for b in log.read_batches(0, 5, 30, max_rows=10)]
    assert [b.num_rows for b in table] == [10, 10, 5]
    offsets = [o for b in table for o in b.column("offset").to_pylist()]
    assert offsets == list(range(5, 30))
    arrivals = [a.value for b in table for a in b.column("arrival_time")]
    assert arrivals == sorted(arrivals) and snap.clock_us == log.arrival_at(0, 29) >= arrivals[-1]
    # every later record arrives at the snapshot's clock or after: the broker stamps it
    _write(topic, 1, 3, start=30)
    assert log.arrival_at(1, 0) >= snap.clock_us
    assert log.offset_for_arrival(0, arrivals[0]) <= 5 and log.offset_for_arrival(0, snap.clock_us + 1) == 30


def test_micro_batches_are_planned_over_kafka_as_over_the_embedded_log(topic_factory):
    topic = topic_factory(partitions=2)
    _write(topic, 0, 40)
    _write(topic, 1, 4)
    log = KafkaLog(topic)
    end = plan_batch_end(log, SourceOffset({0: 0, 1: 0}, None), log.snapshot(), max_events=20)
    assert end.offsets == {0: 16, 1: 4}  # fair shares: the quiet partition is read whole
    # partition 0 was cut: the clock promises no more than its first unread arrival
    assert end.clock_us == log.arrival_at(0, 16)


def test_a_start_before_what_retention_kept_names_the_missing_span_per_partition(topic_factory):
    topic = topic_factory(partitions=2)
    _write(topic, 0, 20)
    _write(topic, 1, 20)
    log = KafkaLog(topic)
    first_arrival = log.arrival_at(0, 0)
    admin = AdminClient(topic.client_config())
    done = admin.delete_records([TopicPartition(topic.topic, 0, 12)])  # what retention does to old segments
    for future in done.values():
        future.result(10)
    with pytest.raises(RetentionGuardError) as refused:
        resolve_start(log, first_arrival, accept_partial=False)
    message = str(refused.value)
    assert "partition 0 offsets 0–11" in message and "partition 1" not in message and "--accept-partial" in message
    offsets, partial, reason = resolve_start(log, first_arrival, accept_partial=True)
    assert offsets == {0: 12, 1: 0} and partial and "partition 0" in reason
    with pytest.raises(RetentionError):
        log.check_retained(0, 3)


def test_a_topic_with_producer_timestamps_is_refused_saying_how_to_fix_it(kafka_broker):
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap, "log_level": "0"})
    admin.create_topics([NewTopic("create-time", 1, 1)])["create-time"].result(10)
    with pytest.raises(KafkaLogError) as refused:
        KafkaLog(KafkaTopic(kafka_broker.bootstrap, "create-time"))
    message = str(refused.value)
    assert "'create-time'" in message and kafka_broker.bootstrap in message
    assert "CreateTime" in message and "message.timestamp.type=LogAppendTime" in message


@pytest.mark.parametrize(
    "bootstrap, topic, says",
    [
        (None, "no-such-topic", "the topic does not exist"),  # a topic never created
        pytest.param(
            "127.0.0.1:9",
            "readings",
            "did not answer",  # a wrong bootstrap address / a broker that is down
            marks=pytest.mark.slow,
        ),  # the client retries for its whole timeout (10 s)
    ],
)
def test_bad_addresses_are_named_with_topic_and_broker(kafka_broker, bootstrap, topic, says):
    where = KafkaTopic(bootstrap or kafka_broker.bootstrap, topic)
    with pytest.raises(KafkaLogError) as failed:
        KafkaLog(where)
    assert (
        says in str(failed.value) and repr(topic) in str(failed.value) and where.bootstrap_servers in str(failed.value)
    )


def test_start_modes_over_kafka_seek_by_append_time_and_read_back_the_look_back(topic_factory, tmp_path):
    import yaml

    from platform_support import REPO
    from tidegate.jobspec import parse_spec
    from tidegate.runtime.jobs.planning import plan_start

    topic = topic_factory(partitions=2)
    _write(topic, 0, 10)
    _write(topic, 1, 10)
    log = KafkaLog(topic)
    middle = log.arrival_at(1, 0) + 1_000  # after every record so far
    _write(topic, 0, 5, start=10)
    spec = parse_spec(yaml.safe_load((REPO / "jobs" / "device_fleet_seconds.yaml").read_text()))
    lookback = spec.lookback_us
    custom = plan_start(spec, "custom", clock_us=log.clock_now_us(), at_us=middle + lookback, previous=None, log=log)
    # T − L = middle: each partition starts at its first record arriving at or after it
    assert custom.input_from_us == middle and custom.starting_offsets == {0: 10, 1: 10}
    now = plan_start(spec, "now", clock_us=log.clock_now_us(), at_us=None, previous=None, log=log)
    assert now.output_start_us >= log.snapshot().clock_us and now.checkpoint == "fresh"


def test_a_silent_partitions_clock_follows_the_appends_to_the_others(topic_factory):
    """semantics §2 idle units: the clock recorded with a micro-batch moves while partition 1 is
    silent, because the broker stamps partition 0's records; and it is recorded, not
    re-estimated, so a replayed batch sees the same value (lineage.offsets)."""
    topic = topic_factory(partitions=2)
    _write(topic, 0, 3)
    _write(topic, 1, 3)
    log = KafkaLog(topic)
    first = plan_batch_end(log, SourceOffset({0: 0, 1: 0}, None), log.snapshot())
    silent_since = log.arrival_at(1, 2)
    import time

    time.sleep(0.05)
    _write(topic, 0, 3, start=3)  # only partition 0 receives records now
    second = plan_batch_end(log, first, log.snapshot())
    assert second.offsets == {0: 6, 1: 3}
    assert second.clock_us > silent_since and second.clock_us == log.arrival_at(0, 5)
    idle = plan_batch_end(log, second, log.snapshot(), idle_clock_interval_us=0)
    assert idle == second or idle.clock_us == second.clock_us  # no new records: the clock stays where it was


def test_a_silent_topics_clock_is_this_hosts_less_the_configured_skew(topic_factory, monkeypatch):
    """semantics §2 idle units, the whole input silent: no record moves the broker clock, so
    the snapshot's clock is this host's less the maximum skew between the clocks — and a
    record appended after it is still stamped at or after it."""
    from tidegate.errors import ConfigError
    from tidegate.inputs.kafka.log import SKEW_ENV, max_clock_skew_us

    topic = topic_factory(partitions=2)
    _write(topic, 0, 2)
    log = KafkaLog(topic)
    last = log.arrival_at(0, 1)
    monkeypatch.setenv(SKEW_ENV, "200ms")
    time.sleep(0.5)
    before = time.time_ns() // 1000
    snap = log.snapshot()
    assert before - 200_000 <= snap.clock_us <= time.time_ns() // 1000 - 200_000 and snap.clock_us > last
    _write(topic, 1, 1)
    assert log.arrival_at(1, 0) >= snap.clock_us
    monkeypatch.setenv(SKEW_ENV, "1h")
    assert log.snapshot().clock_us == log.arrival_at(1, 0)  # a record ahead of the estimate is the clock
    monkeypatch.delenv(SKEW_ENV)
    assert max_clock_skew_us() == 5_000_000
    for bad in ("2h", "-1s", "soon"):
        monkeypatch.setenv(SKEW_ENV, bad)
        with pytest.raises(ConfigError, match=f"{SKEW_ENV}=.* is not a duration from 0s to 1h"):
            log.snapshot()


def test_a_topic_deleted_under_a_reader_is_named_with_its_broker_and_what_to_do(topic_factory):
    from tidegate.inputs.kafka.topics import delete_topic

    topic = topic_factory(partitions=1)
    _write(topic, 0, 3)
    log = KafkaLog(topic)
    delete_topic(topic)
    deadline = time.monotonic() + 10
    with pytest.raises(KafkaLogError) as failed:
        while time.monotonic() < deadline:  # the broker removes a deleted topic's partitions a moment later
            log.snapshot()
            time.sleep(0.05)
    message = str(failed.value)
    assert repr(topic.topic) in message and topic.bootstrap_servers in message
    assert "does not exist" in message and "fresh checkpoint" in message


def test_a_logic_change_replays_from_the_last_output_minus_the_look_back_over_kafka(topic_factory):
    from pathlib import Path

    import yaml

    from platform_support import REPO
    from tidegate.jobspec import parse_spec
    from tidegate.lineage.final import EmittedCut
    from tidegate.runtime.jobs.planning import PreviousLineage, plan_start

    topic = topic_factory(partitions=2)
    _write(topic, 0, 10)
    _write(topic, 1, 10)
    log = KafkaLog(topic)
    data = yaml.safe_load((REPO / "jobs" / "device_fleet_seconds.yaml").read_text())
    old, new = parse_spec(data), parse_spec(data | {"aggregates": {"readings": "count(*)"}})
    last_output = log.snapshot().clock_us + new.lookback_us + 1_000  # T − L lands after every record
    previous = PreviousLineage("L1", Path("/nowhere"), old.fingerprint, None, True, EmittedCut(last_output, 3, None))
    plan = plan_start(new, "last-stopped", clock_us=log.clock_now_us(), at_us=None, previous=previous, log=log)
    assert plan.checkpoint == "fresh" and "logic changed" in plan.reason and plan.new_lineage
    assert plan.output_start_us == last_output and plan.starting_offsets == {0: 10, 1: 10}


class _Flaky:
    """An admin client whose first ``failures`` offset requests fail with ``code``."""

    def __init__(self, real, code: int, failures: int) -> None:
        self.real, self.code, self.failures, self.calls = real, code, failures, 0

    def list_offsets(self, *args, **kwargs):
        self.calls += 1
        if self.calls <= self.failures:
            raise KafkaException(KafkaError(self.code))
        return self.real.list_offsets(*args, **kwargs)


def test_offsets_are_asked_again_while_a_leader_moves_and_a_missing_topic_is_not(topic_factory):
    topic = topic_factory(partitions=2)
    _write(topic, 1, 4)
    log = KafkaLog(topic)
    log._admin = moving = _Flaky(log._admin, KafkaError.NOT_LEADER_FOR_PARTITION, failures=2)
    assert log.end_offsets() == [0, 4] and moving.calls == 3  # a topic just created: its leader not yet known
    log._admin = gone = _Flaky(moving.real, KafkaError.UNKNOWN_TOPIC_OR_PART, failures=5)
    with pytest.raises(KafkaLogError, match="does not exist"):
        log.end_offsets()
    assert gone.calls == 1
