"""Bounded fuzzing of the spec parser: any document parses or raises a Tidegate error.

Specs are written by hand and read by the controller, the drivers and Airflow tasks; a
mistake must come back as a :class:`TidegateError` (a :class:`ConfigError` naming the
field), never as a ValueError, TypeError, KeyError, AttributeError, OverflowError or
RecursionError with a traceback. Each example starts from a valid spec (the examples in
jobs/) and changes one to four things in it — a value replaced by anything YAML can hold
(NaN, infinities, huge numbers, text, lists, mappings, dates), a field removed, a field
added — or writes random Spark SQL into an expression field, or damages the YAML text
itself. A spec that does parse must survive ``to_dict`` round trips and everything the
runtime asks of it.
"""

from __future__ import annotations

import datetime as dt
import math
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidegate.errors import TidegateError
from tidegate.jobspec import JobSpec, load_spec, parse_spec

JOBS = Path(__file__).resolve().parents[2] / "jobs"
EXAMPLES = [yaml.safe_load(p.read_text()) for p in sorted(JOBS.glob("*.yaml"))]
EXAMPLE_TEXTS = [p.read_text() for p in sorted(JOBS.glob("*.yaml"))]
FUZZ = settings(max_examples=300, deadline=2000, database=None, suppress_health_check=[HealthCheck.too_slow])

FIELD_NAMES = [
    "name", "version", "description", "source", "payload", "timestamp_by", "time_format", "over", "policy",
    "filter", "select", "window", "group_by", "aggregates", "sinks", "event_log", "kafka", "max_events_per_batch",
    "max_arrival_span_per_batch", "max_payload_bytes", "max_payload_depth", "bootstrap_servers", "topic",
    "options", "out_of_order_tolerance", "out_of_order_action", "late_arrival_tolerance", "late_arrival_action",
    "early_arrival_window", "kind", "size", "hop", "offset", "gap", "max_duration", "output", "audit",
    "quarantine", "path", "format", "deviceId", "eventTime", "temperature", "partition", "window_end",
]  # fmt: skip
WORDS = [
    ".nan", ".inf", "-.inf", "nan", "inf", "1e400", "1e400s", "9" * 40 + "d", "0s", "5m", "1h30m", "-5s", "21d",
    "8d", "tumbling", "hopping", "sliding", "session", "adjust", "drop", "parquet", "string", "double", "bigint",
    "decimal(10,2)", "decimal(99,2)", "timestamp", "yyyy-MM-dd'T'HH:mm:ssX", "YYYY", "count(*)", "avg(temperature)",
    "reflect('java.lang.System', 'exit', 0)", "temperature > 30", "deviceId", "eventTime", "", " ", "é", "\x00",
    "`", "'", "\"", "(", ")", "--", "/*", "r'\\'", "select", "true", "null",
]  # fmt: skip
SQL_TOKENS = [
    "temperature", "deviceId", "eventTime", "humidity", "partition", "offset", "arrival_time", "key", "x", "t",
    "count", "avg", "max", "sum", "upper", "cast", "reflect", "java_method", "rand", "transform", "filter",
    "exists", "any", "over", "select", "within", "group", "as", "int", "decimal", "varchar", "and", "or", "not",
    "in", "like", "case", "when", "then", "else", "end", "is", "null", "(", ")", ",", ".", "*", "+", "-", "/",
    "%", "=", "<", ">", "<=", "::", "->", "=>", "||", "[", "]", "'a'", "'it''s'", "'\\''", "r'\\'", '"q"',
    "`temperature`", "`a``b`", "1", "1.5e3", "10L", "1e400", ".5", "--", "/*", "*/", "\n", "é", "$", "{", "}",
]  # fmt: skip

leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(WORDS)
    | st.dates()
    | st.datetimes(timezones=st.none() | st.just(dt.UTC))
    | st.binary(max_size=4)
)
# what breaks numbers and text: NaN, infinities, beyond int64 and float, empty, negative
SPECIAL = [math.nan, math.inf, -math.inf, 1e308, 5e-324, -1, 0, 2**31, 2**63, 2**200, -(2**80), "", " ", [], {}]
scalars = st.sampled_from(SPECIAL) | st.sampled_from(WORDS) | leaves
keys = st.sampled_from(FIELD_NAMES) | st.text(max_size=6) | st.integers(0, 3) | st.booleans() | st.none()
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
sql = st.lists(st.sampled_from(SQL_TOKENS), max_size=14).map(" ".join) | st.text(max_size=30)


def _paths(node, prefix=()):
    """Every place in a document a value can be replaced or removed: (parent path, key)."""
    if isinstance(node, dict):
        for key, child in node.items():
            yield prefix, key
            yield from _paths(child, prefix + (key,))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            yield prefix, i
            yield from _paths(child, prefix + (i,))


def _at(doc, path):
    for part in path:
        doc = doc[part]
    return doc


@st.composite
def mutated_specs(draw):
    doc = yaml.safe_load(yaml.safe_dump(draw(st.sampled_from(EXAMPLES))))  # a fresh copy
    for _ in range(draw(st.integers(1, 4))):
        places = list(_paths(doc))
        if not places:
            break
        parent_path, key = draw(st.sampled_from(places))
        parent = _at(doc, parent_path)
        action = draw(st.sampled_from(["replace", "replace", "remove", "add", "expression"]))
        if action == "remove":
            parent.pop(key)
        elif action == "add" and isinstance(parent, dict):
            parent[draw(keys)] = draw(values)
        elif action == "expression":
            where = draw(st.sampled_from(["filter", "select", "aggregates", "group_by"]))
            expr = draw(sql)
            doc[where] = expr if where == "filter" else {draw(st.sampled_from(["x", "t", "events"])): expr}
            if where == "group_by" and draw(st.booleans()):
                doc[where] = [doc[where]]
        else:
            parent[key] = draw(scalars if draw(st.integers(0, 3)) else values)
    if draw(st.booleans()) and isinstance(doc, dict):  # sometimes the whole document is replaced
        doc = doc if draw(st.integers(0, 9)) else draw(values)
    return doc


def _parses_or_says_why(parse) -> JobSpec | None:
    try:
        return parse()
    except TidegateError as exc:
        assert exc.problem and str(exc)  # something an operator can read
        return None


def _use(spec: JobSpec) -> None:
    """What the runtime asks of a parsed spec must not fail either."""
    again = parse_spec(spec.to_dict())
    assert again == spec and again.fingerprint == spec.fingerprint
    assert parse_spec(yaml.safe_load(yaml.safe_dump(spec.to_dict(), sort_keys=False))) == spec
    assert spec.describe() and spec.lookback_us >= 0
    for duration in (spec.lookback_us, spec.policy.late_arrival_tolerance_us, spec.policy.out_of_order_tolerance_us):
        assert 0 <= duration < 2**62  # fits the engine's int64 microseconds with room for a timestamp
    assert not any(isinstance(v, float) and not math.isfinite(v) for v in _leaves(spec.to_dict()))


def _leaves(node):
    if isinstance(node, dict):
        for v in node.values():
            yield from _leaves(v)
    elif isinstance(node, list):
        for v in node:
            yield from _leaves(v)
    else:
        yield node


@FUZZ
@given(mutated_specs())
def test_a_mutated_spec_parses_or_raises_a_tidegate_error(doc):
    spec = _parses_or_says_why(lambda: parse_spec(doc, origin="fuzz.yaml"))
    if spec is not None:
        _use(spec)


@FUZZ
@given(st.sampled_from(EXAMPLE_TEXTS), st.data())
def test_damaged_yaml_text_loads_or_raises_a_tidegate_error(text, data):
    raw = text.encode()
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw)))
        cut = data.draw(st.integers(0, 8))
        insert = data.draw(
            st.sampled_from([b"", b":", b" ", b"\n", b"- ", b"[", b"{", b"&a ", b"*a", b"!!python/object ", b".nan",
                             b"\t", b"\xff", b"\xc3", b"\xef\xbb\xbf", b"[[[[", b": .inf\n", b"1e400"])
            | st.text(max_size=4).map(str.encode)
            | st.binary(max_size=3)
        )  # fmt: skip
        raw = raw[:at] + insert + raw[at + cut :]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "job.yaml"
        path.write_bytes(raw)
        spec = _parses_or_says_why(lambda: load_spec(path))
    if spec is not None:
        _use(spec)


@FUZZ
@given(st.sampled_from(["filter", "select", "aggregates", "group_by"]), sql)
def test_any_text_in_an_expression_field_parses_or_raises_a_tidegate_error(where, expr):
    doc = yaml.safe_load(yaml.safe_dump(EXAMPLES[0]))
    if where in ("filter", "select"):
        for windowed in ("window", "group_by", "aggregates"):
            doc.pop(windowed, None)
    doc[where] = expr if where == "filter" else {"x": expr}
    if where == "group_by":
        doc[where] = [doc[where]]
    spec = _parses_or_says_why(lambda: parse_spec(doc, origin="fuzz.yaml"))
    if spec is not None:
        _use(spec)
