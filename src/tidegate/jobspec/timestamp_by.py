"""``timestamp_by``: where each event's time ``E`` comes from (semantics §1), as Stream Analytics'
``TIMESTAMP BY`` takes it — a payload field, or an expression over the event.

* **A payload field** of type ``string`` (read with ``time_format``, ISO-8601 by default) or
  ``timestamp``: ``timestamp_by: eventTime``. A spec names it as it is written.
* **An expression**, Spark SQL over the payload fields and the built-in columns, held to the
  same allowlist and limits as every spec expression (:func:`~tidegate.jobspec.expressions.check_expression`):
  ``DATEADD(millisecond, epochMs, '1970-01-01T00:00:00Z')``,
  ``CASE WHEN deviceTime IS NOT NULL THEN deviceTime ELSE gatewayTime END``,
  ``CAST(reading.time AS timestamp)``. Its value is the event time when it is a ``timestamp``
  or a ``date``; text is read with ``time_format`` (ISO-8601 by default), as a field's is. A
  NULL value is a missing event time and an unreadable text an unreadable one: the event goes
  to quarantine (semantics §9). The engine refuses any other type before a query starts
  (:mod:`tidegate.spark.pipeline.event_time`).
* **A nested field**, ``reading.time``: a dotted name whose head is not a payload field reads
  the field inside the payload's JSON object ``reading``, as text.

The event time must be a function of the event alone (semantics §2): the current time
(``current_timestamp()``, ``now()``…) is refused here, where other expressions may read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidegate.errors import ConfigError, excerpt
from tidegate.jobspec.expressions import (
    PLAIN_NAME,
    canonical_expression,
    check_expression,
    normalise_expression,
    token_spans,
)
from tidegate.jobspec.fields import BUILTIN_COLUMNS, ENGINE_COLUMNS
from tidegate.jobspec.hints import did_you_mean

TIME_FIELD_TYPES = ("string", "timestamp")  # the payload types a field named by timestamp_by may have
# what reads the clock instead of the event: a replay would give its events other times
_CLOCK_WORDS = frozenset(
    """current_timestamp current_date current_time now curdate localtimestamp current_timezone""".split()
)
_EPOCH_HINT = "for epoch numbers write an expression, e.g. DATEADD(millisecond, {f}, '1970-01-01T00:00:00Z')"


def time_field(timestamp_by: str | None, payload: Mapping[str, str]) -> str | None:
    """The payload field ``timestamp_by`` names, or None when it is an expression (or unset)."""
    return timestamp_by if timestamp_by is not None and timestamp_by in payload else None


def nested_fields(timestamp_by: str | None, payload: Mapping[str, str]) -> dict[str, tuple[tuple[str, ...], ...]]:
    """The nested fields an expression reads: per head (a JSON object of the payload that is not
    a payload field), the paths inside it it reads — ``reading.time`` gives ``{"reading": (("time",),)}``."""
    if timestamp_by is None or timestamp_by in payload:
        return {}
    taken = {n.lower() for n in (*payload, *BUILTIN_COLUMNS)}
    toks = [(kind, text) for kind, text, _, _ in token_spans(timestamp_by)]
    out: dict[str, list[tuple[str, ...]]] = {}
    for i, (kind, text) in enumerate(toks):
        prev = toks[i - 1][1].lower() if i else ""
        if kind != "word" or prev in (".", "as") or i + 2 >= len(toks) or toks[i + 1][1] != ".":
            continue
        if text.lower() in taken:
            continue
        path, j = [], i + 1
        while j + 1 < len(toks) and toks[j][1] == "." and toks[j + 1][0] == "word":
            path.append(toks[j + 1][1])
            j += 2
        if path and (j >= len(toks) or toks[j][1] != "("):  # a.b(…) is a qualified call, refused elsewhere
            paths = out.setdefault(text, [])
            if tuple(path) not in paths:
                paths.append(tuple(path))
    return {head: tuple(paths) for head, paths in out.items()}


def read_timestamp_by(value: Any, where: str, payload: Mapping[str, str]) -> str | None:
    """``timestamp_by`` of the job (``where`` "timestamp_by") or of an input: a payload field,
    kept as written, or an expression, checked and normalised. Raises ConfigError naming the
    field, what is wrong and what to write instead."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where} is {excerpt(value)}",
                          "name the payload field holding the event time, or write an expression that"
                          " computes it, e.g. DATEADD(millisecond, epochMs, '1970-01-01T00:00:00Z')")  # fmt: skip
    text = value.strip()
    if text in payload:
        if payload[text] not in TIME_FIELD_TYPES:
            raise ConfigError(f"{where}: payload field {text} is {payload[text]}",
                              "the event-time field must be a string (ISO-8601 or time_format) or a timestamp; "
                              + _EPOCH_HINT.format(f=text))  # fmt: skip
        return text
    if PLAIN_NAME.fullmatch(text):  # one name that is no field: a typo, not an expression
        raise ConfigError(
            f"{where}: {excerpt(text)} is not a payload field" + did_you_mean(text, payload),
            f"use one of {', '.join(payload)}, add the field to payload with its type, or write an expression",
        )
    text = normalise_expression(text)
    return check_time_expression(text, where, payload)


def check_time_expression(text: str, where: str, payload: Mapping[str, str]) -> str:
    """Check an event-time expression against ``payload`` (an input's, for an input that takes
    the job's ``timestamp_by``); returns it."""
    nested = nested_fields(text, payload)
    for head in nested:
        if head.lower() in {c.lower() for c in ENGINE_COLUMNS}:
            raise ConfigError(f"{where}: {head} is a column of the engine, not a JSON object of the payload",
                              "read a nested field of the payload by its own name, e.g. reading.time")  # fmt: skip
    toks = token_spans(text)
    for i, (kind, name, _, _) in enumerate(toks[:-1]):
        if kind == "word" and name in payload and toks[i + 1][1] == "." and (i == 0 or toks[i - 1][1] != "."):
            raise ConfigError(
                f"{where}: {excerpt(text)} reads a field inside {name}, which the payload declares as {payload[name]}",
                f"to read {name} as a JSON object, remove it from payload (its nested fields are read as text);"
                f" or keep it and write get_json_object({name}, '$.field')",
            )
    calls = check_expression(text, where, [*payload, *nested, *BUILTIN_COLUMNS])
    words = {t.lower() for kind, t, _, _ in toks if kind == "word"}
    clock = sorted((set(calls) | words) & _CLOCK_WORDS)
    if clock:
        raise ConfigError(
            f"{where}: {clock[0]} reads the clock, not the event ({excerpt(text)}): a replay would give its"
            " events other times (semantics §2)",
            "compute the event time from the event's own fields; without timestamp_by the event time is"
            " its arrival time",
        )
    return text


def timestamp_by_key(timestamp_by: str | None, payload: Mapping[str, str]) -> str | None:
    """What the fingerprint hashes: a field's name as written (as before expressions were
    allowed, so no fingerprint changed), an expression's canonical form (its spacing and
    keyword case change no result)."""
    if timestamp_by is None or timestamp_by in payload:
        return timestamp_by
    return canonical_expression(timestamp_by)
