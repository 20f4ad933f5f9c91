"""Job spec files: what a job reads, how it times events, and what it computes.

A spec is YAML (reference: docs/jobspec.md). :func:`load_spec` reads a file,
:func:`parse_spec` a mapping; both return a frozen :class:`JobSpec` or raise
:class:`ConfigError` naming the field (``window.size``, ``aggregates.events``) and the fix.

Two numbers the runtime takes from a spec:

* :attr:`JobSpec.lookback_us` — SPEC §6: largest window span (session: max duration)
  + late-arrival tolerance + early-arrival window (5 min).
* :attr:`JobSpec.fingerprint` — a hash of exactly the parts that change results, so a
  checkpoint is never resumed under changed logic, and renaming, re-versioning,
  reformatting or moving sinks does not force a replay.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_duration, parse_duration_us
from tidegate.eventtime.policy import EARLY_WINDOW_US, TimePolicy
from tidegate.eventtime.windows import HoppingWindow, SessionWindow, SlidingWindow, TumblingWindow, Window
from tidegate.jobspec_expressions import PLAIN_NAME as _COLUMN
from tidegate.jobspec_expressions import (
    canonical_expression,
    check_expression,
    is_aggregate_function,
    normalise_expression,
)
from tidegate.jobspec_expressions import closest as _closest
from tidegate.jobspec_expressions import did_you_mean as _did_you_mean

# Columns every input row has besides its payload (the hub and Kafka sources agree).
BUILTIN_COLUMNS = ("partition", "offset", "arrival_time", "key")
# What window aggregates can read: buffered events carry their position and payload, not
# arrival_time or key (see spark/pipeline/engine.py `_window_rows`).
AGGREGATE_BUILTINS = ("partition", "offset")
# Names the engine gives its own columns, next to the payload's (payload fields may not take
# them); the output adds partition, offset, system_time per event, or window_start, window_end.
ENGINE_COLUMNS = frozenset(
    BUILTIN_COLUMNS
    + ("payload", "event_time", "system_time", "system_us", "arrival_us", "event_us")
    + ("window_start_us", "window_end_us")
)
_SELECT_RESERVED = frozenset(("partition", "offset", "system_time"))
_WINDOW_RESERVED = ENGINE_COLUMNS | {"window_start", "window_end"}
PAYLOAD_TYPES = ("string", "int", "bigint", "double", "float", "boolean", "timestamp", "date", "decimal(p,s)")
WINDOW_KINDS = ("tumbling", "hopping", "sliding", "session")
OUTPUT_FORMATS = ("parquet",)
FINGERPRINT_FORMAT = 1  # bump when the normalisation below changes (it forces replays)

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
    "policy", "filter", "select", "window", "group_by", "aggregates", "sinks",
)  # fmt: skip
_SOURCE_FIELDS = (
    "hub", "kafka", "max_events_per_batch", "max_arrival_span_per_batch", "max_payload_bytes", "max_payload_depth",
    "on_corrupt_frame",
)  # fmt: skip
ON_CORRUPT_FRAME = ("fail", "quarantine")  # what the job does at a damaged frame of the event log
_KAFKA_FIELDS = ("bootstrap_servers", "topic", "options")
_POLICY_FIELDS = ("out_of_order_tolerance", "out_of_order_action", "late_arrival_tolerance", "late_arrival_action")
_WINDOW_FIELDS = {
    "tumbling": ("size", "offset"),
    "hopping": ("size", "hop", "offset"),
    "sliding": ("size",),
    "session": ("gap", "max_duration"),
}
_SINKS_FIELDS = ("output", "audit", "quarantine")
_SECTION_FIELDS = {  # where a misplaced field belongs, for "did you mean policy.…?"
    "source": _SOURCE_FIELDS, "policy": _POLICY_FIELDS, "sinks": _SINKS_FIELDS,
    "window": ("kind", "size", "hop", "offset", "gap", "max_duration"),
}  # fmt: skip

NamedExprs = tuple[tuple[str, str], ...]


def tidegate_home(env: Mapping[str, str] | None = None) -> Path:
    """``$TIDEGATE_HOME``, default ``var`` (relative to the working directory)."""
    return Path((os.environ if env is None else env).get("TIDEGATE_HOME") or "var")


@dataclass(frozen=True)
class KafkaSpec:
    bootstrap_servers: str
    topic: str
    options: dict[str, str] = field(default_factory=dict)  # passed to Spark as kafka.<name>


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
class SinksSpec:
    """Outputs. A ``None`` path means the default under the job's region directory."""

    output_path: str | None = None
    output_format: str = "parquet"
    audit: bool = True  # one row per event: kept / adjusted / dropped, with the reason
    quarantine_path: str | None = None  # always written (SPEC §9)


@dataclass(frozen=True)
class JobSpec:
    name: str
    version: int
    payload: dict[str, str]  # field → Spark SQL type, in the order written
    description: str = ""
    source: SourceSpec = SourceSpec()
    timestamp_by: str | None = None  # None: event time = arrival time
    time_format: str | None = None  # None: ISO-8601
    over: str | None = None
    policy: TimePolicy = TimePolicy()
    filter: str | None = None
    select: NamedExprs = ()  # output column → expression; queries without a window
    window: Window | None = None
    group_by: NamedExprs = ()  # (name, expression); a plain field is (field, field)
    aggregates: NamedExprs = ()
    sinks: SinksSpec = SinksSpec()

    @property
    def needs_lookback(self) -> bool:
        """SPEC §3: queries without windows emit each event once judged; nothing to rebuild."""
        return self.window is not None

    @property
    def lookback_us(self) -> int:
        """SPEC §6: L = largest window span + late-arrival tolerance + early-arrival window.

        Without a window the span is 0; what is left is the stretch that decides the policy
        outcomes around the start time — the runtime may skip it (``needs_lookback``).
        """
        span = self.window.span_us if self.window is not None else 0
        return span + self.policy.late_arrival_tolerance_us + EARLY_WINDOW_US

    @property
    def fingerprint(self) -> str:
        """sha256 of the normalised parts that change results (not name, version,
        description, source, rate limits or sinks; payload limits only when not the defaults,
        so that adding them left every earlier fingerprint as it was)."""
        # with neither window nor select, the output columns follow the payload's order
        payload = list(self.payload.items())
        parts = {
            "format": FINGERPRINT_FORMAT,
            "payload": payload if self.window is None and not self.select else sorted(payload),
            "timestamp_by": self.timestamp_by,
            "time_format": self.time_format,
            "over": self.over,
            "policy": _policy_dict(self.policy, us=True),
            "filter": canonical_expression(self.filter) if self.filter else None,
            "select": [[n, canonical_expression(e)] for n, e in self.select],
            "window": _window_dict(self.window, us=True),
            "group_by": [[n, canonical_expression(e)] for n, e in self.group_by],
            "aggregates": [[n, canonical_expression(e)] for n, e in self.aggregates],
        }
        limits = self.source.payload_limits
        if limits != PayloadLimits():  # they decide which events are quarantined
            parts["payload_limits"] = [limits.max_payload_bytes, limits.max_payload_depth]
        text = json.dumps(parts, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """The normalised spec: durations in their shortest form, expressions with single
        spaces, defaults written out. ``parse_spec(spec.to_dict()) == spec``."""
        src, kafka = self.source, self.source.kafka
        source: dict[str, Any] = {"hub": src.hub}
        if kafka:
            options = dict(kafka.options)
            source = {"kafka": {"bootstrap_servers": kafka.bootstrap_servers, "topic": kafka.topic, "options": options}}
        if src.max_events_per_batch is not None:
            source["max_events_per_batch"] = src.max_events_per_batch
        if src.max_arrival_span_per_batch_us is not None:
            source["max_arrival_span_per_batch"] = format_duration(src.max_arrival_span_per_batch_us)
        for name in ("max_payload_bytes", "max_payload_depth"):
            if getattr(src.payload_limits, name) != getattr(PayloadLimits(), name):
                source[name] = getattr(src.payload_limits, name)
        if src.on_corrupt_frame != "fail":
            source["on_corrupt_frame"] = src.on_corrupt_frame
        out: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "source": source,
            "payload": dict(self.payload),
            "timestamp_by": self.timestamp_by,
            "time_format": self.time_format,
            "over": self.over,
        }
        if self.timestamp_by is not None:  # without it the tolerances cannot be set
            out["policy"] = _policy_dict(self.policy, us=False)
        out["filter"] = self.filter
        if self.window is None:
            out["select"] = dict(self.select) or None
        else:
            out["window"] = _window_dict(self.window, us=False)
            # a plain name reads back as a payload field; anything else keeps its {name: expression}
            out["group_by"] = [n if n == e and n in self.payload else {n: e} for n, e in self.group_by]
            out["aggregates"] = dict(self.aggregates)
        out["sinks"] = {
            "output": {"path": self.sinks.output_path, "format": self.sinks.output_format},
            "audit": self.sinks.audit,
            "quarantine": {"path": self.sinks.quarantine_path},
        }
        return out

    def describe(self) -> str:
        """One line an operator can read: what is computed, how events are timed."""
        if self.window is None:
            what = "each event"
            if self.select:
                what += " as " + ", ".join(n for n, _ in self.select)
        else:
            by = ", ".join(n for n, _ in self.group_by)
            what = f"{_window_text(self.window)} windows " + (f"by {by}" if by else "over all events")
            what += " → " + ", ".join(f"{n}={e}" for n, e in self.aggregates)
        if self.filter:
            what += f" where {self.filter}"
        timing = f"event time {self.timestamp_by}" if self.timestamp_by else "event time = arrival time"
        if self.over:
            timing += f", substreams over {self.over}"
        if self.timestamp_by:
            timing += f"; {self.policy.describe()}"
        lookback = format_duration(self.lookback_us) if self.needs_lookback else "none"
        return f"{what}; {timing}; look-back {lookback}"


# -- reading ---------------------------------------------------------------------------


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
    for required in ("name", "version", "payload"):
        if top.get(required) is None:
            raise ConfigError(f"{required} is missing", f"add it; see docs/jobspec.md ({_REQUIRED_HINT[required]})")
    name, version = _name(top["name"]), _version(top["version"])
    payload = _payload(top["payload"])
    timestamp_by = _field_ref(top.get("timestamp_by"), "timestamp_by", payload)
    if timestamp_by is not None and payload[timestamp_by] not in ("string", "timestamp"):
        raise ConfigError(
            f"timestamp_by: payload field {timestamp_by} is {payload[timestamp_by]}",
            "the event-time field must be a string (ISO-8601 or time_format) or a timestamp",
        )
    time_format = _time_format(top.get("time_format"), timestamp_by)
    window = _window(top.get("window"))
    _check_query_shape(window, top)
    group_by = _group_by(top.get("group_by"), payload)
    aggregates = _named_exprs(top.get("aggregates"), "aggregates", payload, AGGREGATE_BUILTINS, group_by)
    select = _select(top.get("select"), payload)
    _check_output_names(group_by + aggregates, "group_by and aggregates")
    filter_ = _optional_text(top.get("filter"), "filter")
    if filter_ is not None:
        filter_ = normalise_expression(filter_)
        check_expression(filter_, "filter", _columns(payload, BUILTIN_COLUMNS))
    return JobSpec(
        name=name,
        version=version,
        description=_optional_text(top.get("description"), "description") or "",
        source=_source(top.get("source")),
        payload=payload,
        timestamp_by=timestamp_by,
        time_format=time_format,
        over=_field_ref(top.get("over"), "over", payload),
        policy=_policy(top.get("policy"), timestamp_by),
        filter=filter_,
        select=select,
        window=window,
        group_by=group_by,
        aggregates=aggregates,
        sinks=_sinks(top.get("sinks")),
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


def _payload(value: Any) -> dict[str, str]:
    fields = _mapping(value, "payload")
    if not fields:
        raise ConfigError("payload is empty", "list the JSON fields the job reads, e.g. deviceId: string")
    out: dict[str, str] = {}
    for name, typ in fields.items():
        _column_name(name, f"payload.{name}", ENGINE_COLUMNS)
        out[name] = _payload_type(typ, f"payload.{name}")
    return out


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


def _time_format(value: Any, timestamp_by: str | None) -> str | None:
    """A Spark datetime pattern. Letters are pattern symbols; literal text goes in quotes."""
    pattern = _optional_text(value, "time_format")
    if pattern is None:
        return None
    if timestamp_by is None:
        raise ConfigError("time_format is set but timestamp_by is not", "set timestamp_by, or remove time_format")
    unquoted = re.sub(r"'[^']*'?", "", pattern)
    bad = sorted({c for c in unquoted if c.isalpha() and c not in _PATTERN_LETTERS})
    if bad:
        raise ConfigError(
            f"time_format {pattern!r}: {', '.join(bad)} {'is not a' if len(bad) == 1 else 'are not'} Spark datetime"
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


def _kafka(value: Any) -> KafkaSpec:
    kafka = _mapping(value, "source.kafka")
    _check_fields(kafka, _KAFKA_FIELDS, "source.kafka")
    required = {}
    for name in ("bootstrap_servers", "topic"):
        text = _optional_text(kafka.get(name), f"source.kafka.{name}")
        if not text:
            raise ConfigError(f"source.kafka.{name} is missing", "e.g. bootstrap_servers: broker1:9092, topic: devices")
        required[name] = text
    options = {}
    for key, val in _mapping(kafka.get("options") or {}, "source.kafka.options").items():
        if isinstance(val, (dict, list)) or val is None:
            raise ConfigError(f"source.kafka.options.{key} is not a single value", "Kafka options are text or numbers")
        options[str(key)] = str(val).lower() if isinstance(val, bool) else str(val)
    return KafkaSpec(options=options, **required)


def _policy(value: Any, timestamp_by: str | None) -> TimePolicy:
    policy = _mapping(value or {}, "policy")
    for key in policy:
        if key.startswith("early"):
            raise ConfigError(
                f"policy.{key} cannot be set: the early-arrival window is fixed at 5 minutes (SPEC §1)",
                "remove it; events more than 5m ahead of their arrival time are dropped as early input",
            )
    _check_fields(policy, _POLICY_FIELDS, "policy")
    if policy and timestamp_by is None:
        raise ConfigError(
            f"policy.{next(iter(policy))} has no effect without timestamp_by (event time is the arrival time, "
            "so no event is late, early or out of order)",
            "set timestamp_by to the payload field holding the event time, or remove policy",
        )
    for action in ("out_of_order_action", "late_arrival_action"):
        if action in policy and not isinstance(policy[action], str):
            raise ConfigError(f"policy.{action} is {policy[action]!r}", "use adjust (the default) or drop")

    defaults = TimePolicy()

    def tolerance(name: str) -> int:
        given = policy.get(name)
        return getattr(defaults, f"{name}_us") if given is None else _duration(given, f"policy.{name}")

    return TimePolicy(
        out_of_order_tolerance_us=tolerance("out_of_order_tolerance"),
        out_of_order_action=policy.get("out_of_order_action") or defaults.out_of_order_action,
        late_arrival_tolerance_us=tolerance("late_arrival_tolerance"),
        late_arrival_action=policy.get("late_arrival_action") or defaults.late_arrival_action,
    )


def _window(value: Any) -> Window | None:
    if value is None:
        return None
    spec = _mapping(value, "window")
    kind = spec.get("kind")
    if kind is None:
        raise ConfigError("window.kind is missing", "use one of " + ", ".join(WINDOW_KINDS))
    if not isinstance(kind, str) or kind.lower() not in WINDOW_KINDS:
        hint = _closest(str(kind).lower(), WINDOW_KINDS)
        raise ConfigError(
            f"window.kind {kind!r} is not a window kind" + (f" (did you mean {hint}?)" if hint else ""),
            "use one of " + ", ".join(WINDOW_KINDS),
        )
    kind = kind.lower()
    allowed = _WINDOW_FIELDS[kind]
    _check_fields(spec, _SECTION_FIELDS["window"], "window")
    for key in spec:
        if key != "kind" and key not in allowed:
            owners = [k for k, fields in _WINDOW_FIELDS.items() if key in fields]
            raise ConfigError(
                f"window.{key} does not apply to a {kind} window (only to {' and '.join(owners)} windows)",
                f"remove window.{key}, or use kind: {owners[0]}; a {kind} window takes " + ", ".join(allowed),
            )
    us = {}
    for key in allowed:
        if spec.get(key) is None:
            if key == "offset":
                continue
            needs = " and ".join(k for k in allowed if k != "offset")
            raise ConfigError(f"window.{key} is missing", f"a {kind} window needs {needs} (durations, e.g. 5m)")
        us[key] = _duration(spec[key], f"window.{key}")
    if kind == "tumbling":
        return TumblingWindow(us["size"], us.get("offset", 0))
    if kind == "hopping":
        return HoppingWindow(us["size"], us["hop"], us.get("offset", 0))
    if kind == "sliding":
        return SlidingWindow(us["size"])
    return SessionWindow(us["gap"], us["max_duration"])


def _group_by(value: Any, payload: dict[str, str]) -> NamedExprs:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    out: list[tuple[str, str]] = []
    for i, item in enumerate(items):
        where = f"group_by[{i}]" if isinstance(value, list) else "group_by"
        if isinstance(item, str):
            if item not in payload:
                raise ConfigError(
                    f"{where}: {item!r} is not a payload field" + _did_you_mean(item, payload),
                    f"group by one of {', '.join(payload)}, or by an expression under a name of its own,"
                    " e.g. - {hot: temperature > 30}",
                )
            out.append((item, item))
        elif isinstance(item, dict):
            out.extend(_named_exprs(item, where, payload, BUILTIN_COLUMNS, ()))
        else:
            raise ConfigError(f"{where} is {item!r}", "write a payload field name, or {name: expression}")
    for name, expr in out:
        if name in payload and expr != name:
            raise ConfigError(
                f"group_by: {name} names a payload field, so it can only group by that field, not by {expr!r}",
                f"give the expression its own name, e.g. {name}_group: {expr}",
            )
    return tuple(out)


def _select(value: Any, payload: dict[str, str]) -> NamedExprs:
    if value is None:
        return ()
    if isinstance(value, list):  # a plain list of columns keeps their names
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise ConfigError(f"select[{i}] is {item!r}", "write a column name, or use select: {name: expression}")
        value = {item: item for item in value}
    return _named_exprs(value, "select", payload, BUILTIN_COLUMNS, ())


def _named_exprs(
    value: Any, where: str, payload: dict[str, str], builtins: Iterable[str], extra: NamedExprs
) -> NamedExprs:
    """``{output column: Spark SQL expression}`` in the order written, each checked."""
    if value is None:
        return ()
    items = _mapping(value, where)
    known = _columns(payload, builtins, [n for n, _ in extra])
    out = []
    for name, expr in items.items():
        field_path = f"{where}.{name}"
        _column_name(name, field_path, _SELECT_RESERVED if where == "select" else _WINDOW_RESERVED)
        if isinstance(expr, bool) or not isinstance(expr, (str, int, float)) or not str(expr).strip():
            raise ConfigError(f"{field_path} is {expr!r}", "write a Spark SQL expression, e.g. avg(temperature)")
        text = normalise_expression(str(expr))
        calls = check_expression(text, field_path, known, aggregates=where == "aggregates")
        if where == "aggregates" and not any(is_aggregate_function(c) for c in calls):
            raise ConfigError(
                f"{field_path}: {text!r} is not an aggregate (no aggregate function such as count, sum, avg, min"
                " or max)",
                f"aggregate it, e.g. avg({text}), max({text}) or count(*)",
            )
        out.append((name, text))
    return tuple(out)


def _check_query_shape(window: Window | None, top: Mapping) -> None:
    """Per-event queries project (select); windowed queries aggregate. Not both."""
    if window is None:
        if top.get("aggregates"):
            raise ConfigError(
                "aggregates are set but there is no window",
                "add a window (e.g. window: {kind: tumbling, size: 1m}), or use select for a per-event projection",
            )
        if top.get("group_by"):
            raise ConfigError("group_by is set but there is no window", "add a window, or remove group_by")
        return
    if top.get("select"):
        raise ConfigError(
            "select cannot be used with a window: a windowed query outputs one row per window and group,"
            " whose columns are window_start, window_end, the group_by columns and the aggregates",
            "remove select and put per-window values under aggregates (e.g. avg_temp: avg(temperature));"
            " select is for queries without a window",
        )
    if not top.get("aggregates"):
        raise ConfigError(
            "window is set but aggregates are missing",
            "add what to compute per window, e.g. aggregates: {events: count(*), avg_temp: avg(temperature)}",
        )


def _check_output_names(named: NamedExprs, where: str) -> None:
    seen: set[str] = set()
    for name, _ in named:
        if name.lower() in seen:  # Spark column names are case-insensitive
            raise ConfigError(f"output column {name} appears twice in {where}", "rename one of them")
        seen.add(name.lower())


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


# -- small helpers ---------------------------------------------------------------------


def _columns(payload: Mapping[str, str], builtins: Iterable[str], extra: Iterable[str] = ()) -> list[str]:
    return list(payload) + [c for c in extra if c not in payload] + list(builtins)


def _mapping(value: Any, where: str) -> dict:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a mapping of name: value, got {value!r}", "see docs/jobspec.md")
    for key in value:
        if not isinstance(key, str):
            raise ConfigError(
                f"{where}: key {key!r} is not a name", "quote it (YAML reads yes/no/on/off and numbers as values)"
            )
    return dict(value)


def _check_fields(mapping: Mapping, known: tuple[str, ...], where: str) -> None:
    for key in mapping:
        if key in known:
            continue
        path = f"{where}.{key}" if where else key
        hint = _closest(key, known)
        if hint:
            fix = f"did you mean {(where + '.') if where else ''}{hint}?"
        else:
            homes = [f"{section}.{key}" for section, fields in _SECTION_FIELDS.items() if key in fields]
            fix = f"it belongs under {homes[0]}." if homes else ""
        raise ConfigError(f"unknown field {path}", f"{fix} Known fields here: {', '.join(known)}".strip())


def _column_name(name: str, where: str, reserved: frozenset[str]) -> None:
    if not _COLUMN.fullmatch(name):
        raise ConfigError(
            f"{where}: {name!r} is not a plain column name",
            "use letters, digits and '_', starting with a letter (a leading '_' is reserved for the engine)",
        )
    if name in reserved:
        raise ConfigError(
            f"{where}: {name!r} is a name the engine uses for its own column",
            "choose another name; taken here: " + ", ".join(sorted(reserved)),
        )


def _field_ref(value: Any, where: str, payload: Mapping[str, str]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in payload:
        raise ConfigError(
            f"{where}: {value!r} is not a payload field" + _did_you_mean(str(value), payload),
            f"use one of {', '.join(payload)}, or add the field to payload with its type",
        )
    return value


def _optional_text(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{where} is {value!r}, not text", "write it as text (quote it if YAML reads it otherwise)")
    return value.strip() or None


def _duration(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f"{where}: expected a duration, got {value!r}", "write e.g. 0s, 30s, 5m, 2h or 1d")
    return parse_duration_us(value, field=where)


def _policy_dict(policy: TimePolicy, *, us: bool) -> dict[str, Any]:
    def d(value: int) -> int | str:
        return value if us else format_duration(value)

    return {
        "out_of_order_tolerance": d(policy.out_of_order_tolerance_us),
        "out_of_order_action": policy.out_of_order_action,
        "late_arrival_tolerance": d(policy.late_arrival_tolerance_us),
        "late_arrival_action": policy.late_arrival_action,
    }


def _window_text(window: Window) -> str:
    if isinstance(window, SessionWindow):
        return f"session (gap {format_duration(window.gap_us)}, max {format_duration(window.max_duration_us)})"
    text = f"{window.kind} {format_duration(window.span_us)}"
    return text + (f" every {format_duration(window.hop_us)}" if isinstance(window, HoppingWindow) else "")


def _window_dict(window: Window | None, *, us: bool) -> dict[str, Any] | None:
    if window is None:
        return None
    fields = {"kind": window.kind}
    for name in _WINDOW_FIELDS[window.kind]:
        value = getattr(window, f"{name}_us")
        fields[name] = value if us else format_duration(value)
    return fields
