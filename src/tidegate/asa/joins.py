"""Stream Analytics' ``JOIN`` as the spec's ``inputs`` and ``join``, or its ``reference``.

* Two streams, ``FROM a JOIN b ON a.k = b.k AND DATEDIFF(unit, a, b) BETWEEN lo AND hi``: the
  spec's temporal join (jobspec.md#inputs-and-join), each input reading its own log with its own
  payload and ``TIMESTAMP BY``; the equalities are ``keys``, the ``DATEDIFF`` bound ``within``
  (both ends inclusive in both). ``LEFT [OUTER] JOIN`` is ``type: left``.
* A stream and an input the side file declares ``type: Reference``: the spec's ``reference``
  (jobspec.md#reference), each equality ``event expression = name.column`` a key. A stream
  and several reference inputs, ``FROM i JOIN devices d ON i.deviceId = d.deviceId JOIN sites s
  ON d.siteId = s.siteId``: the list form of ``reference``, in the query's order, a later
  table's keys reading the earlier ones (``devices.siteId``).

Expressions read each side by its input's name (``orders.amount``), not the query's alias.
Another condition in ``ON`` of an inner join is a ``filter``; of a left join it is refused (it
decides which rows are unmatched, which a filter after the join cannot). ``RIGHT``, ``FULL``,
``CROSS`` and a third input (but reference data) are refused.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from tidegate.asa.dialect import TimestampBy
from tidegate.asa.parts import ReferenceJoin, StreamInput, Translation, Translator


def join_type(tr: Translator, join: exp.Join) -> str:
    side, kind = (join.side or "").upper(), (join.kind or "").upper()
    if not side and kind in ("", "INNER"):
        return "inner"
    if side == "LEFT" and kind in ("", "OUTER"):
        return "left"
    raise tr.refuse(
        join, f"{' '.join(w for w in (side, kind) if w)} JOIN is not supported",
        "write JOIN (inner) or LEFT OUTER JOIN; a right join is the left join with the inputs swapped",
    )  # fmt: skip


def read_join(tr: Translator, select: exp.Select, result: Translation, references: frozenset[str]) -> str:
    """The inputs and join of the first SELECT; the name its step reads (the left input)."""
    joins = select.args["joins"]
    left, left_time = _table(tr, select.args["from_"].this)
    tables = [_table(tr, j.this) for j in joins]
    if len(joins) > 1 and any(t.name.lower() not in references for t, _ in tables):
        raise tr.refuse(joins[1], "a join of more than two inputs",
                        "join two inputs per job; only reference data may be joined more than once")  # fmt: skip
    join = joins[0]
    kind = join_type(tr, join)
    right, right_time = tables[0]
    if left.name.lower() in references:
        raise tr.refuse(left, f"FROM {left.name}: reference data first", "write FROM stream JOIN reference ON …")
    result.inputs.append(StreamInput(left.name))
    if right.name.lower() in references:
        tr.aliases = {left.alias_or_name.lower(): ""} | {t.alias_or_name.lower(): t.name for t, _ in tables}
        if left_time is not None:
            tr.time(left_time, result.inputs[0])
        for each, (table, timing) in zip(joins, tables, strict=True):  # in the query's order
            if timing is not None:
                raise tr.refuse(timing, "TIMESTAMP BY on reference data", "remove it: reference data has no time")
            _reference(tr, each, table.name, join_type(tr, each), result)
        return left.name
    tr.aliases = {left.alias_or_name.lower(): left.name, right.alias_or_name.lower(): right.name}
    result.inputs.append(StreamInput(right.name))
    for timing, stream in ((left_time, result.inputs[0]), (right_time, result.inputs[1])):
        if timing is not None:
            tr.time(timing, stream)
    tr.join = _temporal(tr, join, left.name, right.name, kind)
    return left.name


def _table(tr: Translator, node: exp.Expr) -> tuple[exp.Table, TimestampBy | None]:
    timing = node if isinstance(node, TimestampBy) else None
    table = node.this if timing is not None else node
    if not isinstance(table, exp.Table) or table.args.get("db"):
        raise tr.refuse(node, "JOIN reads something that is no input", "join two inputs by name")
    return table, timing


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    return _conjuncts(node.this) + _conjuncts(node.expression) if isinstance(node, exp.And) else [node]


def _reads(tr: Translator, node: exp.Expr) -> set[str]:
    """The inputs ``node`` reads, by the names expressions give them ('' for the stream of a
    reference join)."""
    return {tr.aliases.get(c.table.lower(), c.table) if c.table else "" for c in node.find_all(exp.Column)}


def _temporal(tr: Translator, join: exp.Join, left: str, right: str, kind: str) -> dict[str, Any]:
    keys: list[str] = []
    within: str | None = None
    for part in _conjuncts(join.args.get("on") or exp.true()):
        if isinstance(part, exp.Between) and isinstance(part.this, exp.DateDiff):
            within = _within(tr, part, {left, right})
        elif isinstance(part, exp.EQ) and {frozenset(_reads(tr, s)) for s in (part.this, part.expression)} == {
            frozenset({left}), frozenset({right}),
        }:  # fmt: skip
            keys.append(f"{tr.expression(part.this, windowed=False)} = {tr.expression(part.expression, False)}")
        else:
            _extra(tr, part, kind)
    on = join.args.get("on") or exp.true()
    bare = next((c for c in on.find_all(exp.Column) if not c.table and c.name.lower() not in tr.aliases), None)
    if bare is not None:
        raise tr.refuse(bare, f"{bare.name} without its input", f"write {left}.{bare.name} or {right}.{bare.name}")
    if within is None:
        raise tr.refuse(
            join, "a join of two streams without DATEDIFF(…) BETWEEN … in ON",
            f"bound it: ON … AND DATEDIFF(minute, {left}, {right}) BETWEEN 0 AND 15 (a join without a bound "
            "would hold both inputs forever)",
        )  # fmt: skip
    if not keys:
        raise tr.refuse(join, "a join without an equality of the two inputs", f"write ON {left}.k = {right}.k AND …")
    spec: dict[str, Any] = {"type": kind} if kind == "left" else {}
    return spec | {"left": left, "right": right, "keys": keys, "within": within}


def _within(tr: Translator, between: exp.Between, names: set[str]) -> str:
    diff = between.this
    sides = []
    for arg in (diff.expression, diff.this):  # DATEDIFF(unit, first, second): sqlglot keeps second as this
        arg = arg.this if isinstance(arg, exp.TimeStrToTime) else arg
        name = tr.aliases.get(arg.name.lower()) if isinstance(arg, exp.Column) and not arg.table else None
        if name not in names:
            raise tr.refuse(arg, f"DATEDIFF reads {arg.sql('tsql')}", "write DATEDIFF(unit, left, right)")
        sides.append(name)
    unit = str(diff.args["unit"].name).lower()
    low, high = (tr.expression(between.args[k], windowed=False) for k in ("low", "high"))
    return f"DATEDIFF({unit}, {sides[0]}, {sides[1]}) BETWEEN {low} AND {high}"


def _extra(tr: Translator, part: exp.Expr, kind: str) -> None:
    """A condition of ON that is neither a key nor the bound: a filter of an inner join."""
    if kind == "left":
        raise tr.refuse(
            part, f"ON … AND {part.sql('tsql')} in a LEFT OUTER JOIN",
            "keep ON to the key equalities and the DATEDIFF bound; filter the joined rows in WHERE",
        )  # fmt: skip
    tr.on_filters.append(part)


def _reference(tr: Translator, join: exp.Join, name: str, kind: str, result: Translation) -> None:
    keys: list[str] = []
    for part in _conjuncts(join.args.get("on") or exp.true()):
        if isinstance(part, exp.EQ):
            event, table = part.this, part.expression
            if _reads(tr, event) == {name}:
                event, table = table, event
            if _reads(tr, table) == {name} and isinstance(table, exp.Column) and name not in _reads(tr, event):
                keys.append(f"{tr.expression(event, windowed=False)} = {name}.{table.name}")
                continue
        if isinstance(part, exp.Between) and isinstance(part.this, exp.DateDiff):
            raise tr.refuse(part, "DATEDIFF on reference data", "remove it: an event joins the snapshot of its time")
        _extra(tr, part, kind)
    if not keys:
        raise tr.refuse(join, f"a reference join without an equality with a column of {name}",
                        f"write ON deviceId = {name}.deviceId")  # fmt: skip
    result.references.append(ReferenceJoin(name, keys, kind, tr.where(join, "JOIN")))
