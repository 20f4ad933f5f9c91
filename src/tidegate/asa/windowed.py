"""A windowed SELECT as the spec's ``group_by``, ``aggregates`` and ``having``: each key by its
name (or the name the SELECT gives it), each aggregate by its alias, HAVING over those names and
``System.Timestamp()`` as the window row's ``window_end``."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from tidegate.asa.expressions import anonymous_aggregate, is_timestamp
from tidegate.asa.parts import Step, Translator
from tidegate.asa.top import is_top, top_one


def windowed_step(
    tr: Translator, select: exp.Select, step: Step, keys: list[exp.Expr], whole: list[str] | None = None
) -> None:
    """A windowed SELECT's group keys, aggregates and HAVING as the step's fields; ``whole``:
    the fields of the event the SELECT reads, for ``TopOne()`` (:mod:`tidegate.asa.top`)."""
    aggregates: dict[str, str] = {}
    renamed: dict[str, str] = {}  # a key selected under another name: that name
    key_sql = {k.sql("tsql").lower(): k for k in keys}
    for item in select.expressions:
        value = item.this if isinstance(item, exp.Alias) else item
        if isinstance(value, exp.Star):
            raise tr.refuse(item, "SELECT * in a windowed query", "select the group keys and aggregates")
        if is_timestamp(value):
            name = item.alias if isinstance(item, exp.Alias) else "window_end"
            step.notes.append(tr.where(item, f"System.Timestamp() AS {name}: the window's end, window_end"))
            continue
        if is_top(value):
            aggregates[tr.output_name(item)] = top_one(tr, value, whole)
            continue
        if value.sql("tsql").lower() in key_sql:
            if isinstance(item, exp.Alias) and (item.alias != getattr(value, "name", None) or not _own(tr, value)):
                renamed[value.sql("tsql").lower()] = item.alias
            continue
        if not value.find(exp.AggFunc) and not anonymous_aggregate(value):
            raise tr.refuse(
                value, f"{value.sql('tsql')} is neither a group key nor an aggregate",
                "group by it, or aggregate it (MAX, AVG …)",
            )  # fmt: skip
        aggregates[tr.output_name(item)] = tr.expression(value, windowed=False)
    group_by: list[Any] = []
    for key in keys:
        alias = renamed.get(key.sql("tsql").lower())
        if _own(tr, key) and alias is None:
            group_by.append(key.name)
        elif alias is not None:
            group_by.append({alias: tr.expression(key, windowed=False)})
        else:
            raise tr.refuse(
                key, f"GROUP BY {key.sql('tsql')} has no name", f"select it with a name: {key.sql('tsql')} AS name"
            )
    if group_by:
        step.fields["group_by"] = group_by
        step.lines["group_by"] = tr.where(keys[0], "GROUP BY")
    if not aggregates:
        raise tr.refuse(select, "a windowed SELECT without an aggregate", "add e.g. COUNT(*) AS events")
    step.fields["aggregates"] = aggregates
    first_aggregate = next(i for i in select.expressions if tr.output_name(i) in aggregates)
    step.lines["aggregates"] = tr.where(first_aggregate, "SELECT")
    having = select.args.get("having")
    if having is not None:
        names = {v.lower(): k for k, v in aggregates.items()}
        step.fields["having"] = _having(tr, having.this, names, renamed)
        step.lines["having"] = tr.where(having, "HAVING")


def _own(tr: Translator, node: exp.Expr) -> bool:
    """``node`` is a field of the only input, named as it is: ``deviceId``, or ``e.deviceId``."""
    return isinstance(node, exp.Column) and (not node.table or tr.aliases.get(node.table.lower()) == "")


def _having(tr: Translator, condition: exp.Expr, aggregates: dict[str, str], renamed: dict[str, str]) -> str:
    """HAVING over the window row: each aggregate by the name the SELECT gives it."""

    def by_name(node: exp.Expr) -> exp.Expr:
        if is_timestamp(node):
            return exp.column("window_end")
        if node.sql("tsql").lower() in renamed:
            return exp.column(renamed[node.sql("tsql").lower()])
        if isinstance(node, exp.AggFunc) or anonymous_aggregate(node):
            name = aggregates.get(tr.expression(node, windowed=False).lower())
            if name is None:
                raise tr.refuse(
                    node, f"HAVING computes {node.sql('tsql')}, which the SELECT does not",
                    f"select it with a name ({node.sql('tsql')} AS name) and compare the name",
                )  # fmt: skip
            return exp.column(name)
        return node

    return tr.expression(condition.copy().transform(by_name), windowed=True)
