"""The ``inputs`` and ``join`` sections: a temporal join of two inputs, read without Spark.

A job with several inputs names them; each input is the job's source seen through its own
``filter`` ("one log filtered two ways"), with the job's payload, event time and policy — or
reads its own log (``source``) with its own ``payload``, ``timestamp_by``, ``time_format`` and
``policy`` (:class:`~tidegate.jobspec.source.InputSource`; :mod:`tidegate.inputs.log_set` lays the
logs end to end as the job's partitions)::

    inputs:
      orders: {filter: "kind = 'order'"}
      payments: {filter: "kind = 'payment'"}
    join:
      type: left                                   # inner (the default) or left (left outer)
      left: orders
      right: payments
      keys: [orders.orderId = payments.orderId]    # equality keys, at least one
      within: DATEDIFF(minute, orders, payments) BETWEEN 0 AND 15

Expressions after the join (``keys``, ``select``, ``filter``) read each side's columns as
``<input>.<field>``: its payload fields and ``partition``, ``offset``, ``arrival_time`` and
``system_time``. What a match is, each row's time and when it is final are
:mod:`tidegate.eventtime.joins`'s. Errors name the field (``join.keys[0]``) and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tidegate.errors import ConfigError, excerpt
from tidegate.eventtime.durations import MAX_DURATION_US
from tidegate.eventtime.joins import TemporalJoin
from tidegate.jobspec.analytics import TIME_UNITS, UNIT_HINT, type_family
from tidegate.jobspec.expressions import canonical_expression, check_expression, normalise_expression, token_spans
from tidegate.jobspec.fields import added_column_name, check_fields, column_name, mapping, optional_text
from tidegate.jobspec.numbers import whole_number
from tidegate.jobspec.source import InputSource

JOIN_FIELDS = ("type", "left", "right", "keys", "within")  # not "on": YAML reads it as true
OWN_FIELDS = ("source", "payload", "timestamp_by", "time_format", "policy")  # an input that reads its own log
INPUT_FIELDS = ("filter", *OWN_FIELDS)
# what each side of a join carries besides its payload, and their types
SIDE_COLUMNS = {"partition": "int", "offset": "bigint", "arrival_time": "timestamp", "system_time": "timestamp"}
_TYPES = {"inner": "inner", "left": "left", "left_outer": "left", "left outer": "left"}
_WITHIN = re.compile(
    r"DATEDIFF\s*\(\s*(?P<unit>\w+)\s*,\s*(?P<a>\w+)\s*,\s*(?P<b>\w+)\s*\)"
    r"\s+BETWEEN\s+(?P<lo>-?\s*\d+)\s+AND\s+(?P<hi>-?\s*\d+)",
    re.I,
)


@dataclass(frozen=True)
class InputSpec:
    """One named input: the job's source through ``filter`` (None: every event) — or, with
    ``own``, its own log, payload, event time and policy, and its own partitions."""

    name: str
    filter: str | None = None
    own: InputSource | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"filter": self.filter} if self.filter else {}
        return out | (self.own.to_dict() if self.own is not None else {})

    def canonical(self) -> list:
        """What the fingerprint hashes (an input of the job's source: its name and filter, as before)."""
        out = [self.name, canonical_expression(self.filter) if self.filter else None]
        return out + ([self.own.canonical()] if self.own is not None else [])


@dataclass(frozen=True)
class JoinSpec:
    """``left`` JOIN ``right`` ON the keys, within the bound (:class:`TemporalJoin`)."""

    left: str
    right: str
    keys: tuple[tuple[str, str], ...]  # (left expression, right expression), e.g. orders.id, payments.id
    join: TemporalJoin
    unit: str = "second"  # the DATEDIFF unit as written (long name); the bounds are whole ones

    @property
    def span_us(self) -> int:
        return self.join.span_us

    def within_text(self) -> str:
        size = TIME_UNITS[self.unit]
        return (f"DATEDIFF({self.unit}, {self.left}, {self.right}) "
                f"BETWEEN {self.join.lo_us // size} AND {self.join.hi_us // size}")  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.join.kind, "left": self.left, "right": self.right,
                "keys": [f"{a} = {b}" for a, b in self.keys], "within": self.within_text()}  # fmt: skip

    def canonical(self) -> list:
        """What the fingerprint hashes: sides, kind, bound in µs, keys token by token."""
        return [self.left, self.right, self.join.kind, self.join.lo_us, self.join.hi_us,
                [[canonical_expression(a), canonical_expression(b)] for a, b in self.keys]]  # fmt: skip

    def describe(self) -> str:
        kind = "left outer join" if self.join.kind == "left" else "join"
        on = " and ".join(f"{a} = {b}" for a, b in self.keys)
        return f"{self.left} {kind} {self.right} on {on} within {self.within_text()}"


def side_payloads(inputs: Iterable[InputSpec], payload: Mapping[str, str]) -> dict[str, Mapping[str, str]]:
    """Each input's payload fields: its own, or the job's."""
    return {i.name: (i.own.payload if i.own is not None else payload) for i in inputs}


def parse_inputs(value: Any, payload: Mapping[str, str], builtins: Iterable[str], reserved: frozenset[str],
                 own_input: Callable[[Mapping[str, Any], str], InputSource]) -> tuple[InputSpec, ...]:  # fmt: skip
    """``inputs``; ``own_input(own fields, where)`` reads an input's own source, payload,
    event time and policy (the job's where not given). When one input has any, every input
    reads its own log and has its own partitions."""
    if value is None:
        return ()
    items = mapping(value, "inputs")
    if len(items) != 2:
        raise ConfigError(
            f"inputs names {len(items)} input{'s' if len(items) != 1 else ''} ({', '.join(items) or 'none'})",
            "a job reads one input, or two that it joins: name two, e.g. orders and payments, or remove inputs",
        )
    bodies = {name: mapping(body or {}, f"inputs.{name}") for name, body in items.items()}
    own_logs = any(k in body for body in bodies.values() for k in OWN_FIELDS)
    out = []
    for name, body in bodies.items():
        where = f"inputs.{name}"
        added_column_name(name, where, reserved, payload, "input", "_events")
        if "over" in body:
            raise ConfigError(f"{where}.over: substreams cannot be used in a join job yet",
                              f"remove {where}.over; the inputs' partitions are their units")  # fmt: skip
        check_fields(body, INPUT_FIELDS, where)
        own = own_input({k: body[k] for k in OWN_FIELDS if k in body}, where) if own_logs else None
        known_payload = own.payload if own is not None else payload
        known = list(known_payload) + [b for b in builtins if b not in known_payload]
        text = optional_text(body.get("filter"), f"{where}.filter")
        if text is not None:
            text = normalise_expression(text)
            check_expression(text, f"{where}.filter", known)
        out.append(InputSpec(name, text, own))
    return tuple(out)


def union_payload(inputs: Iterable[InputSpec], payload: Mapping[str, str]) -> dict[str, str]:
    """The fields of every input's payload, in order: the job's columns. A name two inputs
    give different types is refused (a joined side carries every field, NULL where not its own)."""
    out = dict(payload)
    origin = {name: "payload" for name in payload}
    for i in inputs:
        if i.own is None:
            continue
        for name, typ in i.own.payload.items():
            if name in out and out[name] != typ:
                raise ConfigError(
                    f"inputs.{i.name}.payload.{name} is {typ} but {origin[name]}.{name} is {out[name]}",
                    "give a field one type in every input that reads it (read it as string in both and cast in select)",
                )
            out.setdefault(name, typ)
            origin.setdefault(name, f"inputs.{i.name}.payload")
    return out


def parse_join(value: Any, inputs: tuple[InputSpec, ...], payloads: Mapping[str, Mapping[str, str]]) -> JoinSpec | None:
    if value is None:
        if inputs:
            raise ConfigError(
                "inputs are set but join is not: a job with two inputs joins them",
                "add join: {left: …, right: …, keys: […], within: DATEDIFF(…) BETWEEN … AND …}",
            )
        return None
    if not inputs:
        raise ConfigError(
            "join is set but inputs are not",
            "name the two inputs it joins, e.g. inputs: {orders: {filter: \"kind = 'order'\"}, "
            "payments: {filter: \"kind = 'payment'\"}}",
        )
    return parse_join_section(value, [i.name for i in inputs], payloads)


def parse_join_section(value: Any, names: list[str], payloads: Mapping[str, Mapping[str, str]], noun: str = "input",
                       side_columns: Mapping[str, str] = SIDE_COLUMNS) -> JoinSpec:  # fmt: skip
    """``join`` over two of ``names`` — the job's inputs, or (``noun`` "step") earlier steps —
    whose columns are ``payloads`` and ``side_columns``."""
    section = mapping(value, "join")
    check_fields(section, JOIN_FIELDS, "join")
    kind_text = optional_text(section.get("type"), "join.type") or "inner"
    kind = _TYPES.get(kind_text.lower())
    if kind is None:
        raise ConfigError(f"join.type is {excerpt(kind_text)}", "use inner (the default) or left (left outer)")
    left, right = (_side(section.get(s), f"join.{s}", names, noun) for s in ("left", "right"))
    if left == right:
        raise ConfigError(
            f"join.right is {right}, the same {noun} as join.left",
            f"join two different {noun}s" + (" (an input may repeat another's filter)" if noun == "input" else ""),
        )
    within = optional_text(section.get("within"), "join.within")
    if within is None:
        raise ConfigError(
            "join.within is missing: a join without a time bound would hold every event of both inputs forever",
            f"bound it, e.g. within: DATEDIFF(minute, {left}, {right}) BETWEEN 0 AND 15",
        )
    unit, lo, hi = _within(within, left, right, noun)
    try:
        join = TemporalJoin(lo, hi, kind)
    except ConfigError as exc:
        raise ConfigError(f"join.within: {exc.problem}", exc.fix) from None
    keys = _keys(section.get("keys"), left, right, payloads, side_columns)
    return JoinSpec(left, right, keys, join, unit)


def _side(value: Any, where: str, names: list[str], noun: str) -> str:
    text = optional_text(value, where)
    if text is None:
        raise ConfigError(f"{where} is missing", f"name one of the {noun}s: {', '.join(names)}")
    if text not in names:
        raise ConfigError(f"{where}: {excerpt(text)} is not {_a(noun)}", f"name one of the {noun}s: {', '.join(names)}")
    return text


def _a(noun: str) -> str:
    return f"an {noun}" if noun[0] in "aeiou" else f"a {noun}"


def _within(text: str, left: str, right: str, noun: str = "input") -> tuple[str, int, int]:
    """``DATEDIFF(unit, left, right) BETWEEN lo AND hi`` → (unit, lo µs, hi µs), for
    ``right − left``; written with the sides swapped, the bound is turned around."""
    m = _WITHIN.fullmatch(" ".join(text.split()))
    if m is None:
        raise ConfigError(
            f"join.within: cannot read {excerpt(text)}",
            f"write DATEDIFF(unit, {left}, {right}) BETWEEN lo AND hi, e.g. BETWEEN 0 AND 15",
        )
    unit = m["unit"].lower()
    size = TIME_UNITS.get(unit) or TIME_UNITS.get(unit.rstrip("s"))
    if size is None:
        raise ConfigError(f"join.within: {excerpt(m['unit'])} is not a time unit", UNIT_HINT)
    unit = next(u for u, s in TIME_UNITS.items() if s == size)  # the long name: day, hour, …
    lo, hi = (_signed(m[k], f"join.within: the {k} bound", MAX_DURATION_US // size, unit) * size for k in ("lo", "hi"))
    sides = (m["a"], m["b"])
    if sides == (left, right):
        return unit, lo, hi
    if sides == (right, left):
        return unit, -hi, -lo
    raise ConfigError(
        f"join.within: DATEDIFF reads {sides[0]} and {sides[1]}, not the join's {noun}s",
        f"write DATEDIFF({m['unit']}, {left}, {right}): the time from a {left} row to a {right} row",
    )


def _signed(text: str, where: str, high: int, unit: str) -> int:
    r"""``-?\s*digits`` of a bound, the digits read by :func:`whole_number`."""
    digits = text.replace(" ", "")
    sign = -1 if digits.startswith("-") else 1
    return sign * whole_number(digits.removeprefix("-"), where, 0, high, f"{unit}s")


def _keys(value: Any, left: str, right: str, payloads: Mapping[str, Mapping[str, str]],
          side_columns: Mapping[str, str] = SIDE_COLUMNS) -> tuple[tuple[str, str], ...]:  # fmt: skip
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else None
    if not items:
        raise ConfigError(
            f"join.keys is {excerpt(value)}: a temporal join needs at least one equality key",
            f"write keys: [{left}.<field> = {right}.<field>]",
        )
    out = []
    for n, item in enumerate(items):
        where = f"join.keys[{n}]"
        text, a, b = equality_sides(item, where, f"{left}.id = {right}.id")
        sides = [check_side_expression(e, where, [left, right], payloads, side_columns) for e in (a, b)]
        if sides == [{right}, {left}]:
            a, b, sides = b, a, sides[::-1]
        if sides != [{left}, {right}]:
            raise ConfigError(
                f"{where}: {excerpt(text)} must compare a {left} expression with a {right} expression",
                f"write {left}.<field> = {right}.<field>, each side reading one of them only",
            )
        fa = type_family(_unqualified(a), dict(payloads[left]) | dict(side_columns))
        fb = type_family(_unqualified(b), dict(payloads[right]) | dict(side_columns))
        if fa and fb and "null" not in (fa, fb) and fa != fb:
            raise ConfigError(
                f"{where}: {a} is a {fa} but {b} is a {fb}: the keys never compare equal",
                f"compare values of one type, e.g. CAST({b} AS {_cast_name(fa)})",
            )
        out.append((a, b))
    return tuple(out)


def equality_sides(item: Any, where: str, example: str) -> tuple[str, str, str]:
    """One equality of a ``keys`` list, ``a = b``: (its text normalised, a, b)."""
    if not isinstance(item, str) or not item.strip():
        raise ConfigError(f"{where} is {excerpt(item)}", f"write one equality, e.g. {example}")
    text = normalise_expression(item)
    eq = [t for t in token_spans(text) if t[0] == "symbol" and t[1] in ("=", "==")]
    if len(eq) != 1:
        raise ConfigError(f"{where}: {excerpt(text)} is not one equality", f"write e.g. {example}")
    return text, text[: eq[0][2]].strip(), text[eq[0][3] :].strip()


def check_side_expression(
    expr: str,
    where: str,
    sides: list[str],
    payloads: Mapping[str, Mapping[str, str]],
    side_columns: Mapping[str, str] = SIDE_COLUMNS,
) -> set[str]:
    """Check an expression over a joined row; returns the sides it reads. A field after
    ``<input>.`` must be a field of that input's payload or one of ``side_columns``
    (:data:`SIDE_COLUMNS`; a step's side: its columns are its payload, and none)."""
    check_expression(expr, where, sides)
    toks = token_spans(expr)
    read = set()
    for i, t in enumerate(toks):
        if t[0] == "word" and t[1] in sides and i + 2 < len(toks) and toks[i + 1][1] == ".":
            field = toks[i + 2][1].strip("`")
            if field not in payloads[t[1]] and field not in side_columns:
                whose = f"input {t[1]}" if side_columns is SIDE_COLUMNS else t[1]
                raise ConfigError(
                    f"{where}: {t[1]}.{field} is not a column of {whose}",
                    f"use one of {', '.join([*payloads[t[1]], *side_columns])}",
                )
            read.add(t[1])
        elif t[0] == "word" and t[1] in sides and (i + 1 >= len(toks) or toks[i + 1][1] != "."):
            raise ConfigError(f"{where}: {t[1]} is a whole input, not a value", f"name a field, e.g. {t[1]}.<field>")
    return read


def _unqualified(expr: str) -> str:
    toks = token_spans(expr)
    return toks[2][1] if len(toks) == 3 and toks[1][1] == "." else expr


def _cast_name(family: str) -> str:
    return {"number": "bigint"}.get(family, family)


# the columns a join's output row carries before its select: the left event's position, the
# right event's (NULL when unmatched) and the row's output time
OUTPUT_POSITION = ("partition", "offset", "right_partition", "right_offset", "system_time")


def parse_join_select(
    value: Any,
    join: JoinSpec,
    payloads: Mapping[str, Mapping[str, str]],
    side_columns: Mapping[str, str] = SIDE_COLUMNS,
) -> tuple[tuple[str, str], ...]:
    """``select`` of a join: output column → expression over ``<input>.<field>``; required,
    since the two inputs share their field names."""
    if not value:
        raise ConfigError(
            "select is missing: a join's output columns are named, both inputs having the same fields",
            f"add e.g. select: {{id: {join.left}.<field>, paid_at: {join.right}.system_time}}",
        )
    items = mapping(value, "select")
    out = []
    for name, expr in items.items():
        where = f"select.{name}"
        column_name(name, where, frozenset(OUTPUT_POSITION))
        if isinstance(expr, bool) or not isinstance(expr, (str, int, float)) or not str(expr).strip():
            raise ConfigError(f"{where} is {excerpt(expr)}", f"write a Spark SQL expression, e.g. {join.left}.<field>")
        text = normalise_expression(str(expr))
        check_side_expression(text, where, [join.left, join.right], payloads, side_columns)
        out.append((name, text))
    return tuple(out)


def check_join_shape(top: Mapping[str, Any]) -> None:
    """What a join job cannot have yet, each with the field named."""
    for key, why in (("window", "windows over a join"), ("analytics", "analytic functions over a join"),
                     ("group_by", "group_by"), ("aggregates", "aggregates"), ("over", "substreams (over)"),
                     ("watermark", "a percentile watermark")):  # fmt: skip
        if top.get(key) is not None:
            fix = (
                f"remove {key}; join in the first step and window its rows in a step that reads it (steps:)"
                if key in ("window", "group_by", "aggregates")
                else f"remove {key}; join in one job and compute over its output in a second job"
            )
            raise ConfigError(f"{key}: {why} cannot be used in a join step", fix)
