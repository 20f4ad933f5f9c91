"""A spec expression as the engine evaluates it: Spark SQL with Stream Analytics' meaning.

A spec's expressions are Spark SQL, but the language a query is ported from is Stream
Analytics', so where a function of the same name means something else in Spark the spec gets
Stream Analytics' meaning, and Stream Analytics' functions Spark lacks are written with Spark's:

* dates (:mod:`tidegate.jobspec.asa_dates`, :mod:`tidegate.jobspec.asa_datediff`):
  ``DATEPART``, ``DATENAME``, ``DATEADD``, ``DATEDIFF``, with Stream Analytics' date parts and
  their abbreviations; ``DAY``, ``MONTH``, ``YEAR`` are Spark's, which mean the same;
* text (:mod:`tidegate.jobspec.asa_strings`): ``SUBSTRING``, ``CHARINDEX``, ``LEN``.

:func:`asa_text` rewrites each such call, its arguments first, each argument once (so nesting
cannot multiply the text); every Spark column built from a spec expression goes through it
(:func:`tidegate.spark.spec_columns.spec_column`), so the stream and the batch path read every
expression alike. A call that is not Stream Analytics' form (``datediff(end, start)``,
``datepart('YEAR', t)``, ``substring(s, 2)``) is left as Spark reads it. The spec check refuses
a date part Stream Analytics does not know (:func:`tidegate.jobspec.expressions.check_expression`).
"""

from __future__ import annotations

from collections.abc import Callable

from tidegate.jobspec.asa_datediff import datediff_text
from tidegate.jobspec.asa_dates import date_part, dateadd_text, datename_text, datepart_text
from tidegate.jobspec.asa_strings import charindex_text, len_text, substring_text
from tidegate.jobspec.expressions import call_arguments, token_spans

Rewrite = Callable[[list[str]], str | None]


def _with_part(arity: int, text: Callable[..., str]) -> Rewrite:
    """A call whose first argument is a date part: Stream Analytics' when it has ``arity``
    arguments and the first is a part's word, else None (Spark's)."""

    def rewrite(args: list[str]) -> str | None:
        part = date_part(args[0]) if len(args) == arity else None
        return text(part, *args[1:]) if part else None

    return rewrite


_REWRITES: dict[str, Rewrite] = {
    "datepart": _with_part(2, datepart_text),
    "datename": _with_part(2, datename_text),
    "dateadd": _with_part(3, dateadd_text),
    "datediff": _with_part(3, datediff_text),
    "substring": lambda args: substring_text(*args) if len(args) == 3 else None,
    "charindex": lambda args: charindex_text(*args) if len(args) in (2, 3) else None,
    "len": lambda args: len_text(*args) if len(args) == 1 else None,
}


def asa_text(expression: str) -> str:
    """``expression`` with each call of Stream Analytics' functions written as Spark evaluates it."""
    toks = token_spans(expression)
    out, at = [], 0
    for i, (kind, text, start, _) in enumerate(toks[:-1]):
        rewrite = _REWRITES.get(text.lower()) if kind == "word" else None
        if start < at or rewrite is None or toks[i + 1][1] != "(" or (i and toks[i - 1][1] == "."):
            continue
        spans = call_arguments(toks, i + 1)
        if not spans:
            continue
        args = [asa_text(expression[toks[first][2] : toks[last - 1][3]]) for first, last in spans]
        engine = rewrite(args)
        if engine is None:
            continue  # Spark's form: its arguments are rewritten where the loop reaches them
        out += [expression[at:start], engine]
        at = toks[spans[-1][1]][3]  # after the call's ")"
    return "".join(out) + expression[at:]
