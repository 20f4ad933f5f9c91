"""Stream Analytics' date parts, and its ``DATEPART``, ``DATENAME`` and ``DATEADD`` written as Spark.

A spec writes a date part as Stream Analytics does: a word, by its name or an abbreviation
(:data:`DATE_PARTS`: ``year``/``yy``/``yyyy``, ``weekday``/``dw``/``w``, ``microsecond``/``mcs``…),
in ``DATEPART(part, t)``, ``DATENAME(part, t)``, ``DATEADD(part, n, t)`` and ``DATEDIFF(part, a, b)``.
Each function here writes one call as the Spark SQL text the engine runs, each argument once:

* ``DATEPART(part, t)``: an integer. ``week`` is T-SQL's — the week holding 1 January is week 1
  and a week starts on Sunday (Spark's ``weekofyear`` is ISO's: weeks start on Monday and
  2024-12-31 is in week 1 of 2025; here it is week 53 of 2024); ``weekday`` is 1 for Sunday to
  7 for Saturday (Spark's ``dayofweek``); ``millisecond`` and ``microsecond`` are the fraction of
  the second (0–999, 0–999999). Spark's own ``datepart('FIELD', t)``, with the field quoted,
  is left as Spark reads it (its ``'week'`` is ISO's).
* ``DATENAME(part, t)``: text — the month's and the weekday's English names
  (``January``, ``Sunday``), any other part its ``DATEPART`` number as text. Spark has no
  ``datename``; its ``monthname``/``dayname`` give three letters (``Jan``, ``Sun``).
* ``DATEADD(part, n, t)``: Spark's ``timestampadd`` with Stream Analytics' parts (``weekday``
  and ``dayofyear`` add days, as there); ``n``'s fraction is dropped, toward zero, in both.

The pure functions never read the clock; :mod:`tidegate.jobspec.asa_functions` finds the calls.
"""

from __future__ import annotations

# every word a spec may write for a date part → the part's name
DATE_PARTS = {
    **dict.fromkeys(("year", "yy", "yyyy"), "year"), **dict.fromkeys(("quarter", "qq", "q"), "quarter"),
    **dict.fromkeys(("month", "mm", "m"), "month"), **dict.fromkeys(("dayofyear", "dy", "y"), "dayofyear"),
    **dict.fromkeys(("day", "dd", "d"), "day"), **dict.fromkeys(("week", "wk", "ww"), "week"),
    **dict.fromkeys(("weekday", "dw", "w"), "weekday"), "hour": "hour", "hh": "hour",
    **dict.fromkeys(("minute", "mi", "n"), "minute"), **dict.fromkeys(("second", "ss", "s"), "second"),
    "millisecond": "millisecond", "ms": "millisecond", "microsecond": "microsecond", "mcs": "microsecond",
}  # fmt: skip
PARTS_FIX = (
    "write a Stream Analytics date part as a word: year (yy, yyyy), quarter (qq, q), month (mm, m),"
    " dayofyear (dy, y), day (dd, d), week (wk, ww), weekday (dw, w), hour (hh), minute (mi, n),"
    " second (ss, s), millisecond (ms), microsecond (mcs)"
)
# the functions whose first argument is a date part, and how many arguments they take then
PART_CALLS = {"datepart": 2, "datename": 2, "dateadd": 3, "datediff": 3}
# the part's unit in Spark's timestampadd, timestampdiff and date_trunc
SPARK_UNITS = {
    "year": "YEAR", "quarter": "QUARTER", "month": "MONTH", "dayofyear": "DAY", "day": "DAY", "week": "WEEK",
    "weekday": "DAY", "hour": "HOUR", "minute": "MINUTE", "second": "SECOND", "millisecond": "MILLISECOND",
    "microsecond": "MICROSECOND",
}  # fmt: skip
_FIELDS = {  # the parts Spark has a function of the same meaning for
    "year": "year", "quarter": "quarter", "month": "month", "dayofyear": "dayofyear", "day": "day",
    "weekday": "dayofweek", "hour": "hour", "minute": "minute", "second": "second",
}  # fmt: skip
_NAMES = {"month": "MMMM", "weekday": "EEEE"}  # DATENAME's text: date_format patterns (English, Spark's locale)


def date_part(word: str) -> str | None:
    """The date part ``word`` names (any case), or None when it names none."""
    return DATE_PARTS.get(word.lower())


def let(body: str, *values: str) -> str:
    """``body`` over ``values``, each evaluated once: the body reads them as ``v_.a0``, ``v_.a1``…
    and holds no text of the spec, so no column of the spec can be shadowed by ``v_``."""
    fields = ", ".join(f"'a{i}', ({v})" for i, v in enumerate(values))
    return f"element_at(transform(array(named_struct({fields})), v_ -> {body}), 1)"


def datepart_text(part: str, t: str) -> str:
    """``DATEPART(part, t)`` as Spark text; ``part`` is a name of :data:`DATE_PARTS`."""
    if part in _FIELDS:
        return f"{_FIELDS[part]}(({t}))"
    if part == "millisecond":
        return f"(cast(date_part('SECOND', ({t})) * 1000 AS int) % 1000)"
    if part == "microsecond":
        return f"(cast(date_part('SECOND', ({t})) * 1000000 AS int) % 1000000)"
    # week: 1 January's weekday (1 = Sunday) shifts the day of the year onto Sunday-started weeks
    return let("int((dayofyear(v_.a0) + dayofweek(trunc(v_.a0, 'YEAR')) - 2) div 7 + 1)", t)


def datename_text(part: str, t: str) -> str:
    """``DATENAME(part, t)`` as Spark text: a name for month and weekday, the number otherwise."""
    if part in _NAMES:
        return f"date_format(({t}), '{_NAMES[part]}')"
    return f"cast({datepart_text(part, t)} AS string)"


def dateadd_text(part: str, n: str, t: str) -> str:
    """``DATEADD(part, n, t)`` as Spark text."""
    return f"timestampadd({SPARK_UNITS[part]}, ({n}), ({t}))"
