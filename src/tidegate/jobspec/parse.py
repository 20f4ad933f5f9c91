"""Reading a job spec: YAML text or a mapping in, a frozen :class:`JobSpec` out.

:func:`load_spec` reads a file (YAML that refuses a key written twice, errors with the
file's line), :func:`parse_spec` a mapping; both return a :class:`JobSpec` or raise
:class:`ConfigError` naming the field (``window.size``, ``aggregates.events``) and the fix.
This module parses the top level and what a job reads, how it times events and where it
writes (name, version, payload, timestamp_by, time_format, over, policy, filter, source,
sinks); the query sections are :mod:`tidegate.jobspec.parse_query`'s.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

import yaml

from tidegate.kafka.client import check_no_secrets
from tidegate.errors import ConfigError
from tidegate.eventtime.policy import TimePolicy
from tidegate.jobspec.analytics import parse_analytics
from tidegate.jobspec.expressions import check_expression, normalise_expression
from tidegate.jobspec.fields import AGGREGATE_BUILTINS, BUILTIN_COLUMNS, ENGINE_COLUMNS
from tidegate.jobspec.fields import POLICY_FIELDS as _POLICY_FIELDS
from tidegate.jobspec.fields import SINKS_FIELDS as _SINKS_FIELDS
from tidegate.jobspec.fields import SOURCE_FIELDS as _SOURCE_FIELDS
from tidegate.jobspec.fields import check_fields as _check_fields
from tidegate.jobspec.fields import column_name as _column_name
from tidegate.jobspec.fields import columns as _columns
from tidegate.jobspec.fields import duration as _duration
from tidegate.jobspec.fields import field_ref as _field_ref
from tidegate.jobspec.fields import mapping as _mapping
from tidegate.jobspec.fields import optional_text as _optional_text
from tidegate.jobspec.hints import closest as _closest
from tidegate.jobspec.joins import (
    check_join_shape,
    check_side_expression,
    parse_inputs,
    parse_join,
    parse_join_select,
    side_payloads,
    union_payload,
)
from tidegate.jobspec.model import InputSource, JobSpec, KafkaSpec, PayloadLimits, SinksSpec, SourceSpec
from tidegate.jobspec.parse_query import (
    ANALYTIC_RESERVED,
    check_output_names,
    check_query_shape,
    parse_group_by,
    parse_named_exprs,
    parse_select,
    parse_window,
)

PAYLOAD_TYPES = ("string", "int", "bigint", "double", "float", "boolean", "timestamp", "date", "decimal(p,s)")
OUTPUT_FORMATS = ("parquet",)
ON_CORRUPT_FRAME = ("fail", "quarantine")  # what the job does at a damaged frame of the event log

_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
_PATTERN_LETTERS = frozenset("GyDMLdQqEFahKkHmsSVzOXxZ")  # Spark's datetime pattern table
_DECIMAL = re.compile(r"(?:decimal|dec|numeric)\(\s*(\d+)\s*,\s*(\d+)\s*\)")
_TYPE_HINTS = {
    "integer": "int", "long": "bigint", "bool": "boolean", "str": "string", "text": "string",
    "varchar": "string", "datetime": "timestamp", "real": "float", "number": "double",
    "float64": "double", "float32": "float", "int64": "bigint", "int32": "int",
    "decimal": "decimal(p,s), e.g. decimal(10,2)", "numeric": "decimal(p,s), e.g. decimal(10,2)",
}  # fmt: skip

_TOP_FIELDS = (
    "name", "version", "description", "source", "payload", "timestamp_by", "time_format", "over",
    "policy", "filter", "select", "window", "group_by", "aggregates", "sinks", "analytics", "watermark",
    "inputs", "join",
)  # fmt: skip
_KAFKA_FIELDS = ("bootstrap_servers", "topic", "options")


def load_spec(path: str | Path) -> JobSpec:
    """Read a YAML job spec file. Errors name the file, and for YAML syntax the line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such job spec file", "check the path; example specs are in jobs/") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at position {exc.start})",
            "save the spec as UTF-8 (most editors offer it under 'Save with encoding')",
        ) from None
    except OSError as exc:
        problem = f"{path}: cannot read the job spec ({exc.strerror})"
        raise ConfigError(problem, "check the path and its permissions") from None
    try:
        data = yaml.load(text, Loader=_SpecLoader)  # noqa: S506 — a SafeLoader subclass
    except RecursionError:  # PyYAML composes nested brackets recursively
        raise ConfigError(f"{path}: {_TOO_DEEP[0]}", _TOO_DEEP[1]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        if isinstance(exc, _DuplicateKey):
            raise ConfigError(f"{where}: {problem}", "keep one of them (YAML would silently use the last)") from None
        raise ConfigError(
            f"{where}: YAML syntax error: {problem}" + (f" ({context})" if context else ""),
            "fix the YAML at or just before that line (indentation, a missing ':' or an unclosed quote or bracket)",
        ) from None
    if data is None:
        raise ConfigError(f"{path}: the job spec is empty", "write at least name, version and payload")
    return parse_spec(data, origin=str(path))


def parse_spec(mapping: Mapping[str, Any], origin: str = "<string>") -> JobSpec:
    """Validate a spec given as a mapping (as read from YAML). ``origin`` prefixes errors."""
    try:
        return _parse(mapping)
    except ConfigError as exc:
        raise ConfigError(f"{origin}: {exc.problem}", exc.fix) from None
    except RecursionError:  # a value nested thousands deep (e.g. from json.loads): even its repr fails
        raise ConfigError(f"{origin}: {_TOO_DEEP[0]}", _TOO_DEEP[1]) from None


_TOO_DEEP = (
    "the job spec is nested too deeply to read",
    "a spec is a few levels deep: look for runaway brackets, or YAML anchors that refer to themselves",
)


class _DuplicateKey(yaml.constructor.ConstructorError):
    pass


class _SpecLoader(yaml.SafeLoader):
    """Safe YAML that refuses a key written twice (plain YAML keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        self.flatten_mapping(node)
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, (str, int, float, bool)):
                continue  # a list or mapping as a key: SafeLoader refuses it, with its line
            if key in seen:
                raise _DuplicateKey(
                    None, None, f"key {key!r} appears twice in the same mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _parse(data: Any) -> JobSpec:
    top = _mapping(data, "the job spec")
    _check_fields(top, _TOP_FIELDS, "")
    without_payload = _inputs_without(top.get("inputs"), "payload")
    for required in ("name", "version", "payload"):
        if top.get(required) is None and not (required == "payload" and without_payload == []):
            if required == "payload" and without_payload:  # some inputs have their own: name one that has none
                raise ConfigError(f"inputs.{without_payload[0]}.payload is missing, and the job has no payload",
                                  f"give inputs.{without_payload[0]} its payload, or the job one for its inputs")  # fmt: skip
            raise ConfigError(f"{required} is missing", f"add it; see docs/jobspec.md ({_REQUIRED_HINT[required]})")
    name, version = _name(top["name"]), _version(top["version"])
    if top.get("payload") is None:  # every input has its own: the job has no event of its own to time
        for key in ("timestamp_by", "time_format", "policy"):
            if top.get(key) is not None:
                raise ConfigError(f"{key} is set but the job has no payload: each input has its own",
                                  f"move {key} into each input (inputs.<name>.{key}), or add the job's payload")  # fmt: skip
    payload = _payload(top["payload"]) if top.get("payload") is not None else {}
    timestamp_by, time_format = _event_time(top, payload, "")
    policy = _policy(top.get("policy"), timestamp_by)

    def own_input(input_name: str, own: Mapping[str, Any], where: str) -> InputSource:
        """An input's own log, payload, event time and policy; the job's where not given."""
        own_payload = _payload(own["payload"], f"{where}.payload") if own.get("payload") is not None else payload
        if not own_payload:
            raise ConfigError(f"{where}.payload is missing", f"give {where} its payload, or the job one for every input")
        if own.get("timestamp_by") is not None or own.get("time_format") is not None:
            ts, fmt = _event_time(own, own_payload, f"{where}.")
        else:  # the job's event time, which must then be a field of this input's payload
            ts, fmt = timestamp_by, time_format
            if ts is not None and ts not in own_payload:
                raise ConfigError(f"{where}: the job's timestamp_by {ts} is not a field of its payload",
                                  f"give {where} its own timestamp_by, or add {ts} to {where}.payload")  # fmt: skip
        if own.get("policy") is not None:
            own_policy = _policy(own["policy"], ts, f"{where}.policy")
        else:
            own_policy = policy if ts is not None else TimePolicy()
        return InputSource(_input_source(own.get("source"), f"{where}.source"), own_payload, ts, fmt, own_policy)

    inputs = parse_inputs(top.get("inputs"), payload, BUILTIN_COLUMNS, ANALYTIC_RESERVED, own_input)
    payloads = side_payloads(inputs, payload)
    payload = union_payload(inputs, payload)
    join = parse_join(top.get("join"), inputs, payloads)
    if join is not None:
        check_join_shape(top)
    window = parse_window(top.get("window"))
    check_query_shape(window, top)
    group_by = parse_group_by(top.get("group_by"), payload)
    aggregates = parse_named_exprs(top.get("aggregates"), "aggregates", payload, AGGREGATE_BUILTINS, group_by)
    analytics = parse_analytics(top.get("analytics"), payload, BUILTIN_COLUMNS, ANALYTIC_RESERVED)
    # select and filter read the analytic columns: they are computed first (as in Stream Analytics)
    analytic_columns = tuple((a.name, a.name) for a in analytics)
    if join is None:
        select = parse_select(top.get("select"), payload, analytic_columns)
    else:
        select = parse_join_select(top.get("select"), join, payloads)
    check_output_names(group_by + aggregates, "group_by and aggregates")
    filter_ = _optional_text(top.get("filter"), "filter")
    if filter_ is not None:
        filter_ = normalise_expression(filter_)
        if join is None:
            check_expression(filter_, "filter", _columns(payload, BUILTIN_COLUMNS, [n for n, _ in analytic_columns]))
        else:  # a join's filter reads the joined row, before its select
            check_side_expression(filter_, "filter", [join.left, join.right], payloads)
    return JobSpec(
        name=name,
        version=version,
        description=_optional_text(top.get("description"), "description") or "",
        source=_source(top.get("source")),
        payload=payload,
        timestamp_by=timestamp_by,
        time_format=time_format,
        over=_field_ref(top.get("over"), "over", payload),
        policy=policy,
        filter=filter_,
        select=select,
        window=window,
        group_by=group_by,
        aggregates=aggregates,
        sinks=_sinks(top.get("sinks")),
        analytics=analytics,
        watermark_percentile=_watermark(top.get("watermark")),
        inputs=inputs,
        join=join,
    )


_REQUIRED_HINT = {
    "name": "e.g. name: device-fleet-counts",
    "version": "e.g. version: 1, bumped on every change",
    "payload": "the JSON fields the job reads, e.g. payload: {deviceId: string, temperature: double}",
}


def _name(value: Any) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value) or len(value) > 63:
        raise ConfigError(
            f"name {value!r} is not a valid job name",
            "use 1–63 lower-case letters, digits, '-' or '_', starting with a letter or digit,"
            " e.g. device-fleet-counts",
        )
    return value


def _version(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            f"version {value!r} is not a positive whole number",
            "write e.g. version: 3 (no quotes), and bump it on every change",
        )
    return value


def _payload(value: Any, where: str = "payload") -> dict[str, str]:
    fields = _mapping(value, where)
    if not fields:
        raise ConfigError(f"{where} is empty", "list the JSON fields the job reads, e.g. deviceId: string")
    out: dict[str, str] = {}
    for name, typ in fields.items():
        _column_name(name, f"{where}.{name}", ENGINE_COLUMNS)
        out[name] = _payload_type(typ, f"{where}.{name}")
    return out


def _event_time(section: Mapping[str, Any], payload: Mapping[str, str], prefix: str) -> tuple[str | None, str | None]:
    """``timestamp_by`` and ``time_format`` of the job (``prefix`` "") or of an input (``inputs.<name>.``)."""
    timestamp_by = _field_ref(section.get("timestamp_by"), f"{prefix}timestamp_by", payload)
    if timestamp_by is not None and payload[timestamp_by] not in ("string", "timestamp"):
        raise ConfigError(
            f"{prefix}timestamp_by: payload field {timestamp_by} is {payload[timestamp_by]}",
            "the event-time field must be a string (ISO-8601 or time_format) or a timestamp",
        )
    return timestamp_by, _time_format(section.get("time_format"), timestamp_by, f"{prefix}time_format")


def _inputs_without(inputs: Any, key: str) -> list[str] | None:
    """The inputs that do not give ``key``; None when none gives it (or there are no inputs)."""
    if not isinstance(inputs, Mapping) or not inputs:
        return None
    bodies = {name: body if isinstance(body, Mapping) else {} for name, body in inputs.items()}
    if all(body.get(key) is None for body in bodies.values()):
        return None
    return [name for name, body in bodies.items() if body.get(key) is None]


def _input_source(value: Any, where: str) -> SourceSpec:
    """An input's own log: ``hub`` or ``kafka`` (rate and payload limits are the job's ``source``'s)."""
    src = _mapping(value or {}, where)
    _check_fields(src, ("hub", "kafka"), where)
    if src.get("hub") is not None and src.get("kafka") is not None:
        raise ConfigError(f"{where} has both hub and kafka", "an input reads exactly one log: keep one of them")
    kafka = src.get("kafka")
    return SourceSpec(hub=_optional_text(src.get("hub"), f"{where}.hub"),
                      kafka=None if kafka is None else _kafka(kafka, f"{where}.kafka"))  # fmt: skip


def _payload_type(value: Any, where: str) -> str:
    text = re.sub(r"\s+", "", str(value).lower()) if isinstance(value, str) else None
    if text in PAYLOAD_TYPES:
        return text
    if text and (m := _DECIMAL.fullmatch(text)):
        precision, scale = int(m.group(1)), int(m.group(2))
        if 1 <= precision <= 38 and scale <= precision:
            return f"decimal({precision},{scale})"
        raise ConfigError(f"{where}: {value!r} is out of range", "use decimal(p,s) with 1 <= p <= 38 and s <= p")
    hint = _TYPE_HINTS.get(text or "") or _closest(text or "", PAYLOAD_TYPES)
    raise ConfigError(
        f"{where}: unknown type {value!r}" + (f" (did you mean {hint}?)" if hint else ""),
        "use one of " + ", ".join(PAYLOAD_TYPES),
    )


def _time_format(value: Any, timestamp_by: str | None, where: str = "time_format") -> str | None:
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
            f"{where} {pattern!r}: {', '.join(bad)} {'is not a' if len(bad) == 1 else 'are not'} Spark datetime"
            " pattern letter" + ("" if len(bad) == 1 else "s"),
            "quote literal text (yyyy-MM-dd'T'HH:mm:ss), use y for the year (not Y or u); see Spark's"
            " 'Datetime Patterns' page",
        )
    return pattern


def _source(value: Any) -> SourceSpec:
    src = _mapping(value or {}, "source")
    _check_fields(src, _SOURCE_FIELDS, "source")
    hub, kafka = src.get("hub"), src.get("kafka")
    if hub is not None and kafka is not None:
        raise ConfigError("source has both hub and kafka", "a job reads exactly one source: keep one of them")
    max_events = src.get("max_events_per_batch")
    if max_events is not None and (isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1):
        raise ConfigError(
            f"source.max_events_per_batch is {max_events!r}", "use a positive whole number, e.g. 100000, or remove it"
        )
    span = src.get("max_arrival_span_per_batch")
    span_us = None if span is None else _duration(span, "source.max_arrival_span_per_batch")
    if span_us == 0:
        raise ConfigError("source.max_arrival_span_per_batch is 0s", "use a positive duration, e.g. 10m, or remove it")
    on_corrupt = src.get("on_corrupt_frame") or "fail"
    if on_corrupt not in ON_CORRUPT_FRAME:
        raise ConfigError(f"source.on_corrupt_frame is {on_corrupt!r}", "use fail (the default) or quarantine")
    if on_corrupt != "fail" and kafka is not None:
        raise ConfigError("source.on_corrupt_frame applies to the event log, not Kafka", "remove it from a Kafka source")
    return SourceSpec(
        on_corrupt_frame=on_corrupt,
        hub=_optional_text(hub, "source.hub"),
        kafka=None if kafka is None else _kafka(kafka),
        max_events_per_batch=max_events,
        max_arrival_span_per_batch_us=span_us,
        payload_limits=PayloadLimits(
            **{name: src[name] for name in ("max_payload_bytes", "max_payload_depth") if src.get(name) is not None}
        ),
    )


def _kafka(value: Any, where: str = "source.kafka") -> KafkaSpec:
    kafka = _mapping(value, where)
    _check_fields(kafka, _KAFKA_FIELDS, where)
    required = {}
    for name in ("bootstrap_servers", "topic"):
        text = _optional_text(kafka.get(name), f"{where}.{name}")
        if not text and name == "topic":
            raise ConfigError(f"{where}.topic is missing", "e.g. topic: devices")
        required[name] = text or ""  # no brokers: the platform's (TIDEGATE_KAFKA_BOOTSTRAP)
    options = {}
    for key, val in _mapping(kafka.get("options") or {}, f"{where}.options").items():
        if isinstance(val, (dict, list)) or val is None:
            raise ConfigError(f"{where}.options.{key} is not a single value", "Kafka options are text or numbers")
        options[str(key)] = str(val).lower() if isinstance(val, bool) else str(val)
    check_no_secrets(options, f"{where}.options")  # a spec is stored with its version: no credentials
    return KafkaSpec(options=options, **required)


def _policy(value: Any, timestamp_by: str | None, where: str = "policy") -> TimePolicy:
    policy = _mapping(value or {}, where)
    for key in policy:
        if key.startswith("early"):
            raise ConfigError(
                f"{where}.{key} cannot be set: the early-arrival window is fixed at 5 minutes (SPEC §1)",
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
            raise ConfigError(f"{where}.{action} is {policy[action]!r}", "use adjust (the default) or drop")

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


def _watermark(value: Any) -> float | None:
    """``watermark: {percentile: p}``: the lossy early-output mode (SPEC §4); absent, the
    job watermark is the minimum over its units."""
    if value is None:
        return None
    section = _mapping(value, "watermark")
    _check_fields(section, ("percentile",), "watermark")
    p = section.get("percentile")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p < 100:
        raise ConfigError(
            f"watermark.percentile is {p!r}",
            "use a number above 0 and below 100, e.g. 95 (output waits for 95 % of the units); "
            "remove watermark for the default, which waits for every unit",
        )
    return float(p)


def _sinks(value: Any) -> SinksSpec:
    sinks = _mapping(value or {}, "sinks")
    _check_fields(sinks, _SINKS_FIELDS, "sinks")
    if sinks.get("output") is False:
        raise ConfigError("sinks.output cannot be turned off: it is what the job produces", "remove sinks.output")
    output = _mapping(sinks.get("output") or {}, "sinks.output")
    _check_fields(output, ("path", "format"), "sinks.output")
    fmt = output.get("format") or "parquet"
    if fmt not in OUTPUT_FORMATS:
        raise ConfigError(f"sinks.output.format {fmt!r} is not supported", "use parquet")
    audit = sinks.get("audit", True)
    if not isinstance(audit, bool):
        raise ConfigError(f"sinks.audit is {audit!r}", "write true (the default: per-event outcomes) or false")
    quarantine = sinks.get("quarantine")
    if quarantine is False:
        raise ConfigError(
            "sinks.quarantine cannot be turned off: bad input is never silently lost (SPEC §9)",
            "remove sinks.quarantine, or give it a place: quarantine: {path: ...}",
        )
    quarantine = {} if quarantine in (None, True) else _mapping(quarantine, "sinks.quarantine")
    _check_fields(quarantine, ("path",), "sinks.quarantine")
    return SinksSpec(
        output_path=_optional_text(output.get("path"), "sinks.output.path"),
        output_format=fmt,
        audit=audit,
        quarantine_path=_optional_text(quarantine.get("path"), "sinks.quarantine.path"),
    )
