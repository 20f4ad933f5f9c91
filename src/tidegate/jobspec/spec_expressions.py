"""Every Spark SQL expression a loaded job spec will run, with the field it came from.

The spec's checks read each expression where it is parsed; the Spark side reads them all
again, with Spark's own parser, before a query starts (:mod:`tidegate.spark.expression_guard`).
This is the one list both see.
"""

from __future__ import annotations

from typing import NamedTuple

from tidegate.jobspec.expressions import reads_column
from tidegate.jobspec.fields import HEADERS
from tidegate.jobspec.model import JobSpec
from tidegate.jobspec.timestamp_by import time_field


class SpecExpression(NamedTuple):
    where: str  # the field, as errors name it: "filter", "select.temp_f", "aggregates.n"
    text: str
    aggregates: bool  # aggregate functions allowed (the aggregates field)


def spec_expressions(spec: JobSpec) -> list[SpecExpression]:
    """The expressions of ``spec`` in the order of its fields."""
    out: list[SpecExpression] = []
    if time_field(spec.timestamp_by, spec.payload) is None and spec.timestamp_by:  # an expression, not a field
        out.append(SpecExpression("timestamp_by", spec.timestamp_by, False))
    for i in spec.inputs:
        if i.own is not None and i.own.timestamp_by and time_field(i.own.timestamp_by, i.own.payload) is None:
            out.append(SpecExpression(f"inputs.{i.name}.timestamp_by", i.own.timestamp_by, False))
    if spec.filter:
        out.append(SpecExpression("filter", spec.filter, False))
    out += [SpecExpression(f"select.{name}", text, False) for name, text in spec.select]
    out += [SpecExpression(f"group_by.{name}", text, False) for name, text in spec.group_by]
    out += [SpecExpression(f"aggregates.{name}", text, True) for name, text in spec.aggregates]
    out += [SpecExpression("having", spec.having, False)] if spec.having else []
    for a in spec.analytics:
        where = f"analytics.{a.name}"
        out += [
            SpecExpression(f"{where} ({part})", text, False)
            for part, text in (("value", a.expression), ("default", a.default), ("WHEN", a.when))
            if text
        ]
        out += [SpecExpression(f"{where} (PARTITION BY)", text, False) for text in a.partition_by]
    for i in spec.inputs:
        if i.filter:
            out.append(SpecExpression(f"inputs.{i.name}.filter", i.filter, False))
    if spec.join is not None:
        for n, (left, right) in enumerate(spec.join.keys):
            out += [SpecExpression(f"join.keys[{n}]", left, False), SpecExpression(f"join.keys[{n}]", right, False)]
    for t, ref in enumerate(spec.references):  # the event's side of each key (the other is a column of the table)
        table = "reference" if len(spec.references) == 1 else f"reference[{t}]"
        out += [SpecExpression(f"{table}.keys[{n}]", text, False) for n, (text, _) in enumerate(ref.keys)]
    for n, step in enumerate(spec.steps, start=1):
        where = f"steps[{n}] ({step.name})"
        out += [SpecExpression(f"{where} filter", step.filter, False)] if step.filter else []
        out += [SpecExpression(f"{where} select.{name}", text, False) for name, text in step.select]
        for a in step.analytics:
            parts = [a.expression, a.default, a.when, *a.partition_by]
            out += [SpecExpression(f"{where} analytics.{a.name}", text, False) for text in parts if text]
        out += [SpecExpression(f"{where} group_by.{name}", text, False) for name, text in step.group_by]
        out += [SpecExpression(f"{where} aggregates.{name}", text, True) for name, text in step.aggregates]
        out += [SpecExpression(f"{where} having", step.having, False)] if step.having else []
        if step.join is not None:
            for n, (left, right) in enumerate(step.join.keys):
                out += [SpecExpression(f"{where} join.keys[{n}]", e, False) for e in (left, right)]
        for t, ref in enumerate(step.references):
            table = "reference" if len(step.references) == 1 else f"reference[{t}]"
            out += [SpecExpression(f"{where} {table}.keys[{n}]", text, False) for n, (text, _) in enumerate(ref.keys)]
    return out


def reads_headers(spec: JobSpec) -> bool:
    """Whether an expression of ``spec`` reads the built-in column ``headers``: only then do its
    readers decode the Kafka records' headers (``includeHeaders``), so other jobs pay nothing for them."""
    return any(reads_column(item.text, HEADERS) for item in spec_expressions(spec))
