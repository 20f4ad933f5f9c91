"""Where a job's events come from: the event log or a Kafka topic, what one event may be,
and what an input that reads its own log has of its own — frozen dataclasses.

:mod:`tidegate.jobspec.parse_events` builds them; :class:`~tidegate.jobspec.model.JobSpec`
holds the job's :class:`SourceSpec` and :class:`~tidegate.jobspec.joins.InputSpec` an
input's :class:`InputSource`. Nothing in this module reads YAML.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidegate.errors import ConfigError, excerpt
from tidegate.eventtime.durations import format_duration
from tidegate.eventtime.policy import TimePolicy
from tidegate.jobspec.numbers import whole_number
from tidegate.jobspec.timestamp_by import timestamp_by_key

logger = logging.getLogger(__name__)


def tidegate_home(env: Mapping[str, str] | None = None) -> Path:
    """``$TIDEGATE_HOME``, default ``var`` (relative to the working directory)."""
    return Path((os.environ if env is None else env).get("TIDEGATE_HOME") or "var")


def default_event_log(home: Path) -> Path:
    """The event log under ``home``: ``home/event-log``. A home made before the event log had
    its name holds it in ``home/hub``; that folder is used while ``event-log`` does not exist,
    with a warning, so no events go missing (the old name is read until 0.9)."""
    folder, legacy = home / "event-log", home / "hub"
    if not folder.exists() and legacy.exists():
        logger.warning("%s is the event log's old folder name; rename it to %s (the old name is read until 0.9)",
                       legacy, folder)  # fmt: skip
        return legacy
    return folder


@dataclass(frozen=True)
class KafkaSpec:
    bootstrap_servers: str  # "": the connection's brokers (none named: the default connection's)
    topic: str
    options: dict[str, str] = field(default_factory=dict)  # passed to Spark as kafka.<name>
    connection: str = ""  # the operator's connection (tidegate.inputs.kafka.connections) whose brokers are read
    reader: str = ""  # how executors read the topic on the JVM: READERS; "": the wire on plaintext, else the consumer

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"connection": self.connection} if self.connection else {}
        out |= {"bootstrap_servers": self.bootstrap_servers, "topic": self.topic, "options": dict(self.options)}
        return out | ({"reader": self.reader} if self.reader else {})


# How executors read a Kafka range on the JVM: Kafka's public Java consumer (any listener), or
# Kafka's wire protocol straight into column vectors (plaintext listeners, no follower fetching)
READERS = ("consumer", "wire")


# host:port — a DNS name or IPv4 address, or an IPv6 address in brackets; no port: Kafka's 9092
_BROKER = re.compile(r"(?P<host>[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?|\[[0-9a-f:.]+\])(?::(?P<port>[^:/]*))?", re.I | re.A)
_MAX_SERVERS_TEXT = 512  # a few brokers are enough to find the rest; every message about them quotes them


def check_bootstrap_servers(servers: str, where: str) -> None:
    """Refuse a bootstrap list that is not ``host:port,…``: what a client would read as
    something else (a path, a URL, a port in another script's digits) never reaches one.
    Which hosts a spec may name at all is the operator's (tidegate.inputs.kafka.connections)."""
    if len(servers) > _MAX_SERVERS_TEXT:
        raise ConfigError(
            f"{where} is {len(servers):,} characters long",
            f"list a few brokers, at most {_MAX_SERVERS_TEXT} characters: a client finds the rest from them",
        )
    items = [item for item in (item.strip() for item in servers.split(",")) if item]
    if not items:
        raise ConfigError(f"{where} names no broker ({servers[:40]!r})",
                          "name brokers as host:port, e.g. kafka-1.example.com:9092, or remove it (the operator's "
                          "default connection)")  # fmt: skip
    for item in items:
        m = _BROKER.fullmatch(item)
        if m is None or len(m["host"]) > 253:
            raise ConfigError(f"{where}: {item[:80]!r} is not host:port",
                              "write brokers as host:port separated by commas, "
                              "e.g. kafka-1.example.com:9092")  # fmt: skip
        if m["port"] is not None:
            port = whole_number(m["port"], f"{where}: the port of {item[:80]!r}", 1, 65_535)
            if m["port"] != str(port):  # " 9092", "09092": brokers are compared as written (connections, allowed hosts)
                raise ConfigError(f"{where}: the port of {item[:80]!r} is {m['port'][:20]!r}, not written plainly",
                                  f"write it {port}, with no spaces or leading zeros")  # fmt: skip


@dataclass(frozen=True)
class Bounds:
    """The whole numbers a numeric client setting may take, and their unit."""

    low: int
    high: int
    unit: str


_MiB = 1 << 20
# What one fetch may hold is what one executor task buffers: Kafka's own defaults are 50 MiB
# (fetch.max.bytes) and 1 MiB (max.partition.fetch.bytes), payloads are at most 1 MiB by default.
FETCH_BYTES = Bounds(1, 64 * _MiB, "bytes")
SOCKET_BUFFER_BYTES = Bounds(1024, 16 * _MiB, "bytes")  # beyond a few MiB the kernel caps it anyway
# The client settings a spec may set (Java names, as Spark's connector and the JVM reader take
# them): name -> (librdkafka's name for confluent-kafka, or None where it has none; the values
# allowed: text, one of some words, or whole numbers within bounds). Everything else is refused:
# class names (code), paths, credentials, security — those are the operator's connection's
# (tidegate.inputs.kafka.connections).
CLIENT_OPTIONS: dict[str, tuple[str | None, str | tuple[str, ...] | Bounds]] = {
    "client.id": ("client.id", "text"),
    "client.rack": ("client.rack", "text"),
    "fetch.min.bytes": ("fetch.min.bytes", FETCH_BYTES),
    "fetch.max.bytes": ("fetch.max.bytes", FETCH_BYTES),
    "max.partition.fetch.bytes": ("max.partition.fetch.bytes", FETCH_BYTES),
    "fetch.max.wait.ms": ("fetch.wait.max.ms", Bounds(0, 10_000, "ms")),
    "max.poll.records": (None, Bounds(1, 100_000, "records")),
    "receive.buffer.bytes": ("socket.receive.buffer.bytes", SOCKET_BUFFER_BYTES),
    "send.buffer.bytes": ("socket.send.buffer.bytes", SOCKET_BUFFER_BYTES),
    "request.timeout.ms": (None, Bounds(1_000, 300_000, "ms")),
    "default.api.timeout.ms": (None, Bounds(1_000, 300_000, "ms")),
    "socket.connection.setup.timeout.ms": ("socket.connection.setup.timeout.ms", Bounds(1_000, 120_000, "ms")),
    "connections.max.idle.ms": ("connections.max.idle.ms", Bounds(1_000, 3_600_000, "ms")),
    "metadata.max.age.ms": ("metadata.max.age.ms", Bounds(1_000, 3_600_000, "ms")),
    "reconnect.backoff.ms": ("reconnect.backoff.ms", Bounds(0, 60_000, "ms")),
    "reconnect.backoff.max.ms": ("reconnect.backoff.max.ms", Bounds(0, 300_000, "ms")),
    "retry.backoff.ms": ("retry.backoff.ms", Bounds(1, 60_000, "ms")),
    "isolation.level": ("isolation.level", ("read_committed", "read_uncommitted")),
    "check.crcs": ("check.crcs", ("true", "false")),
}
_SECURITY_PREFIXES = ("security.", "sasl.", "ssl.")
_TEXT_LIMIT = 255


def check_options(options: Mapping[str, str], where: str) -> dict[str, str]:
    """Refuse a client setting outside :data:`CLIENT_OPTIONS`, or a value it cannot take;
    the error names the setting and what to do (never a value that might be a secret).
    Returns the settings as clients get them (numbers written plainly: ``" 0100"`` is ``"100"``)."""
    out = {}
    for key, value in options.items():
        name = str(key)
        lower = name.lower()
        if lower.startswith(_SECURITY_PREFIXES) or "jaas" in lower or "password" in lower:
            raise ConfigError(
                f"{where}.{name[:80]}: security settings and credentials are not set in a job spec",
                "remove it: the platform's Kafka connection sets them — name it with source.kafka.connection "
                "(the operator configures connections: kafka_connections in $TIDEGATE_CONFIG, or "
                "TIDEGATE_KAFKA_BOOTSTRAP, _SECURITY_PROTOCOL, _SASL_* for 'default')",
            )
        if lower not in CLIENT_OPTIONS:
            hint = next(iter(difflib.get_close_matches(lower, list(CLIENT_OPTIONS), n=1, cutoff=0.6)), None)
            raise ConfigError(
                f"{where}.{name[:80]} is not a Kafka client setting a job spec may set"
                + (f" (did you mean {hint}?)" if hint else ""),
                "remove it; a spec may set only " + ", ".join(CLIENT_OPTIONS) + " — ask the operator for anything else",
            )
        allowed = CLIENT_OPTIONS[lower][1]
        if isinstance(allowed, Bounds):  # every number a spec gives a client is read by whole_number
            out[name] = str(whole_number(value, f"{where}.{name}", allowed.low, allowed.high, allowed.unit))
            continue
        text = str(value).strip()
        ok = (
            text.lower() in allowed
            if isinstance(allowed, tuple)
            else 0 < len(text) <= _TEXT_LIMIT and text.isprintable()
        )
        if not ok:
            expected = (
                " or ".join(allowed)
                if isinstance(allowed, tuple)
                else f"printable text of up to {_TEXT_LIMIT} characters"
            )
            raise ConfigError(f"{where}.{name} is {text[:40]!r}", f"use {expected}")
        out[name] = str(value)
    return out


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
                    f"source.{name} is {excerpt(value)}",
                    f"use a whole number of {unit} from 1 to {_JAVA_INT_MAX} (default {default}), or remove it",
                )


@dataclass(frozen=True)
class SourceSpec:
    """Where events come from: the embedded event log (``event_log``) or Kafka — exactly one.

    ``event_log=None`` with no Kafka means the default log, ``$TIDEGATE_HOME/event-log``.
    """

    event_log: str | None = None
    kafka: KafkaSpec | None = None
    max_events_per_batch: int | None = None
    max_arrival_span_per_batch_us: int | None = None
    payload_limits: PayloadLimits = PayloadLimits()
    on_corrupt_frame: str = "fail"  # or "quarantine": skip the damaged frame's offsets, record them, go on

    @property
    def kind(self) -> str:
        return "kafka" if self.kafka else "event_log"

    def event_log_path(self, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path:
        """The event log directory: a relative ``event_log`` is relative to the working directory
        (where the CLI, demo and Airflow tasks run), like every relative path in a spec."""
        if self.kafka:
            raise ConfigError("source: this job reads Kafka, not the event log", "use source.kafka")
        path = Path(self.event_log) if self.event_log else default_event_log(tidegate_home(env))
        return path if path.is_absolute() else (cwd or Path.cwd()) / path


@dataclass(frozen=True)
class InputSource:
    """What an input that reads its own log has of its own: the log (``source.event_log`` or
    ``source.kafka``), payload, event time and policy — the job's where the spec gives none."""

    source: SourceSpec
    payload: dict[str, str]
    timestamp_by: str | None = None
    time_format: str | None = None
    policy: TimePolicy = TimePolicy()

    def canonical(self) -> list:
        """What the fingerprint hashes: not the log (as for the job's source), the rest."""
        return [list(self.payload.items()), timestamp_by_key(self.timestamp_by, self.payload), self.time_format,
                policy_dict(self.policy, us=True)]  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        src = self.source
        source: dict[str, Any] = {"event_log": src.event_log}
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
