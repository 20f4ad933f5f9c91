"""Each row's event time on the Spark side, from a job's ``timestamp_by`` (:mod:`tidegate.jobspec.timestamp_by`).

A payload field is read from the payload document as text and parsed with ``time_format``
(ISO-8601 by default). An expression is Spark SQL over the row's typed payload fields, its
built-in columns and the JSON objects it reads nested fields of (each a struct of text), so it
needs those as columns (:mod:`.parse` gives them). Its value is the time when it is a
``timestamp`` or a ``date``, and text is parsed as a field's is; a NULL value is a missing time,
text that does not parse an unreadable one (semantics §9) — the same for the stream and the
batch path, which run this one code. :func:`check_event_time_types` refuses any other type
before a query starts, naming it and the fix; :func:`tolerant` keeps one event's bad values
(a cast of bad text, a DATEADD past the range of times) from failing the batch under ANSI SQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DateType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    _parse_datatype_string,
)

from tidegate.errors import ConfigError
from tidegate.jobspec.asa_dates import date_part
from tidegate.jobspec.expressions import call_arguments, token_spans
from tidegate.jobspec.fields import BUILTIN_TYPES
from tidegate.jobspec.timestamp_by import nested_fields, time_field
from tidegate.spark.spec_columns import spec_column

_TIME_TYPES = (StringType, TimestampType, TimestampNTZType, DateType)  # what an expression may give


def parse_time(text: Column, time_format: str | None) -> Column:
    """The time in ``text`` (or a timestamp or date value) read with ``time_format``, ISO-8601
    without one; NULL when it does not parse."""
    if time_format:
        return F.try_to_timestamp(text, F.lit(time_format))
    return text.try_cast("timestamp")


def time_value(document: Column, payload: Mapping[str, str], timestamp_by: str) -> Column:
    """The value ``timestamp_by`` gives a row before it is parsed: a field's text in ``document``
    or an expression's value (over the typed row of :mod:`.parse`, beside its nested objects)."""
    field = time_field(timestamp_by, payload)
    return document[field] if field is not None else spec_column(tolerant(timestamp_by))


# How far DATEADD may move a time, per date part: about 3,000 years, far inside Spark's microseconds
_DATEADD_BOUND = {
    "microsecond": 10**17, "millisecond": 10**14, "second": 10**11, "minute": 10**9, "hour": 10**8,
    "day": 10**7, "dayofyear": 10**7, "weekday": 10**7, "week": 10**6, "month": 10**5, "quarter": 10**4,
    "year": 10**4,
}  # fmt: skip
_TRY_FORMS = {"cast": "try_cast", "to_timestamp": "try_to_timestamp", "to_date": "try_to_date"}
_DATEADD = frozenset(("dateadd", "timestampadd"))


def tolerant(expression: str) -> str:
    """``expression`` as the engine evaluates it, so that no event's values can fail the batch
    (Spark runs ANSI SQL, where a bad cast or an overflow raises): ``CAST``, ``to_timestamp`` and
    ``to_date`` are their ``try_`` forms, and ``DATEADD(unit, n, t)`` takes ``n`` as a whole
    number within about 3,000 years and ``t`` as a timestamp, NULL otherwise — so such an event
    has a NULL time and goes to quarantine (semantics §9) instead of stopping the job."""
    toks = token_spans(expression)
    edits: list[tuple[int, int, str]] = []  # (start, end, text) of the original
    for i, (kind, text, start, end) in enumerate(toks[:-1]):
        if kind != "word" or toks[i + 1][1] != "(" or (i and toks[i - 1][1] == "."):
            continue
        name = text.lower()
        if name in _TRY_FORMS:
            edits.append((start, end, _TRY_FORMS[name]))
        elif name in _DATEADD:
            args = call_arguments(toks, i + 1)
            part = date_part(toks[args[0][0]][1]) if len(args) == 3 and args[0][0] == args[0][1] - 1 else None
            if part is not None:  # Stream Analytics' parts, abbreviations too (tidegate.jobspec.asa_dates)
                bound = _DATEADD_BOUND[part]
                n, t = (tolerant(expression[toks[a][2] : toks[b - 1][3]]) for a, b in args[1:])
                # the count once (a nested DATEADD is not copied): NULL unless within the bound
                within = f"c_ -> c_ BETWEEN -{bound} AND {bound}"
                count = f"try_element_at(filter(array(try_cast(({n}) AS bigint)), {within}), 1)"
                edits.append((toks[args[1][0]][2], toks[args[2][1] - 1][3], f"{count}, try_cast(({t}) AS timestamp)"))
    out, at = [], 0
    for start, end, text in sorted(edits, key=lambda e: (e[0], -e[1])):
        if start < at:  # inside a DATEADD's arguments, which were rewritten with it
            continue
        out += [expression[at:start], text]
        at = end
    return "".join(out) + expression[at:]


def is_expression(payload: Mapping[str, str], timestamp_by: str | None) -> bool:
    return timestamp_by is not None and time_field(timestamp_by, payload) is None


def nested_struct(paths: Iterable[tuple[str, ...]]) -> StructType:
    """The JSON object a head's ``paths`` are read from: a struct of text leaves, ``a.b.c`` as
    ``struct<b: struct<c: string>>``."""
    tree: dict = {}
    for path in paths:
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            node.setdefault(path[-1], None)

    def build(node: dict) -> StructType:
        return StructType([StructField(k, StringType() if v is None else build(v)) for k, v in node.items()])

    return build(tree)


def document_objects(
    shapes: Iterable[tuple[Mapping[str, str], str | None]], fields: Iterable[str]
) -> dict[str, StructType]:
    """Per JSON object the shapes' expressions read nested fields of (not a payload field of any
    shape, ``fields``), its struct: the payload document reads it so."""
    taken = set(fields)
    merged: dict[str, list[tuple[str, ...]]] = {}
    for payload, timestamp_by in shapes:
        for head, paths in nested_fields(timestamp_by, payload).items():
            if head not in taken:
                merged.setdefault(head, []).extend(paths)
    return {head: nested_struct(paths) for head, paths in merged.items()}


def check_event_time_types(spark: SparkSession, shapes: Iterable[tuple[Mapping[str, str], str | None, str]]) -> None:
    """Resolve each ``timestamp_by`` expression (``(payload, timestamp_by, where)``) over an empty
    row of its columns and refuse one Spark cannot resolve or whose value is not a time or text.
    Raises ConfigError naming the field, the type and the fix."""
    for payload, timestamp_by, where in shapes:
        if not is_expression(payload, timestamp_by):
            continue
        assert timestamp_by is not None  # is_expression says so
        objects = document_objects([(payload, timestamp_by)], payload)
        schema = StructType(
            [StructField(n, _parse_datatype_string(t)) for n, t in (BUILTIN_TYPES | dict(payload)).items()]
            + [StructField(n, t) for n, t in objects.items()]
        )
        try:
            typ = (
                spark.createDataFrame([], schema).select(spec_column(tolerant(timestamp_by))).schema.fields[0].dataType
            )
        except Exception as exc:  # py4j or pyspark's AnalysisException: the first line names the problem
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(
                f"{where}: Spark cannot compute {timestamp_by!r} ({first[:200]})",
                "write one expression over the payload fields that gives a timestamp, a date or text,"
                " e.g. DATEADD(millisecond, epochMs, '1970-01-01T00:00:00Z')",
            ) from None
        if not isinstance(typ, _TIME_TYPES):
            raise ConfigError(
                f"{where}: {timestamp_by!r} gives a {typ.simpleString()}, not a time",
                "make it give a timestamp (for epoch numbers: DATEADD(millisecond, x, '1970-01-01T00:00:00Z'),"
                " or DATEADD(second, …)), a date, or text read with time_format",
            )
