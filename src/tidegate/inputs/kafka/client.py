"""Where a topic lives and how a client reaches it, and the errors that name both.

A :class:`KafkaTopic` is what a job spec's ``source.kafka`` names: bootstrap servers, a
topic, client settings (Kafka's own names, as Spark's connector takes them after
``kafka.``) and the operator's connection whose credentials go with those brokers
(:mod:`tidegate.inputs.kafka.connections`). Credentials never live in a spec nor in a topic: the
connection's password is read from the environment (or its file) of the process that
connects, so it never reaches a job version, a run row, a log or the UI.

A spec may set only the client settings of :data:`CLIENT_OPTIONS`: sizes, timeouts and
labels that carry no code, no path and no credential. Security settings are the
connection's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from tidegate.errors import ConfigError, TidegateError
from tidegate.inputs.kafka.connections import (
    SASL_PASSWORD_ENV,
    SASL_USERNAME_ENV,
    KafkaConnection,
    brokers,
    for_brokers,
    load_connections,
)
from tidegate.jobspec.source import CLIENT_OPTIONS, READERS, check_options

__all__ = ["CLIENT_OPTIONS", "SASL_PASSWORD_ENV", "SASL_USERNAME_ENV", "KafkaLogError", "KafkaTopic", "check_options"]

TIMEOUT_S = 10.0  # a broker that does not answer within this is reported, not waited for
READ_STALL_S = 6 * TIMEOUT_S  # a read of a planned range that gets no record for this long fails, saying so
# A new librdkafka client drops its bootstrap connection once the metadata names the broker, and then
# opens no cluster connection for half of reconnect.backoff.ms (default 100): 50 ms of every new client's
# first request, paid each time a job, a check or a command opens its topic. Failed connections still back
# off, doubling up to reconnect.backoff.max.ms.
RECONNECT_BACKOFF_MS = 10


class KafkaLogError(TidegateError):
    """A Kafka topic cannot be read as asked: broker down, topic missing or of the wrong kind."""


@dataclass(frozen=True)
class KafkaTopic:
    """A topic and how to reach it; ``settings`` are Kafka client settings (Java names, only
    those of :data:`CLIENT_OPTIONS`); ``connection`` names the operator's connection whose
    credentials go with these brokers ("": the one they all belong to, if any)."""

    bootstrap_servers: str
    topic: str
    settings: Mapping[str, str] = field(default_factory=dict)
    connection: str = ""
    reader: str = ""  # the spec's source.kafka.reader (READERS); "": see jvm_reader

    def __post_init__(self) -> None:
        check_options(self.settings, f"Kafka {self}: settings")
        if self.reader and self.reader not in READERS:
            raise self.error(f"reader {self.reader[:40]!r} is unknown", "use " + " or ".join(READERS))

    def jvm_reader(self, env: Mapping[str, str] | None = None) -> str:
        """How executors read this topic on the JVM, with this process's connection for it
        (:func:`jvm_reader`)."""
        conn = self.credentials(env)
        return jvm_reader(self.reader, conn.security_protocol if conn else "PLAINTEXT", self.settings, f"Kafka {self}")

    def __str__(self) -> str:
        return f"topic {self.topic!r} on {self.bootstrap_servers}"

    def describe(self) -> str:
        """One line for run rows and messages: where the topic is, never credentials."""
        via = f" (connection {self.connection})" if self.connection else ""
        return f"kafka://{self.bootstrap_servers}/{self.topic}{via}"

    def credentials(self, env: Mapping[str, str] | None = None) -> KafkaConnection | None:
        """The connection whose security settings and credentials this process uses for the
        topic's brokers: the named one, which must hold every broker; else (no name, or a name
        this process has no connection for) the one holding them all; else none (plaintext,
        no credentials)."""
        env = os.environ if env is None else env
        connections = load_connections(env)
        if not self.connection:
            return for_brokers(self.bootstrap_servers, connections, f"Kafka {self}: source.kafka")
        conn = connections.get(self.connection)
        if conn is None:  # the name was checked where the job was planned (an Airflow connection's extra may
            # configure it there only): here the brokers decide, as for a topic naming no connection
            return for_brokers(self.bootstrap_servers, connections, f"Kafka {self}: source.kafka")
        if not brokers(self.bootstrap_servers) <= conn.brokers:
            raise ConfigError(f"Kafka {self}: brokers outside connection {conn.name!r} would get its credentials",
                              f"name only its brokers ({conn.bootstrap_servers}), or no connection")  # fmt: skip
        return conn

    def client_config(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """librdkafka settings (confluent-kafka) for this topic's cluster, credentials from ``env``."""
        config = {
            "bootstrap.servers": self.bootstrap_servers,
            "socket.timeout.ms": str(int(TIMEOUT_S * 1000)),
            "log_level": "0",  # failures reach callers as errors
            "reconnect.backoff.ms": str(RECONNECT_BACKOFF_MS),
        }  # fmt: skip: a spec's setting comes after
        for key, value in self.settings.items():
            native = CLIENT_OPTIONS[key.lower()][0]
            if native is not None:  # Java-only settings (max.poll.records…) have no librdkafka twin
                config[native] = str(value)
        conn = self.credentials(env)
        config["security.protocol"] = conn.security_protocol if conn else "PLAINTEXT"
        ca = conn.ca_file() if conn is not None and conn.tls else None
        if ca is not None:
            config["ssl.ca.location"] = ca
        if conn is not None and conn.sasl:
            config["sasl.mechanisms"] = conn.sasl_mechanism
            assert conn.sasl_username is not None  # KafkaConnection refuses SASL without a user
            config["sasl.username"], config["sasl.password"] = conn.sasl_username, conn.password(env)
        return config

    def spark_options(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """Options of Spark's Kafka connector (``kafka.``-prefixed client settings) for this topic."""
        options = {"kafka.bootstrap.servers": self.bootstrap_servers}
        options |= {f"kafka.{k}": str(v) for k, v in self.settings.items()}
        conn = self.credentials(env)
        options["kafka.security.protocol"] = conn.security_protocol if conn else "PLAINTEXT"
        ca = conn.ca_file() if conn is not None and conn.tls else None
        if ca is not None:  # Kafka's Java client reads a PEM trust store as it is (KIP-651)
            options["kafka.ssl.truststore.type"], options["kafka.ssl.truststore.location"] = "PEM", ca
        if conn is not None and conn.sasl:
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if conn.sasl_mechanism == "PLAIN"
                      else "org.apache.kafka.common.security.scram.ScramLoginModule")  # fmt: skip
            user, password = conn.sasl_username or "", conn.password(env)
            options["kafka.sasl.mechanism"] = conn.sasl_mechanism
            options["kafka.sasl.jaas.config"] = (
                f'{module} required username="{_jaas(user)}" password="{_jaas(password)}";'
            )
        return options

    def source_options(self) -> dict[str, str]:
        """Options of the ``tidegate`` source reading this topic (no credentials: see the module)."""
        options = {"kafka.bootstrap.servers": self.bootstrap_servers, "topic": self.topic}
        if self.connection:
            options["connection"] = self.connection
        if self.reader:
            options["kafkaReader"] = self.reader
        return options | {f"kafka.{k}": str(v) for k, v in self.settings.items()}

    @classmethod
    def from_source_options(cls, options: Mapping[str, str]) -> KafkaTopic:
        """The inverse of :meth:`source_options` (option names compared case-insensitively)."""
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        settings = {
            k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.") and k != "kafka.bootstrap.servers"
        }
        connection, reader = opts.get("connection", ""), opts.get("kafkareader", "")
        return cls(opts["kafka.bootstrap.servers"], opts["topic"], settings, connection, reader)

    def error(self, problem: str, fix: str) -> KafkaLogError:
        return KafkaLogError(f"Kafka {self}: {problem}", fix)


def jvm_reader(reader: str, protocol: str, settings: Mapping[str, str], where: str) -> str:
    """The JVM reader of a topic whose listener speaks ``protocol``: the spec's ``reader``, or,
    when it names none, Kafka's wire protocol where it can read (plaintext, no follower
    fetching: ``client.rack``) and Kafka's consumer elsewhere. ``reader: wire`` where the wire
    cannot read is refused, saying why."""
    rack = any(k.lower() == "client.rack" for k in settings)
    if reader == "wire" and (protocol != "PLAINTEXT" or rack):
        why = "the spec fetches from followers (client.rack)" if rack else f"the topic's connection speaks {protocol}"
        raise ConfigError(
            f"{where}: source.kafka.reader is wire, but {why}; the wire reader reads plaintext "
            "listeners from the partition's leader only",
            "use reader: consumer, or remove reader (the consumer is then chosen)",
        )
    return reader or ("consumer" if protocol != "PLAINTEXT" or rack else "wire")


def _jaas(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
