"""SASL credentials come from the environment, never from a spec, and a refused client is named."""

from __future__ import annotations

import pytest

from tidegate.inputs.kafka.client import SASL_PASSWORD_ENV, SASL_USERNAME_ENV, KafkaLogError, KafkaTopic
from tidegate.inputs.kafka.log import KafkaLog
from tidegate.inputs.kafka.producer import TopicWriter

SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}


def test_a_sasl_listener_is_read_with_credentials_from_the_environment(kafka_broker, topic_factory, monkeypatch,
                                                                       sasl_user):
    plain = topic_factory(partitions=1)
    TopicWriter(plain).append(0, ["k"], ['{"i": 1}'])
    topic = KafkaTopic(f"127.0.0.1:{kafka_broker.sasl_port}", plain.topic, SASL)
    user, password = sasl_user
    monkeypatch.setenv(SASL_USERNAME_ENV, user)
    monkeypatch.setenv(SASL_PASSWORD_ENV, password)
    assert KafkaLog(topic).snapshot().end_offsets == (1,)
    assert password not in str(topic.source_options()) and password not in repr(topic)  # never carried along
    assert topic.spark_options()["kafka.sasl.jaas.config"].endswith(f'username="{user}" password="{password}";')


@pytest.mark.slow  # the client retries for its whole timeout (10 s) before it gives up
def test_an_unauthorised_client_is_refused_naming_topic_broker_and_what_to_check(kafka_broker, topic_factory,
                                                                                   monkeypatch):
    plain = topic_factory(partitions=1)
    topic = KafkaTopic(f"127.0.0.1:{kafka_broker.sasl_port}", plain.topic, SASL)
    monkeypatch.setenv(SASL_USERNAME_ENV, "tidegate")
    monkeypatch.setenv(SASL_PASSWORD_ENV, "wrong")
    with pytest.raises(KafkaLogError) as refused:
        KafkaLog(topic)
    message = str(refused.value)
    assert repr(plain.topic) in message and topic.bootstrap_servers in message
    assert "Authentication" in message or "authentication" in message
    assert "security settings" in message and "wrong" not in message  # the password is never echoed
