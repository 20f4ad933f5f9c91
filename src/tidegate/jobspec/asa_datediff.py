"""A spec's ``DATEDIFF(part, a, b)`` means what Stream Analytics' does: part boundaries crossed.

Spark's three-argument ``datediff`` (``timestampdiff``) counts whole units elapsed, Stream
Analytics' (T-SQL's) the unit boundaries crossed from ``a`` to ``b``:
``DATEDIFF(minute, '12:00:59', '12:01:00')`` is 1 there and 0 in Spark; weeks start on Sunday.
Both give the same count for times on the boundaries themselves. :func:`datediff_text` writes
one call as the engine evaluates it — Spark's count between the two times truncated to the
unit, ``timestampdiff(unit, date_trunc(unit, a), date_trunc(unit, b))`` (each argument once, so
nesting cannot multiply the text) — for every part of :data:`~tidegate.jobspec.asa_dates.DATE_PARTS`
(``weekday`` and ``dayofyear`` count days, as there), and every Spark column built from a spec
expression goes through it (:func:`tidegate.jobspec.asa_functions.asa_text`), in the stream and
on the batch path alike. ``datediff(end, start)`` (days, already boundaries), ``timestampdiff``
and ``date_diff`` keep Spark's meaning; a join's ``within: DATEDIFF(…)`` is its bound, read
elsewhere (:mod:`tidegate.jobspec.joins`). The fingerprint hashes a three-argument ``datediff``
apart (:func:`~tidegate.jobspec.expressions.canonical_expression`): a job that called it when it
counted whole units (through 0.7) is a changed query, and replays.
"""

from __future__ import annotations

from tidegate.jobspec.asa_dates import SPARK_UNITS


def datediff_text(part: str, a: str, b: str) -> str:
    """``DATEDIFF(part, a, b)`` as Spark text; ``part`` is a name of :data:`~tidegate.jobspec.asa_dates.DATE_PARTS`."""
    unit = SPARK_UNITS[part]
    if unit == "WEEK":  # Sunday starts a week in Stream Analytics, Monday in Spark's date_trunc
        a, b = (f"timestampadd(DAY, 1, ({t}))" for t in (a, b))
    return f"timestampdiff({unit}, date_trunc('{unit}', ({a})), date_trunc('{unit}', ({b})))"
