"""Where a topic lives and how a client reaches it, and the errors that name both.

A :class:`KafkaTopic` is what a job spec's ``source.kafka`` names: bootstrap servers, a
topic and client settings (Kafka's own names, as Spark's connector takes them after
``kafka.``). Credentials never live in a spec: ``TIDEGATE_KAFKA_SASL_USERNAME`` and
``TIDEGATE_KAFKA_SASL_PASSWORD`` are read from the environment of the process that
connects, so they never reach a job version, a run row, a log or the UI.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping

from tidegate.errors import ConfigError, TidegateError

SASL_USERNAME_ENV = "TIDEGATE_KAFKA_SASL_USERNAME"
SASL_PASSWORD_ENV = "TIDEGATE_KAFKA_SASL_PASSWORD"
TIMEOUT_S = 10.0  # a broker that does not answer within this is reported, not waited for
READ_STALL_S = 6 * TIMEOUT_S  # a read of a planned range that gets no record for this long fails, saying so
# settings that hold secrets: refused in specs (they would be stored with the job's version)
SECRET_SETTINGS = ("sasl.jaas.config", "sasl.password", "ssl.key.password", "ssl.keystore.password",
                   "ssl.truststore.password")  # fmt: skip


class KafkaLogError(TidegateError):
    """A Kafka topic cannot be read as asked: broker down, topic missing or of the wrong kind."""


@dataclass(frozen=True)
class KafkaTopic:
    """A topic and how to reach it; ``settings`` are Kafka client settings (Java names)."""

    bootstrap_servers: str
    topic: str
    settings: Mapping[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"topic {self.topic!r} on {self.bootstrap_servers}"

    def client_config(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """librdkafka settings (confluent-kafka) for this topic's cluster, credentials from ``env``."""
        config = {"bootstrap.servers": self.bootstrap_servers, "socket.timeout.ms": str(int(TIMEOUT_S * 1000)),
                  "log_level": "0"}  # fmt: skip: failures reach callers as errors
        for key, value in self.settings.items():
            config["sasl.mechanisms" if key == "sasl.mechanism" else key] = str(value)
        user, password = _credentials(env)
        if user is not None:
            config["sasl.username"], config["sasl.password"] = user, password
        return config

    def spark_options(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """Options of Spark's Kafka connector (``kafka.``-prefixed client settings) for this topic."""
        options = {"kafka.bootstrap.servers": self.bootstrap_servers}
        options |= {f"kafka.{k}": str(v) for k, v in self.settings.items()}
        user, password = _credentials(env)
        if user is not None:
            mechanism = str(self.settings.get("sasl.mechanism", "PLAIN")).upper()
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
                      else "org.apache.kafka.common.security.scram.ScramLoginModule")  # fmt: skip
            options["kafka.sasl.jaas.config"] = f'{module} required username="{_jaas(user)}" password="{_jaas(password)}";'
        return options

    def source_options(self) -> dict[str, str]:
        """Options of the ``tidegate`` source reading this topic (no credentials: see the module)."""
        return {"kafka.bootstrap.servers": self.bootstrap_servers, "topic": self.topic} | {
            f"kafka.{k}": str(v) for k, v in self.settings.items()
        }

    @classmethod
    def from_source_options(cls, options: Mapping[str, str]) -> KafkaTopic:
        """The inverse of :meth:`source_options` (option names compared case-insensitively)."""
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        settings = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.") and k != "kafka.bootstrap.servers"}
        return cls(opts["kafka.bootstrap.servers"], opts["topic"], settings)

    def error(self, problem: str, fix: str) -> KafkaLogError:
        return KafkaLogError(f"Kafka {self}: {problem}", fix)


def check_no_secrets(settings: Mapping[str, str], where: str) -> None:
    """Refuse secrets in settings that are stored (job specs): they belong in the environment."""
    found = sorted(k for k in settings if k.lower() in SECRET_SETTINGS)
    if found:
        raise ConfigError(
            f"{where} holds {', '.join(found)}: a secret would be stored with the job's version",
            f"remove it and set {SASL_USERNAME_ENV} / {SASL_PASSWORD_ENV} in the environment of the drivers "
            "(or the Airflow connection tidegate_default's extra); keep security.protocol and sasl.mechanism in the spec",
        )


def _credentials(env: Mapping[str, str] | None) -> tuple[str | None, str | None]:
    env = os.environ if env is None else env
    user = env.get(SASL_USERNAME_ENV)
    return (user, env.get(SASL_PASSWORD_ENV, "")) if user else (None, None)


def _jaas(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
