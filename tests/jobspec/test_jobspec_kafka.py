"""A spec's Kafka input names a connection or brokers, never security settings or credentials,
and its client ``options`` come from an allowlist (job specs are written by job authors)."""

from __future__ import annotations

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec import parse_spec
from tidegate.inputs.kafka.client import CLIENT_OPTIONS, RECONNECT_BACKOFF_MS, KafkaTopic
from tidegate.inputs.kafka.connections import KafkaConnection
from tidegate.inputs.log import input_location

SECRET = "s3cr3t-Pa55"
CONNECTIONS = {"default": KafkaConnection("default", "kafka:9092"),
               "pay": KafkaConnection("pay", "pay-1:9093,pay-2:9093", "SASL_SSL", sasl_username="payer")}  # fmt: skip


def spec(**kafka) -> dict:
    return {"name": "readings", "version": 1, "source": {"kafka": {"topic": "readings", **kafka}},
            "payload": {"deviceId": "string"}}  # fmt: skip


def refusal(data: dict) -> str:
    with pytest.raises(ConfigError) as refused:
        parse_spec(data)
    return str(refused.value)


def test_a_spec_names_a_connection_and_reads_its_brokers_with_it():
    parsed = parse_spec(spec(connection="pay", options={"fetch.min.bytes": 1024}))
    assert parsed.source.kafka.connection == "pay" and parse_spec(parsed.to_dict()) == parsed
    where = input_location(parsed, None, CONNECTIONS)
    assert where == KafkaTopic("pay-1:9093,pay-2:9093", "readings", {"fetch.min.bytes": "1024"}, "pay")
    # a spec written before connections existed is stored as it was: no connection key
    assert "connection" not in parse_spec(spec(bootstrap_servers="b:9092")).to_dict()["source"]["kafka"]


def test_which_connection_a_spec_reads_through_does_not_change_its_fingerprint():
    assert parse_spec(spec(connection="pay")).fingerprint == parse_spec(spec(bootstrap_servers="b:9092")).fingerprint


def test_a_spec_naming_brokers_gets_their_connection_or_none():
    assert input_location(parse_spec(spec(bootstrap_servers="pay-2:9093")), None, CONNECTIONS).connection == "pay"
    elsewhere = input_location(parse_spec(spec(bootstrap_servers="evil.example:9093")), None, CONNECTIONS)
    assert elsewhere.connection == "" and "sasl.username" not in elsewhere.client_config({})
    assert input_location(parse_spec(spec()), None, CONNECTIONS).bootstrap_servers == "kafka:9092"  # the default


def test_an_unknown_connection_is_refused_when_the_job_is_planned_naming_the_configured_ones():
    with pytest.raises(ConfigError) as unknown:
        input_location(parse_spec(spec(connection="payments")), None, CONNECTIONS)
    assert "job readings: source.kafka.connection: Kafka connection 'payments' is not configured" in str(unknown.value)
    assert "default, pay" in str(unknown.value) and "payer" not in str(unknown.value)


@pytest.mark.parametrize("kafka, says", [
    ({"connection": "pay", "bootstrap_servers": "pay-1:9093"}, ["names both a connection and bootstrap_servers"]),
    ({"connection": "Pay Ments"}, ["source.kafka.connection 'Pay Ments' is not a connection name"]),
    ({"options": {"security.protocol": "SASL_SSL"}},
     ["source.kafka.options.security.protocol", "not set in a job spec", "source.kafka.connection"]),
    ({"options": {"sasl.mechanism": "PLAIN"}}, ["source.kafka.options.sasl.mechanism", "not set in a job spec"]),
    ({"options": {"ssl.truststore.location": "/etc/passwd"}}, ["ssl.truststore.location", "not set in a job spec"]),
    ({"options": {"sasl.jaas.config": SECRET}}, ["sasl.jaas.config", "connection"]),
    ({"options": {"plugin.library.paths": "/tmp/evil.so"}},
     ["source.kafka.options.plugin.library.paths is not a Kafka client setting a job spec may set",
      "fetch.min.bytes", "ask the operator"]),
    ({"options": {"interceptor.classes": "x.Evil"}}, ["interceptor.classes is not a Kafka client setting"]),
    ({"options": {"partition.assignment.strategy": "x.Evil"}}, ["partition.assignment.strategy is not"]),
    ({"options": {"fetch.min.byte": "1"}}, ["fetch.min.byte is not", "did you mean fetch.min.bytes?"]),
    ({"options": {"fetch.min.bytes": "1k"}}, ["source.kafka.options.fetch.min.bytes is '1k'", "a whole number"]),
    ({"options": {"fetch.max.bytes": "999999999999"}},
     ["source.kafka.options.fetch.max.bytes is '999999999999'", "a whole number up to 2147483647"]),
    ({"options": {"isolation.level": "dirty"}}, ["isolation.level is 'dirty'", "read_committed or read_uncommitted"]),
    ({"options": {"client.id": "x" * 300}}, ["client.id is", "text"]),
])
def test_a_spec_may_not_set_security_credentials_code_or_paths(kafka, says):
    message = refusal(spec(**kafka))
    assert all(s in message for s in says), message
    assert SECRET not in message and "/tmp/evil.so" not in message


def test_every_allowed_option_reaches_both_clients_under_its_own_name():
    options = {name: ("read_committed" if name == "isolation.level" else "true" if name == "check.crcs"
                      else "tidegate" if name.startswith("client.") else "100") for name in CLIENT_OPTIONS}  # fmt: skip
    topic = input_location(parse_spec(spec(bootstrap_servers="b:9092", options=options)), None, {})
    spark, librdkafka = topic.spark_options({}), topic.client_config({})
    assert all(spark[f"kafka.{name}"] == value for name, value in options.items())
    assert librdkafka["fetch.wait.max.ms"] == "100" and "max.poll.records" not in librdkafka
    assert librdkafka["reconnect.backoff.ms"] == "100"  # the spec's, over the platform's shorter default
    assert spark["kafka.security.protocol"] == librdkafka["security.protocol"] == "PLAINTEXT"


def test_librdkafka_clients_open_their_first_cluster_connection_after_a_short_backoff():
    topic = input_location(parse_spec(spec(bootstrap_servers="b:9092")), None, {})
    assert topic.client_config({})["reconnect.backoff.ms"] == str(RECONNECT_BACKOFF_MS) == "10"
    assert "kafka.reconnect.backoff.ms" not in topic.spark_options({})  # the Java client's own default (50 ms)


def test_a_stored_version_with_a_refused_option_is_refused_when_the_job_is_planned():
    parsed = parse_spec(spec(bootstrap_servers="b:9092"))
    parsed.source.kafka.options["plugin.library.paths"] = "/tmp/evil.so"  # as stored before the allowlist
    with pytest.raises(ConfigError, match="job readings: source.kafka.options.plugin.library.paths is not"):
        input_location(parsed, None, CONNECTIONS)
