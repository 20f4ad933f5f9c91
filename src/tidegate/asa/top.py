"""``TopOne([x]) OVER (ORDER BY k [ASC|DESC], …)`` in a windowed SELECT: the top event of the
window by the order, as one aggregate of the spec.

Stream Analytics returns the window's first event in that order — its whole record, or ``x``
of it — with NULL the smallest value. The spec writes it with Spark's ``max_by`` (``DESC``) or
``min_by`` (``ASC``) over a struct of the keys, which Spark compares field by field with NULL
first, as Stream Analytics orders NULL; events equal on every key are told apart by their log
position (the lowest partition, then offset, wins), so every batching and every replay picks
the same one. The whole record is a struct of the input's payload fields, which the side file
gives (a query does not say them).

Refused at their line and column: keys in both directions (``max_by`` and ``min_by`` order one
way), the analytic form ``OVER (PARTITION BY … LIMIT DURATION …)`` and ``CollectTop``.
"""

from __future__ import annotations

from sqlglot import exp

from tidegate.asa.dialect import LimitDuration
from tidegate.asa.parts import Translator


def is_top(node: exp.Expr) -> bool:
    """Whether ``node`` is ``TopOne(…) OVER (…)`` or ``CollectTop(…) OVER (…)``."""
    call = node.this if isinstance(node, exp.Window) else None
    return isinstance(call, exp.Anonymous) and str(call.this).lower() in ("topone", "collecttop")


def top_one(tr: Translator, window: exp.Window, whole: list[str] | None) -> str:
    """The spec's aggregate for ``window`` (:func:`is_top`); ``whole``: the fields of the event the
    SELECT reads, for ``TopOne()`` (None when the query does not say them)."""
    call = window.this
    if str(call.this).lower() == "collecttop":
        raise tr.refuse(
            window, "CollectTop(…) OVER (…) is not supported", "write TopOne(…) OVER (ORDER BY …) for the top one"
        )
    order = window.args.get("order")
    if window.args.get("partition_by") or isinstance(order, LimitDuration) or order is None:
        raise tr.refuse(
            window, "TopOne over a duration, or without ORDER BY",
            "write TopOne([x]) OVER (ORDER BY k [ASC|DESC]) in a windowed SELECT",
        )  # fmt: skip
    keys = list(order.expressions)
    directions = {bool(k.args.get("desc")) for k in keys}
    if len(directions) > 1:
        raise tr.refuse(order, "TopOne ordered ASC by one key and DESC by another", "order every key one way")
    if call.expressions:
        value = tr.expression(call.expressions[0], windowed=False)
    elif whole:
        value = "struct(" + ", ".join("`" + f.replace("`", "``") + "`" for f in whole) + ")"  # names, quoted
    else:
        raise tr.refuse(
            window, "TopOne() returns the whole event, whose fields this query does not say",
            "give the input's payload in the side file (inputs.<name>.payload), or name what to return: TopOne(x)",
        )  # fmt: skip
    by = ", ".join(tr.expression(k.this, windowed=False) for k in keys)
    if directions == {True}:
        return f"max_by({value}, struct({by}, -partition, -offset))"
    return f"min_by({value}, struct({by}, partition, offset))"
