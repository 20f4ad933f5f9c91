"""Payload parsing (semantics §9): split a batch into events the policy can judge and bad input.

Bad input goes to quarantine with the reason and its input position; nothing is dropped
here silently. A reason is a code, with details after a colon when there are any:

* ``payload_too_large: payload of 2,000,000 bytes exceeds max_payload_bytes 1,048,576`` —
  more UTF-8 bytes than the job's ``source.max_payload_bytes``; it is not parsed at all;
* ``payload_too_deep: JSON nested deeper than 64 levels (max_payload_depth)``;
* ``headers_too_large: more than 1,024 headers or 65,536 bytes of header names and values`` —
  read only by jobs that read ``headers``: the reader did not decode them (NULL,
  :mod:`tidegate.inputs.kafka.headers`);
* ``unparseable_payload`` — not a JSON object;
* ``missing_event_time``, ``unparseable_event_time`` — the ``timestamp_by`` field;
* ``non_finite_number: non-finite number in field temperature`` — NaN or ±Infinity in a
  double or float field, as a JSON token (``NaN``, ``Infinity``, ``1e400``, which Spark's
  JSON reader accepts) or as text Spark would cast to one (``"NaN"``, ``"-inf"``): one
  such reading would make every aggregate it reaches NaN, and a ``NaN`` token would
  otherwise become NULL without a trace.

Fields are read as text by ``from_json`` and then cast: a field of the wrong type becomes
NULL in that one column instead of spoiling the record, so only payloads that are not
JSON objects at all are "corrupt". (``from_json`` is several times faster than VARIANT parsing.)

With Tidegate's jar on the session the documents are read on the JVM
(``java/JsonDocuments.java``): Spark's own JSON parser with ``from_json``'s schema and options,
each payload handed to it as a string instead of through a reader that costs more than the
parse. The documents are the same either way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from tidegate.inputs.kafka.headers import MAX_HEADER_BYTES, MAX_HEADERS
from tidegate.jobspec import PayloadLimits
from tidegate.jobspec.fields import HEADERS
from tidegate.jobspec.nested_types import is_nested
from tidegate.jobspec.timestamp_by import time_field
from tidegate.spark.columns import cols, reused
from tidegate.spark.gateway import jvm_class
from tidegate.spark.pipeline.event_time import document_objects, is_expression, parse_time, time_value

# reasons written to the quarantine output
UNPARSEABLE_PAYLOAD = "unparseable_payload"
MISSING_EVENT_TIME = "missing_event_time"
UNPARSEABLE_EVENT_TIME = "unparseable_event_time"
PAYLOAD_TOO_LARGE = "payload_too_large"
PAYLOAD_TOO_DEEP = "payload_too_deep"
HEADERS_TOO_LARGE = "headers_too_large"
NON_FINITE_NUMBER = "non_finite_number"
_FLOATING = ("double", "float")  # the payload types that can hold NaN and ±Infinity

INPUT_COLUMNS = ("partition", "offset", "arrival_time", "key", "payload")  # what quarantine keeps of an input row
TEXT_COLUMNS = ("key", "payload")  # of the input columns, those as large as a record the log accepts
REASON = "_reason"  # the quarantine reason of a judged row; NULL for good input
_CORRUPT = "_corrupt"
_DOC = "_doc"  # the payload read as a document of text fields
_DEEP = "_deep"  # read on the JVM: not a document within the nesting limit, but one beyond it
JSON_DOCUMENTS = "tidegate.jvm.JsonDocuments"  # the documents read on the JVM
DEFAULT_LIMITS = PayloadLimits()  # the spec's defaults (a frozen dataclass: shared safely)


@dataclass(frozen=True)
class ParsedBatch:
    judged: DataFrame  # every input row: position, _reason (NULL when good), event_time, fields

    @property
    def good(self) -> DataFrame:  # partition, offset, arrival_time, key, event_time, <payload fields>
        return self.judged.where(F.col(REASON).isNull()).drop(REASON, "payload")

    @property
    def bad(self) -> DataFrame:  # partition, offset, arrival_time, key, payload, reason
        return quarantine_rows(self.judged.where(F.col(REASON).isNotNull()))


def quarantine_rows(bad: DataFrame) -> DataFrame:
    """The quarantine output of rejected judged rows: input position, payload, reason."""
    return bad.select(*quarantine_columns())


@reused
def quarantine_columns() -> tuple[Column, ...]:
    """A rejected row as the quarantine keeps it: its input columns and why it was rejected."""
    return (*cols(INPUT_COLUMNS), F.col(REASON).alias("reason"))


@dataclass(frozen=True)
class EventShape:
    """How the events of some rows are read: payload fields, event time (a field or an expression,
    :mod:`.event_time`) and format. ``rows``: which rows (an input's partitions); None: every row."""

    payload: Mapping[str, str]
    timestamp_by: str | None = None
    time_format: str | None = None
    rows: Column | None = None


def parse_batch(
    raw: DataFrame,
    payload_fields: dict[str, str],
    timestamp_by: str | None,
    time_format: str | None = None,
    limits: PayloadLimits = DEFAULT_LIMITS,
    *,
    on_jvm: bool = False,
) -> ParsedBatch:
    """Parse ``payload`` JSON into typed columns and the event time (``E = A`` without
    ``timestamp_by``), keeping the input position of every row (and ``headers`` when ``raw`` has them)."""
    return parse_shapes(raw, [EventShape(payload_fields, timestamp_by, time_format)], limits, on_jvm=on_jvm)


def parse_shapes(
    raw: DataFrame,
    shapes: Sequence[EventShape],
    limits: PayloadLimits = DEFAULT_LIMITS,
    *,
    on_jvm: bool = False,
) -> ParsedBatch:
    """:func:`parse_batch` for rows read in different shapes (inputs with their own payload and
    event time), in one pass: each row's fields and event time are its shape's; a field of
    another shape's payload is NULL. The columns are every shape's fields, in order.
    ``on_jvm``: the documents read by ``JsonDocuments`` (Tidegate's jar must be on the session)."""
    described = tuple((tuple(sh.payload.items()), sh.timestamp_by, sh.time_format, sh.rows) for sh in shapes)
    headers = HEADERS in raw.columns  # the source read them: the job reads them
    documents, typed, judged = _parse_columns(described, limits, on_jvm, headers)
    if not on_jvm:
        read = raw.select(*documents)
    else:
        read = DataFrame(jvm_class(raw.sparkSession, JSON_DOCUMENTS).apply(
            raw.select(*cols(_input_columns(headers)))._jdf, "payload", _DOC, _text_schema(described).json(),
            json.dumps(_json_options(limits.max_payload_depth)), limits.max_payload_bytes, _DEEP,
            limits.max_payload_bytes,
        ), raw.sparkSession)  # fmt: skip
    return ParsedBatch((read if typed is None else read.select(*typed)).select(*judged))


@reused
def _parse_columns(
    described: tuple,
    limits: PayloadLimits,
    on_jvm: bool = False,
    headers: bool = False,
) -> tuple[tuple[Column, ...], tuple[Column, ...] | None, tuple[Column, ...]]:
    """The projections of :func:`parse_shapes` for the shapes ``described`` (each one's
    payload items, event time and format, rows): each row's payload parsed as ``_doc``;
    when an event time is an expression, the row with its typed fields beside the document,
    which the expression reads (else None); then the judged row. ``on_jvm``: the rows come from
    ``JsonDocuments``, which also says whether a payload is too deep (``_deep``) — no
    ``from_json`` is left in the judged row, so Spark compiles it with the code that reads the rows.
    ``headers``: the rows carry ``headers``, kept beside the input columns; NULL ones are too large."""
    shapes = _shapes(described)
    inputs = _input_columns(headers)
    fields_of = _fields_of(shapes)
    text_schema = _text_schema(described)
    size = F.octet_length("payload")
    too_large = size > F.lit(limits.max_payload_bytes)

    def parse(text: Column, max_depth: int) -> Column:
        return F.from_json(text, text_schema, _json_options(max_depth))

    def per_shape(value) -> Column:
        """``value(shape)`` on each shape's rows (NULL where it gives None)."""
        if len(shapes) == 1 and shapes[0].rows is None:
            return value(shapes[0])
        out = None
        for shape in shapes:
            v = value(shape)
            if v is not None:
                if shape.rows is None:
                    raise ValueError("of several event shapes, each must say which rows it reads (rows is None)")
                out = F.when(shape.rows, v) if out is None else out.when(shape.rows, v)
        return F.lit(None) if out is None else out

    def typed(name: str, typ: str):
        raw_field = F.col(_DOC)[name]
        if is_nested(typ):  # read as its JSON text; NULL when it is not of the declared shape
            return F.from_json(raw_field, typ, {"mode": "PERMISSIVE"})
        return raw_field if typ == "string" else raw_field.try_cast(typ)

    doc = parse(F.when(~too_large, F.col("payload")), limits.max_payload_depth)  # too large: not parsed
    fields = [per_shape(lambda sh, n=name: typed(n, sh.payload[n]) if n in sh.payload else None).alias(name)
              for name in fields_of]  # fmt: skip
    typed_row = None
    if any(is_expression(sh.payload, sh.timestamp_by) for sh in shapes):  # it reads the typed fields
        objects = document_objects([(sh.payload, sh.timestamp_by) for sh in shapes], fields_of)
        typed_row = (*cols(inputs), F.col(_DOC), *([F.col(_DEEP)] if on_jvm else []), *fields,
                     *(F.col(_DOC)[head].alias(head) for head in objects))  # fmt: skip
        fields = list(cols(fields_of))
    not_object = F.col(_DOC).isNull() | F.col(_DOC)[_CORRUPT].isNotNull()
    # only for payloads that failed: would they parse without the depth limit? (depth ≤ bytes)
    if on_jvm:
        too_deep = F.col(_DEEP)
    else:
        relaxed = parse(F.col("payload"), limits.max_payload_bytes)
        too_deep = relaxed.isNotNull() & relaxed[_CORRUPT].isNull()
    # a field's text or an expression's value; a NULL is a missing time, one that does not parse unreadable
    time_text = per_shape(lambda sh: time_value(F.col(_DOC), sh.payload, sh.timestamp_by) if sh.timestamp_by
                          else F.lit(""))  # fmt: skip
    event_time = per_shape(lambda sh: parse_time(time_value(F.col(_DOC), sh.payload, sh.timestamp_by), sh.time_format)
                           if sh.timestamp_by else F.col("arrival_time"))  # fmt: skip
    reason = F.when(too_large, F.concat(
        F.lit(f"{PAYLOAD_TOO_LARGE}: payload of "), F.format_number(size, 0),
        F.lit(f" bytes exceeds max_payload_bytes {limits.max_payload_bytes:,}"),
    ))  # fmt: skip
    if headers:  # NULL: the reader found them beyond its bounds and did not decode them
        reason = reason.when(F.col(HEADERS).isNull(), F.lit(
            f"{HEADERS_TOO_LARGE}: more than {MAX_HEADERS:,} headers or {MAX_HEADER_BYTES:,} bytes of header names"
            " and values"
        ))  # fmt: skip
    reason = (
        reason.when(not_object & too_deep, F.lit(
            f"{PAYLOAD_TOO_DEEP}: JSON nested deeper than {limits.max_payload_depth} levels (max_payload_depth)"
        ))
        .when(not_object, F.lit(UNPARSEABLE_PAYLOAD))
        .when(time_text.isNull(), F.lit(MISSING_EVENT_TIME))
        .when(event_time.isNull(), F.lit(UNPARSEABLE_EVENT_TIME))
    )  # fmt: skip
    for shape in shapes:
        for name, typ in shape.payload.items():
            if typ in _FLOATING:
                bad = _non_finite(F.col(_DOC)[name], typ)
                reason = reason.when(bad if shape.rows is None else shape.rows & bad, F.lit(
                    f"{NON_FINITE_NUMBER}: non-finite number in field {name}"
                ))  # fmt: skip
    return (
        (*cols(inputs), doc.alias(_DOC)),
        typed_row,
        (*cols(inputs), reason.alias(REASON), event_time.alias("event_time"), *fields),
    )


def _input_columns(headers: bool) -> tuple[str, ...]:
    """The input columns a parsed row keeps: :data:`INPUT_COLUMNS`, and ``headers`` when read."""
    return (*INPUT_COLUMNS, HEADERS) if headers else INPUT_COLUMNS


def _shapes(described: tuple) -> list[EventShape]:
    return [
        EventShape(dict(payload), timestamp_by, time_format, rows)
        for payload, timestamp_by, time_format, rows in described
    ]


def _fields_of(shapes: Sequence[EventShape]) -> dict[str, str]:
    """Every shape's payload fields with the type of the first shape that has each."""
    fields_of: dict[str, str] = {}
    for shape in shapes:
        for name, typ in shape.payload.items():
            fields_of.setdefault(name, typ)
    return fields_of


def _text_schema(described: tuple) -> StructType:
    """The document every payload is read as: each field of every shape, and each event-time
    field, as text; each JSON object an event-time expression reads nested fields of, as a
    struct of text; and the corrupt-record column, set when the payload is not a JSON object."""
    shapes = _shapes(described)
    times = [time_field(shape.timestamp_by, shape.payload) for shape in shapes]
    names = list(dict.fromkeys([*_fields_of(shapes), *(t for t in times if t)]))
    objects = document_objects([(sh.payload, sh.timestamp_by) for sh in shapes], names)  # nested fields read
    return StructType([StructField(n, StringType()) for n in names] + [StructField(n, t) for n, t in objects.items()]
                      + [StructField(_CORRUPT, StringType())])  # fmt: skip


def _json_options(max_depth: int) -> dict[str, str]:
    return {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT, "maxNestingDepth": str(max_depth)}


def _non_finite(text: Column, typ: str) -> Column:
    """NaN or ±Infinity in a field read as text: Spark's JSON reader writes the tokens NaN,
    Infinity and overflowing numbers (1e400) as the quoted text "NaN" / "Infinity", and
    casts "NaN", "inf" or "-Infinity" to the non-finite values themselves. (The first cast is
    the field's own, computed once; the quotes are stripped only where it gave NULL.)"""
    value = F.coalesce(text.try_cast(typ), F.btrim(text, F.lit('"')).try_cast(typ))
    return F.isnan(value) | (F.abs(value) == F.lit(float("inf")))
