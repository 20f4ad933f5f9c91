"""Kafka credentials are bound to the brokers of the operator's connection: a spec names a
connection or its brokers, or allowed hosts that get no credentials; a password never shows.
No broker needed."""

from __future__ import annotations

import pytest
import yaml

from tidegate.errors import ConfigError
from tidegate.inputs.kafka.client import KafkaTopic
from tidegate.inputs.kafka.connections import (
    HOSTS_ENV,
    KafkaConnection,
    brokers,
    host_allowed,
    load_allowed_hosts,
    load_connections,
    resolve,
)

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
    assert (default.security_protocol, default.sasl_mechanism, default.sasl_username) == (
        "SASL_SSL",
        "PLAIN",
        "tidegate",
    )
    assert default.password(SASL_ENV) == SECRET
    assert load_connections({}) == {}
    plain = load_connections({"TIDEGATE_KAFKA_BOOTSTRAP": "kafka:9092"})["default"]
    assert plain.security_protocol == "PLAINTEXT" and not plain.sasl


def test_a_spec_without_connection_or_brokers_reads_the_default_connection():
    connections = load_connections(SASL_ENV)
    assert resolve("", "", connections, "source.kafka") == (
        SASL_ENV["TIDEGATE_KAFKA_BOOTSTRAP"],
        connections["default"],
    )
    with pytest.raises(ConfigError, match="names neither a connection nor brokers"):
        resolve("", "", {}, "source.kafka")


def test_brokers_of_one_connection_get_its_credentials_and_other_brokers_none():
    connections = load_connections(SASL_ENV)
    assert resolve("", "kafka-2:9093", connections, "w")[1].name == "default"  # one of its brokers
    assert resolve("", "KAFKA-1:9093,kafka-2:9093", connections, "w")[1].name == "default"  # case, spaces
    allowed = ("evil.example:9093", "kafka-1:9092")  # as the operator allows them
    assert resolve("", "evil.example:9093", connections, "w", allowed) == ("evil.example:9093", None)
    assert resolve("", "kafka-1:9092", connections, "w", allowed)[1] is None  # another port is another listener
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
        "SASL_SSL",
        "PLAIN",
        "tidegate",
    )
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


@pytest.mark.parametrize(
    "settings, says",
    [
        ({"bootstrap_servers": "k:1", "security_protocol": "SASL_SSL"}, "has no user"),
        ({"bootstrap_servers": "k:1", "security_protocol": "PLAINTEXT", "sasl_username": "u"}, "would never send them"),
        ({"bootstrap_servers": "k:1", "security_protocol": "SASL-SSL"}, "security_protocol 'SASL-SSL' is unknown"),
        ({"bootstrap_servers": "k:1", "sasl_username": "u", "sasl_mechanism": "GSSAPI"}, "'GSSAPI' is not supported"),
        ({"bootstrap_servers": ""}, "names no brokers"),
        ({"bootstrap_servers": "k:1", "sasl_password": SECRET}, "a password never goes in this file"),
        ({"bootstrap_servers": "k:1", "sasl_password_env": "A", "sasl_password_file": "/b"}, "both"),
        ({"bootstrap_servers": "k:1", "ssl_ca_file": "/etc/ca.pem"}, "names ssl_ca_file but security protocol PLAIN"),
    ],
)
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


# -- the hosts a spec may name besides the connections' brokers ------------------------------
@pytest.mark.parametrize(
    "servers",
    [
        "169.254.169.254:80",  # a cloud metadata service
        "127.0.0.1:5432",  # an internal port
        "kafka-1:9092",  # a connection's host on another port: another listener
        "kafka-1.evil.example:9093",  # a connection's name as a prefix of another
        "LOCALHOST:22",
        "[::1]:9092",
        "lab-kafka.example.com",  # no port: Kafka's 9092, not allowed either
    ],
)
def test_brokers_of_no_connection_are_refused_unless_the_operator_allows_their_host(servers):
    connections = load_connections(SASL_ENV)
    with pytest.raises(ConfigError) as refused:
        resolve("", servers, connections, "job readings: source.kafka", ("*.lab.example.com:9092",))
    message = str(refused.value)
    assert message.startswith("job readings: source.kafka.bootstrap_servers names ")
    assert "neither a broker of a Kafka connection nor an allowed Kafka host" in message
    assert "connection: default" in message and "kafka_hosts" in message and HOSTS_ENV in message
    assert "ask the operator" in message and SECRET not in message and "tidegate" not in message  # nor its user
    assert "lab.example.com" not in message  # the allowed hosts are the operator's, not shown to a spec's author
    assert len(message.encode()) < 2048


def test_a_spec_reaches_a_host_the_operator_allowed_by_name_domain_or_any_port():
    allowed = load_allowed_hosts(
        {HOSTS_ENV: " Lab-Kafka.example.com:9092, *.streams.example.com:9092,10.0.0.5:*,[::1]:9092"}
    )
    assert allowed == ("lab-kafka.example.com:9092", "*.streams.example.com:9092", "10.0.0.5:*", "[::1]:9092")
    for servers in ("lab-kafka.example.com:9092", "LAB-KAFKA.example.com",
                    "a.streams.example.com:9092,b.streams.example.com:9092",
                    "10.0.0.5:19092", "[::1]:9092"):  # fmt: skip
        assert resolve("", servers, {}, "w", allowed) == (servers, None), servers
    for broker in ("streams.example.com:9092", "x.streams.example.com:9093", "x.streams.example.com.evil:9092",
                   "10.0.0.50:9092", "lab-kafka.example.com:19092"):  # fmt: skip
        assert not host_allowed(broker, allowed), broker
    with pytest.raises(ConfigError, match="'10.0.0.6:9092' .and 1 more."):
        resolve("", "10.0.0.6:9092,lab-kafka.example.com:9092,10.0.0.7:9092", {}, "w", allowed)


def test_the_allowed_hosts_come_from_the_config_file_or_the_variable_which_replaces_it(config_file, tmp_path):
    env = config_file({}, kafka_hosts=["kafka-lab:9092", "*.lab.example.com:*"])
    assert load_allowed_hosts(env) == ("kafka-lab:9092", "*.lab.example.com:*")
    assert load_allowed_hosts(env | {HOSTS_ENV: "other:9092"}) == ("other:9092",)
    assert load_allowed_hosts({}) == ()  # by default: the connections' brokers only
    from tidegate.runtime.jobs.config import load_config

    config = load_config(env, cwd=tmp_path)
    assert config.kafka_hosts == ("kafka-lab:9092", "*.lab.example.com:*")
    assert config.driver_environment({})[HOSTS_ENV] == "kafka-lab:9092,*.lab.example.com:*"  # drivers check them too


@pytest.mark.parametrize(
    "pattern",
    [
        "*",
        "*:9092",
        "kafka:*:*",
        "kafka",
        "kafka:99999",
        "kafka:0",
        "a*.b:9092",
        "kafka:９０９２",
        "http://kafka:9092",
        "kafka:9092/x",
    ],
)
def test_a_host_pattern_that_is_not_host_port_is_refused_when_the_platform_loads(pattern, config_file):
    with pytest.raises(ConfigError) as refused:
        load_allowed_hosts({HOSTS_ENV: pattern})
    assert f"{HOSTS_ENV}: " in str(refused.value) and "is not a host:port pattern" in str(refused.value)
    with pytest.raises(ConfigError, match="config kafka_hosts: "):
        load_allowed_hosts(config_file({}, kafka_hosts=[pattern]))


# A version stored before specs' brokers were checked when they load reaches resolve() as it was
# written: what is not plainly host:port matches no allowed host, however it ends.
@pytest.mark.parametrize(
    "servers",
    [
        "plaintext://evil.example:9092/x.lab.example.com",  # librdkafka: protocol, then evil.example:9092
        "evil.example:9092:x.lab.example.com",
        "user@x.lab.example.com:9092",
        "evil.example/x.lab.example.com:9092",
        "x.lab.example.com:09092",
        "x.lab.example.com:99999",
    ],
)
def test_brokers_not_written_as_host_port_match_no_allowed_host(servers):
    with pytest.raises(ConfigError, match="neither a broker of a Kafka connection nor an allowed Kafka host"):
        resolve("", servers, {}, "w", ("*.lab.example.com:*",))


def test_a_bootstrap_list_of_no_broker_gets_no_connections_credentials():
    pay = {"pay": KafkaConnection("pay", "pay-1:9093", "SASL_SSL", sasl_username="payer")}
    with pytest.raises(ConfigError, match=r"w.bootstrap_servers names no broker"):
        resolve("", " , ", pay, "w", ("*.lab.example.com:9092",))


def test_a_tls_connection_gives_its_ca_file_to_both_clients_and_refuses_one_that_is_not_a_certificate(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    env = {"TIDEGATE_KAFKA_BOOTSTRAP": "k:9093", "TIDEGATE_KAFKA_SECURITY_PROTOCOL": "SSL",
           "TIDEGATE_KAFKA_SSL_CA_FILE": str(ca)}  # fmt: skip
    topic = KafkaTopic("k:9093", "t")
    assert topic.client_config(env)["ssl.ca.location"] == str(ca)
    assert topic.spark_options(env)["kafka.ssl.truststore.location"] == str(ca)
    assert "ssl.ca.location" not in topic.client_config(env | {"TIDEGATE_KAFKA_SSL_CA_FILE": ""})  # the system's CAs
    for content, says in ((None, "cannot be read"), ("not a certificate", "holds no PEM certificate")):
        bad = tmp_path / f"bad-{says[:6]}.pem"
        if content is not None:
            bad.write_text(content)
        with pytest.raises(ConfigError) as refused:
            topic.client_config(env | {"TIDEGATE_KAFKA_SSL_CA_FILE": str(bad)})
        assert f"ssl_ca_file {str(bad)!r} {says}" in str(refused.value)
