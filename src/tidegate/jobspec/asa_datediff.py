"""A spec's ``DATEDIFF(unit, a, b)`` means what Stream Analytics' does: unit boundaries crossed.

Spark's three-argument ``datediff`` (``timestampdiff``) counts whole units elapsed, Stream
Analytics' (T-SQL's) the unit boundaries crossed from ``a`` to ``b``:
``DATEDIFF(minute, '12:00:59', '12:01:00')`` is 1 there and 0 in Spark; weeks start on Sunday.
Both give the same count for times on the boundaries themselves. :func:`asa_text` writes a
spec expression as the engine evaluates it — each three-argument ``datediff`` as Spark's count
between the two times truncated to the unit, ``timestampdiff(unit, date_trunc(unit, a),
date_trunc(unit, b))`` (each argument once, so nesting cannot multiply the text) — and every
Spark column built from a spec expression goes through it (:func:`tidegate.spark.spec_columns.spec_column`),
in the stream and on the batch path alike. ``datediff(end, start)`` (days, already boundaries),
``timestampdiff`` and ``date_diff`` keep Spark's meaning; a join's ``within: DATEDIFF(…)`` is its
bound, read elsewhere (:mod:`tidegate.jobspec.joins`). The fingerprint hashes a three-argument
``datediff`` apart (:func:`~tidegate.jobspec.expressions.canonical_expression`): a job that
called it when it counted whole units (through 0.7) is a changed query, and replays.
"""

from __future__ import annotations

from tidegate.jobspec.expressions import call_arguments, token_spans

# the units a spec writes (Spark's names, which Stream Analytics' full names are) → Spark's date_trunc unit
_UNITS = {
    "year": "YEAR", "quarter": "QUARTER", "month": "MONTH", "week": "WEEK", "day": "DAY", "dayofyear": "DAY",
    "hour": "HOUR", "minute": "MINUTE", "second": "SECOND", "millisecond": "MILLISECOND",
    "microsecond": "MICROSECOND",
}  # fmt: skip


def asa_text(expression: str) -> str:
    """``expression`` with each ``DATEDIFF(unit, a, b)`` counting unit boundaries crossed."""
    toks = token_spans(expression)
    out, at = [], 0
    for i, (kind, text, start, _) in enumerate(toks[:-1]):
        if start < at or kind != "word" or text.lower() != "datediff" or toks[i + 1][1] != "(":
            continue
        if i and toks[i - 1][1] == ".":
            continue
        args = call_arguments(toks, i + 1)
        if len(args) != 3 or args[0][1] - args[0][0] != 1 or toks[args[0][0]][1].lower() not in _UNITS:
            continue  # datediff(end, start) is days, boundaries already; an unknown unit is Spark's to refuse
        unit = _UNITS[toks[args[0][0]][1].lower()]
        a, b = (asa_text(expression[toks[first][2] : toks[last - 1][3]]) for first, last in args[1:])
        out += [expression[at:start], _boundaries(unit, a, b)]
        at = toks[args[2][1]][3]  # after the call's ")"
    return "".join(out) + expression[at:]


def _boundaries(unit: str, a: str, b: str) -> str:
    if unit == "WEEK":  # Sunday starts a week in Stream Analytics, Monday in Spark's date_trunc
        a, b = (f"timestampadd(DAY, 1, ({t}))" for t in (a, b))
    return f"timestampdiff({unit}, date_trunc('{unit}', ({a})), date_trunc('{unit}', ({b})))"
