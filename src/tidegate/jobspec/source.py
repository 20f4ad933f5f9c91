"""Where a job's events come from: the event log or a Kafka topic, what one event may be,
and what an input that reads its own log has of its own — frozen dataclasses.

:mod:`tidegate.jobspec.parse_events` builds them; :class:`~tidegate.jobspec.model.JobSpec`
holds the job's :class:`SourceSpec` and :class:`~tidegate.jobspec.joins.InputSpec` an
input's :class:`InputSource`. Nothing in this module reads YAML.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_duration
from tidegate.eventtime.policy import TimePolicy

# Credentials never live in a spec: the process that connects reads them from its environment
# (:class:`tidegate.inputs.kafka.client.KafkaTopic`), so they never reach a job version.
SASL_USERNAME_ENV = "TIDEGATE_KAFKA_SASL_USERNAME"
SASL_PASSWORD_ENV = "TIDEGATE_KAFKA_SASL_PASSWORD"
# settings that hold secrets: refused in specs (they would be stored with the job's version)
SECRET_SETTINGS = ("sasl.jaas.config", "sasl.password", "ssl.key.password", "ssl.keystore.password",
                   "ssl.truststore.password")  # fmt: skip


def tidegate_home(env: Mapping[str, str] | None = None) -> Path:
    """``$TIDEGATE_HOME``, default ``var`` (relative to the working directory)."""
    return Path((os.environ if env is None else env).get("TIDEGATE_HOME") or "var")


@dataclass(frozen=True)
class KafkaSpec:
    bootstrap_servers: str  # "": the platform's brokers (TIDEGATE_KAFKA_BOOTSTRAP)
    topic: str
    options: dict[str, str] = field(default_factory=dict)  # passed to Spark as kafka.<name>


def check_no_secrets(settings: Mapping[str, str], where: str) -> None:
    """Refuse secrets in settings that are stored (job specs): they belong in the environment."""
    found = sorted(k for k in settings if k.lower() in SECRET_SETTINGS)
    if found:
        raise ConfigError(
            f"{where} holds {', '.join(found)}: a secret would be stored with the job's version",
            f"remove it and set {SASL_USERNAME_ENV} / {SASL_PASSWORD_ENV} in the environment of the drivers "
            "(or the Airflow connection tidegate_default's extra); keep security.protocol and sasl.mechanism in the spec",
        )


DEFAULT_MAX_PAYLOAD_BYTES = 1_048_576  # 1 MiB: far above a device reading, far below a worker's memory
DEFAULT_MAX_PAYLOAD_DEPTH = 64  # JSON levels; readings are a few levels deep
_JAVA_INT_MAX = 2**31 - 1  # Spark strings and Jackson's nesting limit are Java ints


@dataclass(frozen=True)
class PayloadLimits:
    """What the parse stage reads as one event (SPEC §9). A payload of more than
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
            source = {"kafka": {"bootstrap_servers": k.bootstrap_servers, "topic": k.topic, "options": dict(k.options)}}
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
