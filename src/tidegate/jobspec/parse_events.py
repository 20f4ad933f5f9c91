"""What a job reads and how it times its events: ``source`` (the event log or Kafka), ``payload``,
``timestamp_by``, ``time_format`` and ``policy`` — the job's, or an input's own when it reads
its own log. Errors name the field (``inputs.payments.policy.late_arrival_tolerance``) and the fix."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from tidegate.errors import ConfigError, excerpt
from tidegate.eventtime.policy import TimePolicy
from tidegate.jobspec.fields import ENGINE_COLUMNS
from tidegate.jobspec.fields import POLICY_FIELDS as _POLICY_FIELDS
from tidegate.jobspec.fields import SOURCE_FIELDS as _SOURCE_FIELDS
from tidegate.jobspec.fields import check_fields as _check_fields
from tidegate.jobspec.fields import column_name as _column_name
from tidegate.jobspec.fields import duration as _duration
from tidegate.jobspec.fields import mapping as _mapping
from tidegate.jobspec.fields import optional_text as _optional_text
from tidegate.jobspec.hints import closest as _closest
from tidegate.jobspec.nested_types import is_nested, nested_type
from tidegate.jobspec.numbers import whole_number
from tidegate.jobspec.source import (
    READERS,
    InputSource,
    KafkaSpec,
    PayloadLimits,
    SourceSpec,
    check_bootstrap_servers,
    check_options,
)
from tidegate.jobspec.timestamp_by import check_time_expression, read_timestamp_by

PAYLOAD_TYPES = ("string", "int", "bigint", "double", "float", "boolean", "timestamp", "date", "decimal(p,s)")
ON_CORRUPT_FRAME = ("fail", "quarantine")  # what the job does at a damaged frame of the event log
_PATTERN_LETTERS = frozenset("GyDMLdQqEFahKkHmsSVzOXxZ")  # Spark's datetime pattern table
_DECIMAL = re.compile(r"(?:decimal|dec|numeric)\(\s*(\d+)\s*,\s*(\d+)\s*\)")
_KAFKA_FIELDS = ("connection", "bootstrap_servers", "topic", "options", "reader")
_CONNECTION_NAME = re.compile(r"[a-z][a-z0-9_-]*")
_TYPE_HINTS = {
    "integer": "int", "long": "bigint", "bool": "boolean", "str": "string", "text": "string",
    "varchar": "string", "datetime": "timestamp", "real": "float", "number": "double",
    "float64": "double", "float32": "float", "int64": "bigint", "int32": "int",
    "decimal": "decimal(p,s), e.g. decimal(10,2)", "numeric": "decimal(p,s), e.g. decimal(10,2)",
}  # fmt: skip

logger = logging.getLogger(__name__)


def payload_fields(value: Any, where: str = "payload") -> dict[str, str]:
    fields = _mapping(value, where)
    if not fields:
        raise ConfigError(f"{where} is empty", "list the JSON fields the job reads, e.g. deviceId: string")
    out: dict[str, str] = {}
    for name, typ in fields.items():
        _column_name(name, f"{where}.{name}", ENGINE_COLUMNS)
        out[name] = payload_type(typ, f"{where}.{name}")
    return out


def event_time(section: Mapping[str, Any], payload: Mapping[str, str], prefix: str) -> tuple[str | None, str | None]:
    """``timestamp_by`` (a payload field or an expression, :mod:`tidegate.jobspec.timestamp_by`) and
    ``time_format`` of the job (``prefix`` "") or of an input (``inputs.<name>.``)."""
    timestamp_by = read_timestamp_by(section.get("timestamp_by"), f"{prefix}timestamp_by", payload)
    return timestamp_by, time_format(section.get("time_format"), timestamp_by, f"{prefix}time_format")


def event_log_field(src: Mapping[str, Any], where: str) -> Any:
    """``<where>.event_log``; its old name ``<where>.hub`` is read until 0.9, with a warning, and
    a source giving both is refused."""
    if "hub" not in src:
        return src.get("event_log")
    if "event_log" in src:
        raise ConfigError(f"{where} has both event_log and hub (its old name)",
                          f"keep {where}.event_log and remove {where}.hub")  # fmt: skip
    logger.warning("%s.hub is deprecated; rename it to %s.event_log (removed in 0.9)", where, where)
    return src["hub"]


def _without_old_names(src: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in src.items() if k != "hub"}


def input_log(value: Any, where: str) -> SourceSpec:
    """An input's own log: ``event_log`` or ``kafka`` (rate and payload limits are the job's ``source``'s)."""
    src = _mapping(value or {}, where)
    _check_fields(_without_old_names(src), ("event_log", "kafka"), where)
    event_log, kafka = event_log_field(src, where), src.get("kafka")
    if event_log is not None and kafka is not None:
        raise ConfigError(f"{where} has both event_log and kafka", "an input reads exactly one log: keep one of them")
    return SourceSpec(event_log=_optional_text(event_log, f"{where}.event_log"),
                      kafka=None if kafka is None else kafka_spec(kafka, f"{where}.kafka"))  # fmt: skip


def payload_type(value: Any, where: str) -> str:
    if isinstance(value, str) and is_nested(re.sub(r"\s+", "", value.lower())):  # struct field names keep their case
        return nested_type(re.sub(r"\s+", "", value), where, payload_type)
    text = re.sub(r"\s+", "", str(value).lower()) if isinstance(value, str) else None
    if text in PAYLOAD_TYPES:
        return text
    if text and (m := _DECIMAL.fullmatch(text)):
        precision, scale = (
            whole_number(m.group(i), f"{where}: the {part} of {excerpt(value)}", 0, 99)
            for i, part in ((1, "precision"), (2, "scale"))
        )
        if 1 <= precision <= 38 and scale <= precision:
            return f"decimal({precision},{scale})"
        raise ConfigError(f"{where}: {excerpt(value)} is out of range", "use decimal(p,s) with 1 <= p <= 38 and s <= p")
    hint = _TYPE_HINTS.get(text or "") or _closest(text or "", PAYLOAD_TYPES)
    raise ConfigError(
        f"{where}: unknown type {excerpt(value)}" + (f" (did you mean {hint}?)" if hint else ""),
        "use one of " + ", ".join(PAYLOAD_TYPES) + "; or array<T>, map<string,T>, struct<name:T,…>",
    )


def time_format(value: Any, timestamp_by: str | None, where: str = "time_format") -> str | None:
    """A Spark datetime pattern. Letters are pattern symbols; literal text goes in quotes."""
    pattern = _optional_text(value, where)
    if pattern is None:
        return None
    if timestamp_by is None:
        raise ConfigError(f"{where} is set but timestamp_by is not", "set timestamp_by, or remove time_format")
    unquoted = re.sub(r"'[^']*'?", "", pattern)
    bad = sorted({c for c in unquoted if c.isalpha() and c not in _PATTERN_LETTERS})
    if bad:
        raise ConfigError(
            f"{where} {excerpt(pattern)}: {', '.join(bad)} {'is not a' if len(bad) == 1 else 'are not'} Spark datetime"
            " pattern letter" + ("" if len(bad) == 1 else "s"),
            "quote literal text (yyyy-MM-dd'T'HH:mm:ss), use y for the year (not Y or u); see Spark's"
            " 'Datetime Patterns' page",
        )
    return pattern


def source_spec(value: Any) -> SourceSpec:
    src = _mapping(value or {}, "source")
    _check_fields(_without_old_names(src), _SOURCE_FIELDS, "source")
    event_log, kafka = event_log_field(src, "source"), src.get("kafka")
    if event_log is not None and kafka is not None:
        raise ConfigError("source has both event_log and kafka", "a job reads exactly one source: keep one of them")
    max_events = src.get("max_events_per_batch")
    if max_events is not None and (isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1):
        raise ConfigError(
            f"source.max_events_per_batch is {excerpt(max_events)}",
            "use a positive whole number, e.g. 100000, or remove it",
        )
    span = src.get("max_arrival_span_per_batch")
    span_us = None if span is None else _duration(span, "source.max_arrival_span_per_batch")
    if span_us == 0:
        raise ConfigError("source.max_arrival_span_per_batch is 0s", "use a positive duration, e.g. 10m, or remove it")
    on_corrupt = src.get("on_corrupt_frame") or "fail"
    if on_corrupt not in ON_CORRUPT_FRAME:
        raise ConfigError(f"source.on_corrupt_frame is {excerpt(on_corrupt)}", "use fail (the default) or quarantine")
    if on_corrupt != "fail" and kafka is not None:
        raise ConfigError(
            "source.on_corrupt_frame applies to the event log, not Kafka", "remove it from a Kafka source"
        )
    return SourceSpec(
        on_corrupt_frame=on_corrupt,
        event_log=_optional_text(event_log, "source.event_log"),
        kafka=None if kafka is None else kafka_spec(kafka),
        max_events_per_batch=max_events,
        max_arrival_span_per_batch_us=span_us,
        payload_limits=PayloadLimits(
            **{name: src[name] for name in ("max_payload_bytes", "max_payload_depth") if src.get(name) is not None}
        ),
    )


def kafka_spec(value: Any, where: str = "source.kafka") -> KafkaSpec:
    kafka = _mapping(value, where)
    _check_fields(kafka, _KAFKA_FIELDS, where)
    required = {}
    for name in ("connection", "bootstrap_servers", "topic"):
        text = _optional_text(kafka.get(name), f"{where}.{name}")
        if not text and name == "topic":
            raise ConfigError(f"{where}.topic is missing", "e.g. topic: devices")
        required[name] = text or ""  # neither connection nor brokers: the platform's default connection
    if required["connection"] and required["bootstrap_servers"]:
        raise ConfigError(f"{where} names both a connection and bootstrap_servers",
                          "keep connection: its brokers are the connection's")  # fmt: skip
    if required["bootstrap_servers"]:
        check_bootstrap_servers(required["bootstrap_servers"], f"{where}.bootstrap_servers")
    if required["connection"] and not _CONNECTION_NAME.fullmatch(required["connection"]):
        raise ConfigError(f"{where}.connection {excerpt(required['connection'])} is not a connection name",
                          "use the name of a Kafka connection the operator configured, e.g. default")  # fmt: skip
    options = {}
    for key, val in _mapping(kafka.get("options") or {}, f"{where}.options").items():
        if isinstance(val, (dict, list)) or val is None:
            raise ConfigError(f"{where}.options.{key} is not a single value", "Kafka options are text or numbers")
        options[str(key)] = str(val).lower() if isinstance(val, bool) else str(val)
    options = check_options(options, f"{where}.options")  # no code, paths, credentials or security settings
    reader = kafka.get("reader")
    if reader is not None and reader not in READERS:
        raise ConfigError(f"{where}.reader is {excerpt(reader)}",
                          "use consumer (Kafka's Java consumer: any listener) or wire (plaintext listeners only), "
                          "or remove it: the wire on a plaintext listener, the consumer on any other")  # fmt: skip
    if reader == "wire" and "client.rack" in {k.lower() for k in options}:
        raise ConfigError(f"{where}: reader wire does not fetch from followers ({where}.options.client.rack)",
                          "remove client.rack, or use reader: consumer")  # fmt: skip
    return KafkaSpec(options=options, reader=reader or "", **required)


def policy_spec(value: Any, timestamp_by: str | None, where: str = "policy") -> TimePolicy:
    policy = _mapping(value or {}, where)
    for key in policy:
        if key.startswith("early"):
            raise ConfigError(
                f"{where}.{key} cannot be set: the early-arrival window is fixed at 5 minutes (semantics §1)",
                "remove it; events more than 5m ahead of their arrival time are dropped as early input",
            )
    _check_fields(policy, _POLICY_FIELDS, where)
    if policy and timestamp_by is None:
        raise ConfigError(
            f"{where}.{next(iter(policy))} has no effect without timestamp_by (event time is the arrival time, "
            "so no event is late, early or out of order)",
            "set timestamp_by to the payload field holding the event time, or remove policy",
        )
    for action in ("out_of_order_action", "late_arrival_action"):
        if action in policy and not isinstance(policy[action], str):
            raise ConfigError(f"{where}.{action} is {excerpt(policy[action])}", "use adjust (the default) or drop")

    defaults = TimePolicy()

    def tolerance(name: str) -> int:
        given = policy.get(name)
        return getattr(defaults, f"{name}_us") if given is None else _duration(given, f"{where}.{name}")

    try:
        return TimePolicy(
            out_of_order_tolerance_us=tolerance("out_of_order_tolerance"),
            out_of_order_action=policy.get("out_of_order_action") or defaults.out_of_order_action,
            late_arrival_tolerance_us=tolerance("late_arrival_tolerance"),
            late_arrival_action=policy.get("late_arrival_action") or defaults.late_arrival_action,
        )
    except ConfigError as exc:  # TimePolicy names the job's policy: name where it was written
        raise ConfigError(where + exc.problem.removeprefix("policy"), exc.fix) from None


def input_source(
    own: Mapping[str, Any],
    where: str,
    payload: dict[str, str],
    timestamp_by: str | None,
    time_format: str | None,
    policy: TimePolicy,
) -> InputSource:
    """An input's own log, payload, event time and policy (``own``: the fields it gives; ``where``:
    ``inputs.<name>``); the job's ``payload``, ``timestamp_by``, ``time_format`` and ``policy``
    where it gives none."""
    own_payload = payload_fields(own["payload"], f"{where}.payload") if own.get("payload") is not None else payload
    if not own_payload:
        raise ConfigError(f"{where}.payload is missing", f"give {where} its payload, or the job one for every input")
    if own.get("timestamp_by") is not None or own.get("time_format") is not None:
        ts, fmt = event_time(own, own_payload, f"{where}.")
    else:  # the job's event time, which must then be a field of this input's payload
        ts, fmt = timestamp_by, time_format
        if ts is not None and ts in payload and ts not in own_payload:
            raise ConfigError(f"{where}: the job's timestamp_by {ts} is not a field of its payload",
                              f"give {where} its own timestamp_by, or add {ts} to {where}.payload")  # fmt: skip
        if ts is not None and ts not in payload:  # an expression: it must read this input's fields
            check_time_expression(ts, f"{where} (the job's timestamp_by)", own_payload)
    if own.get("policy") is not None:
        own_policy = policy_spec(own["policy"], ts, f"{where}.policy")
    else:
        own_policy = policy if ts is not None else TimePolicy()
    return InputSource(input_log(own.get("source"), f"{where}.source"), own_payload, ts, fmt, own_policy)
