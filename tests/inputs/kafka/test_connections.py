"""Kafka credentials are bound to the brokers of the operator's connection: a spec names a
connection or its brokers, or gets no credentials; a password never shows. No broker needed."""

from __future__ import annotations

import pytest
import yaml

from tidegate.errors import ConfigError
from tidegate.inputs.kafka.client import KafkaTopic
from tidegate.inputs.kafka.connections import KafkaConnection, brokers, load_connections, resolve

SECRET = "s3cr3t-Pa55"
SASL_ENV = {"TIDEGATE_KAFKA_BOOTSTRAP": "Kafka-1:9093, kafka-2:9093", "TIDEGATE_KAFKA_SASL_USERNAME": "tidegate",
            "TIDEGATE_KAFKA_SASL_PASSWORD": SECRET}  # fmt: skip


@pytest.fixture
def config_file(tmp_path):
    def write(connections: dict, **top) -> dict[str, str]:
        path = tmp_path / "tidegate.yaml"
        path.write_text(yaml.safe_dump({"kafka_connections": connections, **top}))
        return {"TIDEGATE_CONFIG": str(path)}

    return write


def test_the_single_cluster_variables_are_the_connection_default_bound_to_their_brokers():
    default = load_connections(SASL_ENV)["default"]
    assert default.brokers == {"kafka-1:9093", "kafka-2:9093"}
    assert (default.security_protocol, default.sasl_mechanism, default.sasl_username) == ("SASL_SSL", "PLAIN", "tidegate")
    assert default.password(SASL_ENV) == SECRET
    assert load_connections({}) == {}
    plain = load_connections({"TIDEGATE_KAFKA_BOOTSTRAP": "kafka:9092"})["default"]
    assert plain.security_protocol == "PLAINTEXT" and not plain.sasl


def test_a_spec_without_connection_or_brokers_reads_the_default_connection():
    connections = load_connections(SASL_ENV)
    assert resolve("", "", connections, "source.kafka") == (SASL_ENV["TIDEGATE_KAFKA_BOOTSTRAP"], connections["default"])
    with pytest.raises(ConfigError, match="names neither a connection nor brokers"):
        resolve("", "", {}, "source.kafka")


def test_brokers_of_one_connection_get_its_credentials_and_other_brokers_none():
    connections = load_connections(SASL_ENV)
    assert resolve("", "kafka-2:9093", connections, "w")[1].name == "default"  # one of its brokers
    assert resolve("", "KAFKA-1:9093,kafka-2:9093", connections, "w")[1].name == "default"  # case, spaces
    assert resolve("", "evil.example:9093", connections, "w") == ("evil.example:9093", None)
    assert resolve("", "kafka-1:9092", connections, "w")[1] is None  # another port is another listener
    assert brokers("a,b:1") == {"a:9092", "b:1"}  # Kafka's default port written out


def test_brokers_mixing_a_connections_with_others_or_shared_by_two_connections_are_refused(config_file):
    env = config_file({"pay": {"bootstrap_servers": "kafka-1:9093"}}) | SASL_ENV
    connections = load_connections(env)
    with pytest.raises(ConfigError) as mixed:
        resolve("", "kafka-2:9093,evil.example:9093", connections, "source.kafka")
    assert "mix brokers of Kafka connection 'default'" in str(mixed.value) and "connection: default" in str(mixed.value)
    with pytest.raises(ConfigError) as shared:
        resolve("", "kafka-1:9093", connections, "source.kafka")
    assert "several Kafka connections (default, pay)" in str(shared.value) and "connection:" in str(shared.value)
    assert resolve("pay", "", connections, "source.kafka") == ("kafka-1:9093", connections["pay"])


def test_an_unknown_connection_is_refused_naming_the_configured_ones_and_no_secret(config_file, tmp_path):
    secret_file = tmp_path / "pw"
    secret_file.write_text(SECRET + "\n")
    env = config_file({"pay": {"bootstrap_servers": "pay:9093", "sasl_username": "payer",
                               "sasl_password_file": str(secret_file)}}) | SASL_ENV  # fmt: skip
    connections = load_connections(env)
    assert connections["pay"].password(env) == SECRET and connections["pay"].security_protocol == "SASL_SSL"
    with pytest.raises(ConfigError) as unknown:
        resolve("payments", "", connections, "source.kafka")
    message = str(unknown.value)
    assert "source.kafka.connection: Kafka connection 'payments' is not configured" in message
    assert "default, pay" in message and SECRET not in message and "payer" not in message


def test_a_connection_shows_no_credentials_in_repr_errors_or_a_topics_options(config_file, tmp_path):
    env = config_file({"pay": {"bootstrap_servers": "pay:9093", "sasl_username": "payer",
                               "sasl_password_file": str(tmp_path / "missing")}}) | SASL_ENV  # fmt: skip
    connections = load_connections(env)
    for conn in connections.values():
        assert SECRET not in repr(conn) and "tidegate" not in repr(conn) and "payer" not in repr(conn)
    with pytest.raises(ConfigError) as unreadable:
        connections["pay"].password(env)
    assert "password file" in str(unreadable.value) and "missing" in str(unreadable.value)
    with pytest.raises(ConfigError) as unset:
        connections["default"].password({})
    assert "TIDEGATE_KAFKA_SASL_PASSWORD is not set" in str(unset.value)
    topic = KafkaTopic("kafka-1:9093", "t", connection="default")
    assert SECRET not in repr(topic) + str(topic.source_options()) + str(connections)
    assert SECRET in topic.client_config(env)["sasl.password"]  # only where a client connects


def test_credentials_go_only_to_their_connections_brokers_in_every_client():
    on_cluster = KafkaTopic("kafka-1:9093", "t")
    config = on_cluster.client_config(SASL_ENV)
    assert (config["security.protocol"], config["sasl.mechanisms"], config["sasl.username"]) == (
        "SASL_SSL", "PLAIN", "tidegate")
    assert on_cluster.spark_options(SASL_ENV)["kafka.security.protocol"] == "SASL_SSL"
    elsewhere = KafkaTopic("evil.example:9093", "t")
    for options in (elsewhere.client_config(SASL_ENV), elsewhere.spark_options(SASL_ENV)):
        assert SECRET not in str(options) and "tidegate" not in str(options)
        assert "PLAINTEXT" in options.values()
    # a topic naming a connection but brokers outside it is refused before anything is sent
    with pytest.raises(ConfigError, match="brokers outside connection 'default'"):
        KafkaTopic("evil.example:9093", "t", connection="default").client_config(SASL_ENV)
    # a name this process has no connection for (configured where the job was planned only): the brokers decide
    assert KafkaTopic("kafka-1:9093", "t", connection="nope").credentials(SASL_ENV).name == "default"
    assert KafkaTopic("evil.example:9093", "t", connection="nope").credentials(SASL_ENV) is None


def test_a_topic_carries_its_connection_name_through_the_source_options():
    topic = KafkaTopic("kafka-1:9093", "t", {"fetch.min.bytes": "1"}, connection="default")
    assert KafkaTopic.from_source_options(topic.source_options()) == topic


@pytest.mark.parametrize("settings, says", [
    ({"bootstrap_servers": "k:1", "security_protocol": "SASL_SSL"}, "has no user"),
    ({"bootstrap_servers": "k:1", "security_protocol": "PLAINTEXT", "sasl_username": "u"}, "would never send them"),
    ({"bootstrap_servers": "k:1", "security_protocol": "SASL-SSL"}, "security_protocol 'SASL-SSL' is unknown"),
    ({"bootstrap_servers": "k:1", "sasl_username": "u", "sasl_mechanism": "GSSAPI"}, "'GSSAPI' is not supported"),
    ({"bootstrap_servers": ""}, "names no brokers"),
    ({"bootstrap_servers": "k:1", "sasl_password": SECRET}, "a password never goes in this file"),
    ({"bootstrap_servers": "k:1", "sasl_password_env": "A", "sasl_password_file": "/b"}, "both"),
])
def test_a_misconfigured_connection_is_refused_when_the_platform_loads(config_file, settings, says):
    with pytest.raises(ConfigError) as refused:
        load_connections(config_file({"pay": settings}))
    assert says in str(refused.value) and SECRET not in str(refused.value)


def test_the_platform_config_carries_the_connections_and_accepts_their_section(config_file, tmp_path):
    from tidegate.runtime.jobs.config import load_config

    env = config_file({"pay": {"bootstrap_servers": "pay:9093"}}, kafka_bootstrap="kafka:9092")
    config = load_config(env, cwd=tmp_path)
    assert sorted(config.kafka_connections) == ["default", "pay"]
    assert config.kafka_connections["default"].bootstrap_servers == "kafka:9092"
    with pytest.raises(ConfigError, match="not a plain name"):
        load_config(config_file({"Pay!": {"bootstrap_servers": "pay:9093"}}), cwd=tmp_path)
