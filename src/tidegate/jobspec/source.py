"""Where a job's events come from: the event log or a Kafka topic, what one event may be,
and what an input that reads its own log has of its own — frozen dataclasses.

:mod:`tidegate.jobspec.parse_events` builds them; :class:`~tidegate.jobspec.model.JobSpec`
holds the job's :class:`SourceSpec` and :class:`~tidegate.jobspec.joins.InputSpec` an
input's :class:`InputSource`. Nothing in this module reads YAML.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_duration
from tidegate.eventtime.policy import TimePolicy

def tidegate_home(env: Mapping[str, str] | None = None) -> Path:
    """``$TIDEGATE_HOME``, default ``var`` (relative to the working directory)."""
    return Path((os.environ if env is None else env).get("TIDEGATE_HOME") or "var")


@dataclass(frozen=True)
class KafkaSpec:
    bootstrap_servers: str  # "": the connection's brokers (none named: the default connection's)
    topic: str
    options: dict[str, str] = field(default_factory=dict)  # passed to Spark as kafka.<name>
    connection: str = ""  # the operator's connection (tidegate.inputs.kafka.connections) whose brokers are read

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"connection": self.connection} if self.connection else {}
        return out | {"bootstrap_servers": self.bootstrap_servers, "topic": self.topic, "options": dict(self.options)}


# The Kafka client settings a spec may set (Java names, as Spark's connector and the JVM reader
# take them): name -> (librdkafka's name for confluent-kafka, or None where it has none; the
# values allowed). Everything else is refused: class names (code), paths, credentials, security
# — those are the operator's connection's (tidegate.inputs.kafka.connections).
_INT, _BOOL = "a whole number up to 2147483647", "true or false"
# The client settings a spec may set (Java names, as Spark's connector and the JVM reader take
# them): name -> (librdkafka's name for confluent-kafka, or None where it has none; the values
# allowed). Everything else is refused: class names (code), paths, credentials, security.
CLIENT_OPTIONS: dict[str, tuple[str | None, str | tuple[str, ...]]] = {
    "client.id": ("client.id", "text"),
    "client.rack": ("client.rack", "text"),
    "fetch.min.bytes": ("fetch.min.bytes", _INT),
    "fetch.max.bytes": ("fetch.max.bytes", _INT),
    "max.partition.fetch.bytes": ("max.partition.fetch.bytes", _INT),
    "fetch.max.wait.ms": ("fetch.wait.max.ms", _INT),
    "max.poll.records": (None, _INT),
    "receive.buffer.bytes": ("socket.receive.buffer.bytes", _INT),
    "send.buffer.bytes": ("socket.send.buffer.bytes", _INT),
    "request.timeout.ms": (None, _INT),
    "default.api.timeout.ms": (None, _INT),
    "socket.connection.setup.timeout.ms": ("socket.connection.setup.timeout.ms", _INT),
    "connections.max.idle.ms": ("connections.max.idle.ms", _INT),
    "metadata.max.age.ms": ("metadata.max.age.ms", _INT),
    "reconnect.backoff.ms": ("reconnect.backoff.ms", _INT),
    "reconnect.backoff.max.ms": ("reconnect.backoff.max.ms", _INT),
    "retry.backoff.ms": ("retry.backoff.ms", _INT),
    "isolation.level": ("isolation.level", ("read_committed", "read_uncommitted")),
    "check.crcs": ("check.crcs", ("true", "false")),
}
_SECURITY_PREFIXES = ("security.", "sasl.", "ssl.")
_TEXT_LIMIT = 255


def check_options(options: Mapping[str, str], where: str) -> None:
    """Refuse a client setting outside :data:`CLIENT_OPTIONS`, or a value it cannot take;
    the error names the setting and what to do (never a value that might be a secret)."""
    for key, value in options.items():
        name = str(key)
        lower = name.lower()
        if lower.startswith(_SECURITY_PREFIXES) or "jaas" in lower or "password" in lower:
            raise ConfigError(
                f"{where}.{name}: security settings and credentials are not set in a job spec",
                "remove it: the platform's Kafka connection sets them — name it with source.kafka.connection "
                "(the operator configures connections: kafka_connections in $TIDEGATE_CONFIG, or "
                "TIDEGATE_KAFKA_BOOTSTRAP, _SECURITY_PROTOCOL, _SASL_* for 'default')",
            )
        if lower not in CLIENT_OPTIONS:
            hint = next(iter(difflib.get_close_matches(lower, list(CLIENT_OPTIONS), n=1, cutoff=0.6)), None)
            raise ConfigError(
                f"{where}.{name} is not a Kafka client setting a job spec may set"
                + (f" (did you mean {hint}?)" if hint else ""),
                "remove it; a spec may set only " + ", ".join(CLIENT_OPTIONS)
                + " — ask the operator for anything else",
            )
        allowed = CLIENT_OPTIONS[lower][1]
        text = str(value).strip()
        ok = (text.isdigit() and len(text) <= 10 and int(text) <= _JAVA_INT_MAX if allowed == _INT  # Kafka's INT
              else text.lower() in allowed if isinstance(allowed, tuple)
              else 0 < len(text) <= _TEXT_LIMIT and text.isprintable())  # fmt: skip
        if not ok:
            expected = " or ".join(allowed) if isinstance(allowed, tuple) else allowed
            raise ConfigError(f"{where}.{name} is {text[:40]!r}", f"use {expected}")


DEFAULT_MAX_PAYLOAD_BYTES = 1_048_576  # 1 MiB: far above a device reading, far below a worker's memory
DEFAULT_MAX_PAYLOAD_DEPTH = 64  # JSON levels; readings are a few levels deep
_JAVA_INT_MAX = 2**31 - 1  # Spark strings and Jackson's nesting limit are Java ints


@dataclass(frozen=True)
class PayloadLimits:
    """What the parse stage reads as one event (semantics §9). A payload of more than
    ``max_payload_bytes`` bytes (UTF-8) is quarantined without being parsed; one whose JSON
    nests deeper than ``max_payload_depth`` levels is quarantined too, with the reason."""

    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    max_payload_depth: int = DEFAULT_MAX_PAYLOAD_DEPTH

    def __post_init__(self) -> None:
        for name, unit, default in (
            ("max_payload_bytes", "bytes", DEFAULT_MAX_PAYLOAD_BYTES),
            ("max_payload_depth", "levels", DEFAULT_MAX_PAYLOAD_DEPTH),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _JAVA_INT_MAX:
                raise ConfigError(
                    f"source.{name} is {value!r}",
                    f"use a whole number of {unit} from 1 to {_JAVA_INT_MAX} (default {default}), or remove it",
                )


@dataclass(frozen=True)
class SourceSpec:
    """Where events come from: the embedded event log (``hub``) or Kafka — exactly one.

    ``hub=None`` with no Kafka means the default log, ``$TIDEGATE_HOME/hub``.
    """

    hub: str | None = None
    kafka: KafkaSpec | None = None
    max_events_per_batch: int | None = None
    max_arrival_span_per_batch_us: int | None = None
    payload_limits: PayloadLimits = PayloadLimits()
    on_corrupt_frame: str = "fail"  # or "quarantine": skip the damaged frame's offsets, record them, go on

    @property
    def kind(self) -> str:
        return "kafka" if self.kafka else "hub"

    def hub_path(self, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path:
        """The event log directory: a relative ``hub`` is relative to the working directory
        (where the CLI, demo and Airflow tasks run), like every relative path in a spec."""
        if self.kafka:
            raise ConfigError("source: this job reads Kafka, not the event log", "use source.kafka")
        path = Path(self.hub) if self.hub else tidegate_home(env) / "hub"
        return path if path.is_absolute() else (cwd or Path.cwd()) / path


@dataclass(frozen=True)
class InputSource:
    """What an input that reads its own log has of its own: the log (``source.hub`` or
    ``source.kafka``), payload, event time and policy — the job's where the spec gives none."""

    source: SourceSpec
    payload: dict[str, str]
    timestamp_by: str | None = None
    time_format: str | None = None
    policy: TimePolicy = TimePolicy()

    def canonical(self) -> list:
        """What the fingerprint hashes: not the log (as for the job's source), the rest."""
        return [list(self.payload.items()), self.timestamp_by, self.time_format, policy_dict(self.policy, us=True)]

    def to_dict(self) -> dict[str, Any]:
        src = self.source
        source: dict[str, Any] = {"hub": src.hub}
        if src.kafka is not None:
            k = src.kafka
            source = {"kafka": k.to_dict()}
        out: dict[str, Any] = {"source": source, "payload": dict(self.payload), "timestamp_by": self.timestamp_by,
                               "time_format": self.time_format}  # fmt: skip
        if self.timestamp_by is not None:
            out["policy"] = policy_dict(self.policy, us=False)
        return out


def policy_dict(policy: TimePolicy, *, us: bool) -> dict[str, Any]:
    def d(value: int) -> int | str:
        return value if us else format_duration(value)

    return {
        "out_of_order_tolerance": d(policy.out_of_order_tolerance_us),
        "out_of_order_action": policy.out_of_order_action,
        "late_arrival_tolerance": d(policy.late_arrival_tolerance_us),
        "late_arrival_action": policy.late_arrival_action,
    }
