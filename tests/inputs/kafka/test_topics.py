"""A topic's partitions and timestamp type, asked of a real broker with the admin client given."""

from __future__ import annotations

import pytest

from tidegate.inputs.kafka import topics
from tidegate.inputs.kafka.client import KafkaLogError, KafkaTopic
from tidegate.inputs.kafka.log import KafkaLog


def test_the_client_given_answers_and_no_other_is_opened(topic_factory, monkeypatch):
    topic = topic_factory(partitions=3)
    client = topics.admin(topic)
    assert len(client) == 0 and not client  # falsy while its queue is empty: why `client or admin()` was wrong

    def opened(_topic):
        raise AssertionError("a second admin client was opened although one was given")

    monkeypatch.setattr(topics, "admin", opened)
    assert topics.describe_partitions(topic, client) == 3
    topics.check_append_time(topic, client)
    assert topics.describe_append_time_topic(topic, client) == 3


def test_a_log_opens_one_admin_client_for_its_checks_and_offsets(topic_factory, monkeypatch):
    topic = topic_factory(partitions=2)
    made = []
    real = topics.admin
    monkeypatch.setattr(topics, "admin", lambda t: made.append(t) or real(t))
    monkeypatch.setattr("tidegate.inputs.kafka.log.admin", topics.admin)
    log = KafkaLog(topic)
    assert log.snapshot().end_offsets == (0, 0) and made == [topic]


def test_a_missing_topic_is_reported_as_missing_before_its_configuration(kafka_broker):
    with pytest.raises(KafkaLogError, match="the topic does not exist"):
        topics.describe_append_time_topic(KafkaTopic(kafka_broker.bootstrap, "never-created"))
