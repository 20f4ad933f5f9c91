"""The names a job spec uses, and the readers of one field that every section shares.

Owns the column names an expression may read besides the payload (:data:`BUILTIN_COLUMNS`,
:data:`AGGREGATE_BUILTINS`) and those the engine keeps for itself (:data:`ENGINE_COLUMNS`);
the fields of the ``source``, ``policy``, ``sinks`` and ``window`` sections, so that a field
written in the wrong place is pointed to its section; and the small readers the section
parsers (:mod:`~tidegate.jobspec.parse`, :mod:`~tidegate.jobspec.parse_query`) call for one
value: a mapping with name keys, known fields, a plain column name, a payload field, optional
text, a duration. Each raises :class:`ConfigError` naming the field and the fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tidegate.errors import ConfigError, excerpt
from tidegate.eventtime.durations import parse_duration_us
from tidegate.jobspec.expressions import PLAIN_NAME as _COLUMN
from tidegate.jobspec.hints import closest as _closest
from tidegate.jobspec.hints import did_you_mean as _did_you_mean

# Columns every input row has besides its payload (the event log and Kafka sources agree), with
# their Spark SQL types. ``headers`` is read only by jobs whose expressions name it (HEADERS).
BUILTIN_TYPES = {
    "partition": "int", "offset": "bigint", "arrival_time": "timestamp", "key": "string",
    "headers": "map<string,string>",
}  # fmt: skip
BUILTIN_COLUMNS = tuple(BUILTIN_TYPES)
HEADERS = "headers"  # the Kafka record's headers, name → last value (an empty map on the embedded log)
# What window aggregates can read: buffered events carry their position and payload, not
# arrival_time or key (see spark/pipeline/held_stage.py `_window_rows`).
AGGREGATE_BUILTINS = ("partition", "offset")
# Names the engine gives its own columns, next to the payload's (payload fields may not take
# them); the output adds partition, offset, system_time per event, or window_start, window_end.
ENGINE_COLUMNS = frozenset(
    BUILTIN_COLUMNS
    + ("payload", "event_time", "system_time", "system_us", "arrival_us", "event_us")
    + ("window_start_us", "window_end_us")
)

SOURCE_FIELDS = (
    "event_log", "kafka", "max_events_per_batch", "max_arrival_span_per_batch", "max_payload_bytes",
    "max_payload_depth", "on_corrupt_frame",
)  # fmt: skip
POLICY_FIELDS = ("out_of_order_tolerance", "out_of_order_action", "late_arrival_tolerance", "late_arrival_action")
SINKS_FIELDS = ("output", "outputs", "audit", "quarantine")
SECTION_FIELDS = {  # where a misplaced field belongs, for "did you mean policy.…?"
    "source": SOURCE_FIELDS, "policy": POLICY_FIELDS, "sinks": SINKS_FIELDS,
    "window": ("kind", "size", "hop", "offset", "gap", "max_duration", "edges", "cut"),
}  # fmt: skip


def columns(payload: Mapping[str, str], builtins: Iterable[str], extra: Iterable[str] = ()) -> list[str]:
    return list(payload) + [c for c in extra if c not in payload] + list(builtins)


def mapping(value: Any, where: str) -> dict:
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{where} must be a mapping of name: value, got {excerpt(value)}", "see docs/reference/jobspec.md"
        )
    for key in value:
        if not isinstance(key, str):
            raise ConfigError(
                f"{where}: key {excerpt(key)} is not a name",
                "quote it (YAML reads yes/no/on/off and numbers as values)",
            )
    return dict(value)


def check_fields(mapping: Mapping, known: tuple[str, ...], where: str) -> None:
    for key in mapping:
        if key in known:
            continue
        path = f"{where}.{key}" if where else key
        hint = _closest(key, known)
        if hint:
            fix = f"did you mean {(where + '.') if where else ''}{hint}?"
        else:
            homes = [f"{section}.{key}" for section, fields in SECTION_FIELDS.items() if key in fields]
            fix = f"it belongs under {homes[0]}." if homes else ""
        raise ConfigError(f"unknown field {path}", f"{fix} Known fields here: {', '.join(known)}".strip())


def column_name(name: str, where: str, reserved: frozenset[str]) -> None:
    if not _COLUMN.fullmatch(name):
        raise ConfigError(
            f"{where}: {excerpt(name)} is not a plain column name",
            "use letters, digits and '_', starting with a letter (a leading '_' is reserved for the engine)",
        )
    if name in reserved:
        raise ConfigError(
            f"{where}: {excerpt(name)} is a name the engine uses for its own column",
            "choose another name; taken here: " + ", ".join(sorted(reserved)),
        )


def added_column_name(name: str, where: str, reserved: frozenset[str], payload, what: str, suffix: str) -> None:
    """A column the spec adds beside the payload (an analytic column, an input): a plain name,
    not the engine's, not a payload field's."""
    column_name(name, where, reserved)
    if name in payload:
        raise ConfigError(f"{where}: {name} is a payload field", f"give the {what} its own name, e.g. {name}{suffix}")


def field_ref(value: Any, where: str, payload: Mapping[str, str]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in payload:
        raise ConfigError(
            f"{where}: {excerpt(value)} is not a payload field" + _did_you_mean(str(value), payload),
            f"use one of {', '.join(payload)}, or add the field to payload with its type",
        )
    return value


def optional_text(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(
            f"{where} is {excerpt(value)}, not text", "write it as text (quote it if YAML reads it otherwise)"
        )
    return value.strip() or None


def duration(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f"{where}: expected a duration, got {excerpt(value)}", "write e.g. 0s, 30s, 5m, 2h or 1d")
    return parse_duration_us(value, field=where)
