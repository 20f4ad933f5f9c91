"""The cross-apply stage: one kept event to one row per element of an array field, or per
property of a record field (:mod:`tidegate.jobspec.cross_apply`, Stream Analytics' ``CROSS APPLY``).

It runs on the policy's kept events, so the policy judges events, never rows (semantics §2):
each row keeps its event's partition, offset, arrival and event time, system time and unit,
and gains the spec's column (``a.ArrayIndex``/``a.ArrayValue`` or
``p.PropertyName``/``p.PropertyValue``) and ``cross_apply_index``, its place in the event: with
the partition and offset, its identity. An empty or NULL array or record gives no row.

The bound on rows per event is kept before the policy, in the parse stage's pass: an event
over ``max_rows`` is bad input (:func:`bound_rows`), quarantined with the reason, never cut short.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from tidegate.jobspec.cross_apply import ELEMENTS, INDEX_COLUMN, TOO_MANY_ROWS, CrossApplySpec
from tidegate.jobspec.nested_types import struct_fields

_POSITION, _KEY, _VALUE = "_ca_pos", "_ca_key", "_ca_value"


def bound_rows(judged: DataFrame, cross_apply: CrossApplySpec | None, reason: str) -> DataFrame:
    """``judged`` (the parse stage's rows) with the events that would give more than
    ``max_rows`` rows marked bad in column ``reason`` (an earlier reason stays)."""
    if cross_apply is None:
        return judged
    count = F.size(_keyed(F.col(cross_apply.field), cross_apply, judged))
    over = F.when(count > F.lit(cross_apply.max_rows), F.concat(
        F.lit(f"{TOO_MANY_ROWS}: {cross_apply.field} has "), F.format_number(count, 0),
        F.lit(f" {'elements' if cross_apply.kind == ELEMENTS else 'properties'}, more than"
              f" cross_apply.max_rows {cross_apply.max_rows:,}"),
    ))  # fmt: skip
    return judged.withColumn(reason, F.coalesce(F.col(reason), over))


def cross_applied(kept: DataFrame, cross_apply: CrossApplySpec | None) -> DataFrame:
    """One row per element (or property) of each kept event, with the spec's column and
    :data:`INDEX_COLUMN`; ``kept`` itself without ``cross_apply``."""
    if cross_apply is None:
        return kept
    source = _keyed(F.col(cross_apply.field), cross_apply, kept)
    if cross_apply.kind == ELEMENTS:
        rows = kept.select("*", F.posexplode(source).alias(_POSITION, _VALUE))
        column = F.struct(F.col(_POSITION).cast("bigint").alias("ArrayIndex"), F.col(_VALUE).alias("ArrayValue"))
    else:
        rows = kept.select("*", F.posexplode(source).alias(_POSITION, _KEY, _VALUE))
        column = F.struct(F.col(_KEY).alias("PropertyName"), F.col(_VALUE).alias("PropertyValue"))
    added = {cross_apply.name: column, INDEX_COLUMN: F.col(_POSITION).cast("bigint")}
    return rows.withColumns(added).drop(_POSITION, _KEY, _VALUE)


def _keyed(field: Column, cross_apply: CrossApplySpec, frame: DataFrame) -> Column:
    """The field as what is exploded: the array, the map, or a record's fields as a map in
    their declared order (every field has one type: the spec's parse checked it)."""
    if cross_apply.kind == ELEMENTS:
        return field
    typ = frame.schema[cross_apply.field].dataType.simpleString()
    if not typ.startswith("struct<"):
        return field
    names = [name for name, _ in struct_fields(typ)]
    return F.when(
        field.isNotNull(), F.map_from_arrays(F.array(*map(F.lit, names)), F.array(*(field[n] for n in names)))
    )
