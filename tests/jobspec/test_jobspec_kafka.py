"""A spec's Kafka input names a connection or brokers the operator knows, never security settings
or credentials, and its client ``options`` come from an allowlist, numbers within bounds (job
specs are written by job authors). Hostile cases: hostile_kafka_specs.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tidegate.errors import ConfigError
from tidegate.inputs.kafka.client import CLIENT_OPTIONS, RECONNECT_BACKOFF_MS, KafkaTopic, jvm_reader
from tidegate.inputs.kafka.connections import KafkaConnection
from tidegate.inputs.log import input_location
from tidegate.jobspec import parse_spec
from tidegate.jobspec.source import Bounds

SECRET = "s3cr3t-Pa55"
CONNECTIONS = {"default": KafkaConnection("default", "kafka:9092"),
               "pay": KafkaConnection("pay", "pay-1:9093,pay-2:9093", "SASL_SSL", sasl_username="payer")}  # fmt: skip
ALLOWED = ("b:9092", "*.lab.example.com:9092")  # the other hosts the operator allows (kafka_hosts)
HOSTILE = yaml.safe_load((Path(__file__).parent / "hostile_kafka_specs.yaml").read_text())


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
    assert input_location(parse_spec(spec(bootstrap_servers="pay-2:9093")), None, CONNECTIONS, ()).connection == "pay"
    elsewhere = input_location(
        parse_spec(spec(bootstrap_servers="k1.lab.example.com:9092")), None, CONNECTIONS, ALLOWED
    )
    assert elsewhere.connection == "" and "sasl.username" not in elsewhere.client_config({})
    assert input_location(parse_spec(spec()), None, CONNECTIONS).bootstrap_servers == "kafka:9092"  # the default


def test_an_unknown_connection_is_refused_when_the_job_is_planned_naming_the_configured_ones():
    with pytest.raises(ConfigError) as unknown:
        input_location(parse_spec(spec(connection="payments")), None, CONNECTIONS)
    assert "job readings: source.kafka.connection: Kafka connection 'payments' is not configured" in str(unknown.value)
    assert "default, pay" in str(unknown.value) and "payer" not in str(unknown.value)


@pytest.mark.parametrize(
    "kafka, says",
    [
        ({"connection": "pay", "bootstrap_servers": "pay-1:9093"}, ["names both a connection and bootstrap_servers"]),
        ({"connection": "Pay Ments"}, ["source.kafka.connection 'Pay Ments' is not a connection name"]),
        (
            {"options": {"security.protocol": "SASL_SSL"}},
            ["source.kafka.options.security.protocol", "not set in a job spec", "source.kafka.connection"],
        ),
        ({"options": {"sasl.mechanism": "PLAIN"}}, ["source.kafka.options.sasl.mechanism", "not set in a job spec"]),
        ({"options": {"ssl.truststore.location": "/etc/passwd"}}, ["ssl.truststore.location", "not set in a job spec"]),
        ({"options": {"sasl.jaas.config": SECRET}}, ["sasl.jaas.config", "connection"]),
        (
            {"options": {"plugin.library.paths": "/tmp/evil.so"}},
            [
                "source.kafka.options.plugin.library.paths is not a Kafka client setting a job spec may set",
                "fetch.min.bytes",
                "ask the operator",
            ],
        ),
        ({"options": {"interceptor.classes": "x.Evil"}}, ["interceptor.classes is not a Kafka client setting"]),
        ({"options": {"partition.assignment.strategy": "x.Evil"}}, ["partition.assignment.strategy is not"]),
        ({"options": {"fetch.min.byte": "1"}}, ["fetch.min.byte is not", "did you mean fetch.min.bytes?"]),
        ({"options": {"fetch.min.bytes": "1k"}}, ["source.kafka.options.fetch.min.bytes is '1k'", "a whole number"]),
        (
            {"options": {"fetch.max.bytes": "999999999999"}},
            ["source.kafka.options.fetch.max.bytes is '999999999999', out of range", "from 1 to 67,108,864 bytes"],
        ),
        (
            {"options": {"isolation.level": "dirty"}},
            ["isolation.level is 'dirty'", "read_committed or read_uncommitted"],
        ),
        ({"options": {"client.id": "x" * 300}}, ["client.id is", "text"]),
    ],
)
def test_a_spec_may_not_set_security_credentials_code_or_paths(kafka, says):
    message = refusal(spec(**kafka))
    assert all(s in message for s in says), message
    assert SECRET not in message and "/tmp/evil.so" not in message


def number_within(bounds: Bounds) -> str:
    return str(min(max(100, bounds.low), bounds.high))


def test_every_allowed_option_reaches_both_clients_under_its_own_name():
    options = {name: ("read_committed" if name == "isolation.level" else "true" if name == "check.crcs"
                      else "tidegate" if name.startswith("client.") else number_within(allowed))
               for name, (_, allowed) in CLIENT_OPTIONS.items()}  # fmt: skip
    topic = input_location(parse_spec(spec(bootstrap_servers="b:9092", options=options)), None, {}, ALLOWED)
    spark, librdkafka = topic.spark_options({}), topic.client_config({})
    assert all(spark[f"kafka.{name}"] == value for name, value in options.items())
    assert librdkafka["fetch.wait.max.ms"] == "100" and "max.poll.records" not in librdkafka
    assert librdkafka["reconnect.backoff.ms"] == "100"  # the spec's, over the platform's shorter default
    assert spark["kafka.security.protocol"] == librdkafka["security.protocol"] == "PLAINTEXT"


def test_librdkafka_clients_open_their_first_cluster_connection_after_a_short_backoff():
    topic = input_location(parse_spec(spec(bootstrap_servers="b:9092")), None, {}, ALLOWED)
    assert topic.client_config({})["reconnect.backoff.ms"] == str(RECONNECT_BACKOFF_MS) == "10"
    assert "kafka.reconnect.backoff.ms" not in topic.spark_options({})  # the Java client's own default (50 ms)


def test_a_stored_version_with_a_refused_option_is_refused_when_the_job_is_planned():
    parsed = parse_spec(spec(bootstrap_servers="b:9092"))
    parsed.source.kafka.options["plugin.library.paths"] = "/tmp/evil.so"  # as stored before the allowlist
    with pytest.raises(ConfigError, match="job readings: source.kafka.options.plugin.library.paths is not"):
        input_location(parsed, None, CONNECTIONS)


# -- numbers: one reader, ASCII digits, bounds --------------------------------------------
# (option, the largest value it takes, its unit): fetch sizes at most 64 MiB, socket buffers 16 MiB
LARGEST = [("fetch.min.bytes", 64 << 20, "bytes"), ("fetch.max.bytes", 64 << 20, "bytes"),
           ("max.partition.fetch.bytes", 64 << 20, "bytes"), ("receive.buffer.bytes", 16 << 20, "bytes"),
           ("send.buffer.bytes", 16 << 20, "bytes"), ("fetch.max.wait.ms", 10_000, "ms"),
           ("request.timeout.ms", 300_000, "ms"), ("max.poll.records", 100_000, "records")]  # fmt: skip


@pytest.mark.parametrize("name, largest, unit", LARGEST, ids=[n for n, _, _ in LARGEST])
def test_a_numeric_option_takes_whole_numbers_up_to_its_bound_and_not_one_more(name, largest, unit):
    assert parse_spec(spec(bootstrap_servers="b:9092", options={name: largest})).source.kafka.options[name] == str(
        largest
    )
    message = refusal(spec(bootstrap_servers="b:9092", options={name: largest + 1}))
    assert f"source.kafka.options.{name} is '{largest + 1}', out of range" in message
    assert f"to {largest:,} {unit}" in message


def test_every_numeric_option_has_bounds_and_every_fetch_size_at_most_64_mib():
    numeric = {name: allowed for name, (_, allowed) in CLIENT_OPTIONS.items() if isinstance(allowed, Bounds)}
    assert len(numeric) == 15 and all(b.low >= 0 and b.high < 2**31 for b in numeric.values())
    assert all(numeric[n].high <= 64 << 20 for n in ("fetch.min.bytes", "fetch.max.bytes", "max.partition.fetch.bytes"))


@pytest.mark.parametrize("value", ["²", "١٠٠", "１００", "1²", "100١", "-1", "1e3", "0x10", "1_000", "", " ", "+5"])
def test_a_number_in_digits_other_than_ascii_or_any_other_notation_is_refused_with_a_message(value):
    message = refusal(spec(bootstrap_servers="b:9092", options={"fetch.min.bytes": value}))
    assert "source.kafka.options.fetch.min.bytes is " in message and "not a whole number" in message
    assert "with the digits 0-9" in message
    if any(c.isdigit() and not c.isascii() for c in value):
        assert "only the digits 0-9 are read" in message


def test_numbers_are_given_to_the_clients_written_plainly():
    parsed = parse_spec(
        spec(bootstrap_servers="b:9092", options={"fetch.min.bytes": " 0100 ", "request.timeout.ms": 30_000})
    )
    assert parsed.source.kafka.options == {"fetch.min.bytes": "100", "request.timeout.ms": "30000"}


# -- brokers: host:port, and only those the operator knows --------------------------------
def test_a_spec_naming_a_host_the_operator_does_not_know_is_refused_when_the_job_is_planned():
    parsed = parse_spec(spec(bootstrap_servers="169.254.169.254:80"))  # loads: the hosts are the operator's
    with pytest.raises(ConfigError) as refused:
        input_location(parsed, None, CONNECTIONS, ALLOWED)
    message = str(refused.value)
    assert message.startswith(
        "job readings: source.kafka.bootstrap_servers names '169.254.169.254:80', which is "
        "neither a broker of a Kafka connection nor an allowed Kafka host"
    )
    assert "connection: default, pay" in message and "ask the operator" in message and "payer" not in message


def test_this_processs_allowed_hosts_are_read_when_none_are_given(monkeypatch):
    parsed = parse_spec(spec(bootstrap_servers="kafka-lab:9092"))
    monkeypatch.delenv("TIDEGATE_KAFKA_HOSTS", raising=False)
    monkeypatch.delenv("TIDEGATE_CONFIG", raising=False)
    with pytest.raises(ConfigError, match="nor an allowed Kafka host"):
        input_location(parsed, None, CONNECTIONS)
    monkeypatch.setenv("TIDEGATE_KAFKA_HOSTS", "kafka-lab:9092")
    assert input_location(parsed, None, CONNECTIONS).bootstrap_servers == "kafka-lab:9092"


@pytest.mark.parametrize("case", HOSTILE, ids=[c["id"] for c in HOSTILE])
def test_a_hostile_kafka_section_is_refused_at_load_or_when_the_job_is_planned(case):
    data = spec(**case["kafka"])
    with pytest.raises(ConfigError) as refused:
        if case["refused_at"] == "load":
            parse_spec(data)
        else:
            input_location(parse_spec(data), None, CONNECTIONS, ALLOWED)
    message = str(refused.value)
    assert all(s in message for s in case["says"]), message
    assert len(message.encode()) < 2048 and "payer" not in message and SECRET not in message


def test_the_hostile_corpus_holds_cases_of_each_kind():
    kinds = {c["refused_at"] for c in HOSTILE}
    assert kinds == {"load", "start"} and len(HOSTILE) >= 30 and len({c["id"] for c in HOSTILE}) == len(HOSTILE)


def test_a_spec_names_the_jvm_reader_and_its_choice_is_kept_but_changes_no_fingerprint():
    for reader in ("consumer", "wire"):
        parsed = parse_spec(spec(bootstrap_servers="b:9092", reader=reader))
        assert parsed.source.kafka.reader == reader and parse_spec(parsed.to_dict()) == parsed
        assert parsed.fingerprint == parse_spec(spec(bootstrap_servers="b:9092")).fingerprint  # the same rows
        assert input_location(parsed, None, CONNECTIONS, ALLOWED).reader == reader
    assert "reader" not in parse_spec(spec()).to_dict()["source"]["kafka"]  # stored as before when not named


def test_without_a_reader_the_wire_reads_plaintext_leaders_and_the_consumer_everything_else():
    plain = input_location(parse_spec(spec(bootstrap_servers="b:9092")), None, CONNECTIONS, ALLOWED)
    assert plain.reader == "" and plain.jvm_reader({}) == "wire"
    assert jvm_reader("", "SASL_SSL", {}, "t") == jvm_reader("", "SSL", {}, "t") == "consumer"
    assert jvm_reader("", "PLAINTEXT", {"client.rack": "eu-1a"}, "t") == "consumer"  # follower fetching
    assert jvm_reader("consumer", "PLAINTEXT", {}, "t") == "consumer"


@pytest.mark.parametrize(
    "kafka, says",
    [
        ({"reader": "fast"}, ["source.kafka.reader is 'fast'", "use consumer", "or wire (plaintext listeners only)"]),
        ({"reader": ["wire"]}, ["source.kafka.reader is"]),
        (
            {"reader": "wire", "options": {"client.rack": "eu-1a"}},
            ["reader wire does not fetch from followers", "remove client.rack, or use reader: consumer"],
        ),
    ],
)
def test_a_reader_the_platform_has_not_or_cannot_use_is_refused_at_load(kafka, says):
    message = refusal(spec(**kafka))
    assert all(s in message for s in says), message


def test_the_wire_reader_on_a_connection_with_security_is_refused_when_the_job_is_planned():
    with pytest.raises(ConfigError) as refused:
        input_location(parse_spec(spec(connection="pay", reader="wire")), None, CONNECTIONS)
    message = str(refused.value)
    assert "job readings: source.kafka: source.kafka.reader is wire, but the topic's connection speaks SASL_SSL" in (
        message
    )
    assert "use reader: consumer" in message and "payer" not in message
