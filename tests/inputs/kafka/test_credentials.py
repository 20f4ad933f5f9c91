"""SASL credentials come from the operator's connection, only for its brokers, never from a
spec; a refused client is named."""

from __future__ import annotations

import pytest

from tidegate.inputs.kafka.client import SASL_PASSWORD_ENV, SASL_USERNAME_ENV, KafkaLogError, KafkaTopic
from tidegate.inputs.kafka.connections import BOOTSTRAP_ENV, PROTOCOL_ENV
from tidegate.inputs.kafka.log import KafkaLog
from tidegate.inputs.kafka.producer import TopicWriter


@pytest.fixture
def sasl_default(kafka_broker, monkeypatch):
    """The connection 'default' is the broker's SASL listener, as an operator sets it."""

    def configure(user: str, password: str) -> str:
        bootstrap = f"127.0.0.1:{kafka_broker.sasl_port}"
        monkeypatch.setenv(BOOTSTRAP_ENV, bootstrap)
        monkeypatch.setenv(PROTOCOL_ENV, "SASL_PLAINTEXT")
        monkeypatch.setenv(SASL_USERNAME_ENV, user)
        monkeypatch.setenv(SASL_PASSWORD_ENV, password)
        return bootstrap

    return configure


def test_a_sasl_listener_is_read_with_the_credentials_of_its_connection(
    kafka_broker, topic_factory, sasl_default, sasl_user
):
    plain = topic_factory(partitions=1)
    TopicWriter(plain).append(0, ["k"], ['{"i": 1}'])
    user, password = sasl_user
    topic = KafkaTopic(sasl_default(user, password), plain.topic)
    assert KafkaLog(topic).snapshot().end_offsets == (1,)
    assert password not in str(topic.source_options()) and password not in repr(topic)  # never carried along
    assert topic.spark_options()["kafka.sasl.jaas.config"].endswith(f'username="{user}" password="{password}";')
    # the plain listener of the same broker is not the connection's: it gets no credentials, and still reads
    assert "sasl.password" not in plain.client_config() and plain.client_config()["security.protocol"] == "PLAINTEXT"
    assert KafkaLog(plain).snapshot().end_offsets == (1,)


@pytest.mark.slow  # the client retries for its whole timeout (10 s) before it gives up
def test_an_unauthorised_client_is_refused_naming_topic_broker_and_what_to_check(
    kafka_broker, topic_factory, sasl_default
):
    plain = topic_factory(partitions=1)
    topic = KafkaTopic(sasl_default("tidegate", "wrong"), plain.topic)
    with pytest.raises(KafkaLogError) as refused:
        KafkaLog(topic)
    message = str(refused.value)
    assert repr(plain.topic) in message and topic.bootstrap_servers in message
    assert "Authentication" in message or "authentication" in message
    assert "security settings" in message and "wrong" not in message  # the password is never echoed
