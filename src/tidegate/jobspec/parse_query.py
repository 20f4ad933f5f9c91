"""Parsing what a job computes: ``select``, or a ``window`` with ``group_by`` and ``aggregates``.

A per-event query projects (``select``: output column → expression); a windowed query
outputs one row per window and group (``window``, ``group_by``, ``aggregates``). Not both:
:func:`check_query_shape` says which section is missing or out of place. Each expression is
normalised and checked (:mod:`tidegate.jobspec.expressions`); output names are plain column
names, not ones the engine keeps, and appear once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tidegate.errors import ConfigError, excerpt
from tidegate.eventtime.sessions import EVERY_CHECK_POINT, OVER_MAX_DURATION, check_cut
from tidegate.eventtime.windows import (
    END_INCLUSIVE,
    HoppingWindow,
    SessionWindow,
    SlidingWindow,
    TumblingWindow,
    Window,
    check_edges,
)
from tidegate.jobspec.expressions import check_expression, function_calls, normalise_expression
from tidegate.jobspec.fields import BUILTIN_COLUMNS, ENGINE_COLUMNS
from tidegate.jobspec.fields import SECTION_FIELDS as _SECTION_FIELDS
from tidegate.jobspec.fields import check_fields as _check_fields
from tidegate.jobspec.fields import column_name as _column_name
from tidegate.jobspec.fields import columns as _columns
from tidegate.jobspec.fields import duration as _duration
from tidegate.jobspec.fields import mapping as _mapping
from tidegate.jobspec.fields import optional_text as _optional_text
from tidegate.jobspec.functions import is_aggregate_function
from tidegate.jobspec.hints import closest as _closest
from tidegate.jobspec.hints import did_you_mean as _did_you_mean
from tidegate.jobspec.model import NamedExprs
from tidegate.jobspec.window_form import WINDOW_FIELDS as _WINDOW_FIELDS
from tidegate.jobspec.window_form import WINDOW_OPTIONS as _WINDOW_OPTIONS

WINDOW_KINDS = ("tumbling", "hopping", "sliding", "session")
_SELECT_RESERVED = frozenset(("partition", "offset", "system_time"))
_WINDOW_RESERVED = ENGINE_COLUMNS | {"window_start", "window_end"}
ANALYTIC_RESERVED = ENGINE_COLUMNS | _SELECT_RESERVED


def parse_window(value: Any) -> Window | None:
    if value is None:
        return None
    spec = _mapping(value, "window")
    kind = spec.get("kind")
    if kind is None:
        raise ConfigError("window.kind is missing", "use one of " + ", ".join(WINDOW_KINDS))
    if not isinstance(kind, str) or kind.lower() not in WINDOW_KINDS:
        hint = _closest(str(kind).lower(), WINDOW_KINDS)
        raise ConfigError(
            f"window.kind {excerpt(kind)} is not a window kind" + (f" (did you mean {hint}?)" if hint else ""),
            "use one of " + ", ".join(WINDOW_KINDS),
        )
    kind = kind.lower()
    allowed = _WINDOW_FIELDS[kind]
    _check_fields(spec, _SECTION_FIELDS["window"], "window")
    for key in spec:
        if key != "kind" and key not in allowed + _WINDOW_OPTIONS[kind]:
            owners = [k for k, fields in _WINDOW_FIELDS.items() if key in fields + _WINDOW_OPTIONS[k]]
            raise ConfigError(
                f"window.{key} does not apply to a {kind} window (only to {' and '.join(owners)} windows)",
                f"remove window.{key}, or use kind: {owners[0]}; a {kind} window takes "
                + ", ".join(allowed + _WINDOW_OPTIONS[kind]),
            )
    us = {}
    for key in allowed:
        if spec.get(key) is None:
            if key == "offset":
                continue
            needs = " and ".join(k for k in allowed if k != "offset")
            raise ConfigError(f"window.{key} is missing", f"a {kind} window needs {needs} (durations, e.g. 5m)")
        us[key] = _offset(spec[key]) if key == "offset" else _duration(spec[key], f"window.{key}")
    edges = spec.get("edges", END_INCLUSIVE)
    if not isinstance(edges, str):
        raise ConfigError(f"window.edges is {excerpt(edges)}", "write end_inclusive (the default) or start_inclusive")
    check_edges(edges.lower())
    edges = edges.lower()
    cut = spec.get("cut", OVER_MAX_DURATION)
    if not isinstance(cut, str):
        raise ConfigError(
            f"window.cut is {excerpt(cut)}", f"write {OVER_MAX_DURATION} (the default) or {EVERY_CHECK_POINT}"
        )
    check_cut(cut.lower())
    if kind == "tumbling":
        return TumblingWindow(us["size"], us.get("offset", 0), edges)
    if kind == "hopping":
        return HoppingWindow(us["size"], us["hop"], us.get("offset", 0), edges)
    if kind == "sliding":
        return SlidingWindow(us["size"])
    return SessionWindow(us["gap"], us["max_duration"], edges, cut.lower())


def _offset(value: Any) -> int:
    """``window.offset``: a duration, negative with a leading ``-`` (Stream Analytics'
    ``Offset(millisecond, -1)`` is ``-1ms``)."""
    if isinstance(value, str) and value.strip().startswith("-"):
        return -_duration(value.strip()[1:], "window.offset")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        return -_duration(-value, "window.offset")
    return _duration(value, "window.offset")


def parse_group_by(value: Any, payload: dict[str, str], builtins: Iterable[str] = BUILTIN_COLUMNS) -> NamedExprs:
    """``builtins``: the columns besides ``payload`` an expression may read."""
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    out: list[tuple[str, str]] = []
    for i, item in enumerate(items):
        where = f"group_by[{i}]" if isinstance(value, list) else "group_by"
        if isinstance(item, str):
            if item not in payload:
                raise ConfigError(
                    f"{where}: {excerpt(item)} is not a payload field" + _did_you_mean(item, payload),
                    f"group by one of {', '.join(payload)}, or by an expression under a name of its own,"
                    " e.g. - {hot: temperature > 30}",
                )
            out.append((item, item))
        elif isinstance(item, dict):
            out.extend(parse_named_exprs(item, where, payload, builtins, ()))
        else:
            raise ConfigError(f"{where} is {excerpt(item)}", "write a payload field name, or {name: expression}")
    for name, expr in out:
        if name in payload and expr != name:
            raise ConfigError(
                f"group_by: {name} names a payload field, so it can only group by that field, not by {excerpt(expr)}",
                f"give the expression its own name, e.g. {name}_group: {expr}",
            )
    return tuple(out)


def parse_select(value: Any, payload: dict[str, str], analytics: NamedExprs = ()) -> NamedExprs:
    """``analytics``: the analytic columns, which select may read (and list by name)."""
    if value is None:
        return ()
    if isinstance(value, list):  # a plain list of columns keeps their names
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise ConfigError(
                    f"select[{i}] is {excerpt(item)}", "write a column name, or use select: {name: expression}"
                )
        value = {item: item for item in value}
    return parse_named_exprs(value, "select", payload, BUILTIN_COLUMNS, analytics)


def parse_named_exprs(
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
            raise ConfigError(f"{field_path} is {excerpt(expr)}", "write a Spark SQL expression, e.g. avg(temperature)")
        text = normalise_expression(str(expr))
        calls = check_expression(text, field_path, known, aggregates=where == "aggregates")
        if where == "aggregates" and not any(is_aggregate_function(c) for c in calls):
            raise ConfigError(
                f"{field_path}: {excerpt(text)} is not an aggregate (no aggregate function such as count, sum, avg, min"
                " or max)",
                f"aggregate it, e.g. avg({text}), max({text}) or count(*)",
            )
        out.append((name, text))
    return tuple(out)


def parse_having(value: Any, window: Window | None, group_by: NamedExprs, aggregates: NamedExprs) -> str | None:
    """``having`` (Stream Analytics' HAVING): a condition on each window row, after the window —
    so over the row's columns only: ``window_start``, ``window_end``, the group_by columns and
    the aggregates, each by its output name. An aggregate is computed under ``aggregates`` and
    compared here; a condition on single events is the ``filter``, before the window."""
    text = _optional_text(value, "having")
    if text is None:
        return None
    if window is None:
        raise ConfigError(
            "having is set but there is no window: it keeps or drops a window's rows",
            "add a window with aggregates, or use filter to keep or drop events",
        )
    text = normalise_expression(text)
    row = ["window_start", "window_end", *(n for n, _ in group_by + aggregates)]
    aggregated = [c for c in function_calls(text) if is_aggregate_function(c)]
    if aggregated:
        raise ConfigError(
            f"having: {excerpt(text)} calls {aggregated[0]}, an aggregate; having reads the window's rows, not its"
            " events",
            f"compute it under aggregates (e.g. n: {aggregated[0]}(…)) and compare it by name here (having: n > 3)",
        )
    try:
        check_expression(text, "having", row)
    except ConfigError as exc:
        if "unknown column" not in exc.problem:
            raise
        raise ConfigError(
            exc.problem + " — having reads a window row's columns, after the window",
            f"compare the row's columns ({', '.join(row)}): aggregate a payload field under aggregates"
            " (e.g. avg_temperature: avg(temperature)) and write having: avg_temperature > 30, or keep or drop"
            " events before the window with filter",
        ) from None
    return text


def check_query_shape(window: Window | None, top: Mapping) -> None:
    """Per-event queries project (select), with analytic columns or without; windowed
    queries aggregate. Not both."""
    if window is not None and top.get("analytics"):
        raise ConfigError(
            "analytics cannot be used with a window in one step: analytic functions give one value per event",
            "write two steps (steps:): the analytics (with select and filter) in the first, the window in a"
            " second that reads it",
        )
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


def check_output_names(named: NamedExprs, where: str) -> None:
    seen: set[str] = set()
    for name, _ in named:
        if name.lower() in seen:  # Spark column names are case-insensitive
            raise ConfigError(f"output column {name} appears twice in {where}", "rename one of them")
        seen.add(name.lower())
