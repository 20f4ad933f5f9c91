"""Stream Analytics' ``SUBSTRING``, ``CHARINDEX`` and ``LEN`` written as Spark, where Spark's differ.

* ``SUBSTRING(s, start, length)`` is T-SQL's: the characters at positions ``start`` to
  ``start + length - 1``, counted from 1, of which those before position 1 are not there — so
  ``SUBSTRING('abc', 0, 2)`` is ``'a'`` and ``SUBSTRING('abc', -1, 3)`` is ``'a'``. Spark's
  ``substring`` reads a start of 0 as 1 (``'ab'``) and a negative start from the end (``'c'``).
  From position 1 on both agree. A negative length, an error in Stream Analytics, gives ``''``.
  The two-argument ``substring(s, start)``, ``substring(s FROM …)`` and ``substr`` stay Spark's.
* ``CHARINDEX(find, s[, start])``: the position of ``find`` in ``s`` counted from 1, 0 when it
  is not there; a start below 1 searches from the beginning. Spark has no ``charindex``; its
  ``locate`` finds nothing (0) from a start below 1.
* ``LEN(s)`` counts the characters without the trailing spaces (``LEN('ab  ')`` is 2); Spark's
  ``len`` counts them (4), as ``length`` and ``char_length`` still do.
"""

from __future__ import annotations

import re

from tidegate.jobspec.asa_dates import let

_WHOLE = re.compile(r"[-+]?\s*\d{1,9}")  # an integer literal, as the spec writes it


def substring_text(s: str, start: str, length: str) -> str:
    """``SUBSTRING(s, start, length)`` as Spark text."""
    if _WHOLE.fullmatch(start):
        first = int(start.replace(" ", ""))
        if first >= 1:  # Spark's own, read from position 1 on
            return f"substring(({s}), {first}, ({length}))"
        return f"substring(({s}), 1, ({length}) - {1 - first})"
    # a start before 1 shortens the length; NULL start stays NULL; absurd sums are NULL, not an overflow
    body = "substring(v_.a0, if(v_.a1 < 1, 1, v_.a1), if(v_.a1 < 1, try_add(v_.a2, try_subtract(v_.a1, 1)), v_.a2))"
    return let(body, s, start, length)


def charindex_text(find: str, s: str, start: str | None = None) -> str:
    """``CHARINDEX(find, s[, start])`` as Spark text."""
    if start is None:
        return f"locate(({find}), ({s}))"
    return f"locate(({find}), ({s}), greatest(({start}), 1))"


def len_text(s: str) -> str:
    """``LEN(s)`` as Spark text."""
    return f"length(rtrim(({s})))"
