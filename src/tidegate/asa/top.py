"""``TopOne([x])`` and ``CollectTop(n[, x])`` ``OVER (ORDER BY k [ASC|DESC], …)`` in a windowed
SELECT: the top event(s) of the window by the order, as one aggregate of the spec.

Stream Analytics returns the window's first event in that order — its whole record, or ``x``
of it — with NULL the smallest value. The spec writes it with Spark's ``max_by`` (``DESC``) or
``min_by`` (``ASC``) over a struct of the keys, which Spark compares field by field with NULL
first, as Stream Analytics orders NULL; events equal on every key are told apart by their log
position (the lowest partition, then offset, wins), so every batching and every replay picks
the same one. The whole record is a struct of the input's payload fields, which the side file
gives (a query does not say them).

``CollectTop(n[, x]) OVER (ORDER BY k …)`` is the window's first ``n`` events in that order, as
Stream Analytics returns them: an array of ``{rank, value}`` records, ranks 1 to ``n`` (fewer
when the window holds fewer events), ``value`` the whole record or ``x``. The spec collects the
window's events with their keys and log position, sorts them and keeps the first ``n``; events
equal on every key take consecutive ranks in log position order, so every batching and replay
gives the same array.

Over a duration, ``OVER ([PARTITION BY k] ORDER BY … LIMIT DURATION(…) [WHEN c])`` on each
event (:func:`top_over_duration`), both are the spec's ``MAX`` or ``MIN`` over a duration of one
record per event, and CollectTop its ``MAX(record, n)``.

Refused at their line and column: keys in both directions (``max_by``, ``min_by`` and the sort
order one way), ``PARTITION BY`` without ``LIMIT DURATION``, and a ``CollectTop`` count that is
not a literal from 1 to :data:`MAX_COLLECT_TOP`.
"""

from __future__ import annotations

from sqlglot import exp

from tidegate.asa.dialect import LimitDuration
from tidegate.asa.parts import Translator, whole_record


def is_top(node: exp.Expr) -> bool:
    """Whether ``node`` is ``TopOne(…) OVER (…)`` or ``CollectTop(…) OVER (…)``."""
    call = node.this if isinstance(node, exp.Window) else None
    return isinstance(call, exp.Anonymous) and str(call.this).lower() in ("topone", "collecttop")


def top_one(tr: Translator, window: exp.Window, whole: list[str] | None) -> str:
    """The spec's aggregate for ``window`` (:func:`is_top`); ``whole``: the fields of the event the
    SELECT reads, for ``TopOne()`` or ``CollectTop(n)`` (None when the query does not say them)."""
    call = window.this
    collect = str(call.this).lower() == "collecttop"
    name = "CollectTop" if collect else "TopOne"
    order = window.args.get("order")
    if window.args.get("partition_by") or isinstance(order, LimitDuration) or order is None:
        raise tr.refuse(
            window, f"{name} over a duration, or without ORDER BY",
            f"write {name}({'n, ' if collect else ''}[x]) OVER (ORDER BY k [ASC|DESC]) in a windowed SELECT",
        )  # fmt: skip
    keys, desc, count, value = _read(call, window, order, lambda x: tr.expression(x, windowed=False), tr.refuse, whole)
    by = ", ".join(tr.expression(k.this, windowed=False) for k in keys)
    if not collect:
        if desc:
            return f"max_by({value}, struct({by}, -partition, -offset))"
        return f"min_by({value}, struct({by}, partition, offset))"
    # every event of the window as (its order, its value), sorted by the order: descending
    # keys are the ascending sort reversed, the log position negated so its lowest still wins
    position = "-partition, -offset" if desc else "partition, offset"
    events = f"array_sort(collect_list(named_struct('o', struct({by}, {position}), 'v', {value})))"
    ordered = f"reverse({events})" if desc else events
    return ranked(f"slice({ordered}, 1, {count})")


MAX_COLLECT_TOP = 1_000  # events CollectTop(n) returns from a window at most
TOP_VALUE = "v"  # the field of TopOne's record over a duration that holds what it returns


def top_over_duration(call: exp.Expr, order: exp.Expr | None, expression, refuse, whole: list[str] | None) -> str:
    """``TopOne([x])`` or ``CollectTop(n[, x])`` ``OVER ([PARTITION BY k] ORDER BY o … LIMIT
    DURATION(…) [WHEN c])`` on each event, as the spec's ``MAX`` (``DESC``) or ``MIN`` (``ASC``)
    over a duration of one record: per key, whether it is NULL (NULL is the smallest) and its
    value, then the log position (the lowest wins a tie), then what it returns, in
    :data:`TOP_VALUE`. The record's order is the order of the keys, so the group's top event is
    the record's extreme, and CollectTop's its ``n`` extremes (``MAX(record, n)``), which
    :func:`ranked` numbers."""
    collect = str(call.this).lower() == "collecttop"
    name = "CollectTop" if collect else "TopOne"
    if order is None:
        raise refuse(call, f"{name} over a duration without ORDER BY",
                     f"write {name}({'n, ' if collect else ''}[x]) OVER ([PARTITION BY k] ORDER BY o "
                     "LIMIT DURATION(unit, n))")  # fmt: skip
    keys, desc, count, value = _read(call, call, order, expression, refuse, whole)
    fields = []
    for i, k in enumerate(keys):
        key = expression(k.this)
        fields += [f"'n{i}', isnotnull({key})", f"'k{i}', {key}"]
    fields += ["'p', -partition", "'o', -offset"] if desc else ["'p', partition", "'o', offset"]
    record = f"named_struct({', '.join(fields)}, '{TOP_VALUE}', {value})"
    return f"{'MAX' if desc else 'MIN'}({record}{f', {count}' if collect else ''})"


def _read(call: exp.Expr, at: exp.Expr, order: exp.Expr, expression, refuse, whole: list[str] | None):
    """What both forms read of ``call`` ordered by ``order``: (its keys, whether they are
    descending, CollectTop's number of events — 1 for TopOne —, the spec expression of what it
    returns: ``x``, else the whole record of ``whole``). Refused at ``at`` or the part at fault."""
    collect = str(call.this).lower() == "collecttop"
    name = "CollectTop" if collect else "TopOne"
    keys = list(order.expressions)
    directions = {bool(k.args.get("desc")) for k in keys}
    if len(directions) > 1:
        raise refuse(order, f"{name} ordered ASC by one key and DESC by another", "order every key one way")
    args = list(call.expressions)
    count = collect_count(refuse, at, args.pop(0) if args else None) if collect else 1
    if args:
        value = expression(args[0])
    elif whole:
        value = whole_record(whole)
    else:
        raise refuse(
            at, f"{name}({'n' if collect else ''}) returns the whole event, whose fields this query does not say",
            "give the input's payload in the side file (inputs.<name>.payload), or name what to return: "
            f"{name}({'n, ' if collect else ''}x)",
        )  # fmt: skip
    return keys, directions == {True}, count, value


def ranked(records: str) -> str:
    """CollectTop's array — ``{rank, value}`` records, ranks from 1 — of ``records`` in order,
    each holding its value in :data:`TOP_VALUE`."""
    rank = f"named_struct('rank', CAST(rank_ + 1 AS BIGINT), 'value', top_.{TOP_VALUE})"
    return f"transform({records}, (top_, rank_) -> {rank})"


def collect_count(refuse, where: exp.Expr, node: exp.Expr | None) -> int:
    """CollectTop's number of events: a whole-number literal from 1 to :data:`MAX_COLLECT_TOP`."""
    text = node.name if isinstance(node, exp.Literal) and not node.is_string else None
    if text is None or not text.isdigit() or not 1 <= int(text) <= MAX_COLLECT_TOP:
        raise refuse(
            node if node is not None else where, "CollectTop's number of events is not a whole number literal "
            f"from 1 to {MAX_COLLECT_TOP:,}", "write CollectTop(n[, x]) OVER (ORDER BY k), e.g. CollectTop(3)",
        )  # fmt: skip
    return int(text)
