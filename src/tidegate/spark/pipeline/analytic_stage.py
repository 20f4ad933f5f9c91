"""Analytic stage on Spark: LAG, LAST, ISFIRST — any registered analytic function — per partition key,
each result emitted once final.

The stage keeps a buffer of kept events: those whose result is not final yet (``S ≥ W``)
and, as history, those a later event may still look back to (what
:func:`tidegate.eventtime.analytics.step` keeps). Each micro-batch, buffer ∪ new kept events
are grouped by the functions' PARTITION BY (all of them one group without it) and each group
goes through the core's ``step`` in analytic order — (system time, arrival time, log
partition, offset) — on executors. The function's Spark SQL parts (value, default, WHEN,
partition key) are evaluated once, when an event enters the stage, and ride in the buffer
with it; so the streaming result is the batch query over the same events, by construction,
and a replay repeats it. Nothing here is particular to one function: each declares its
output type (:mod:`tidegate.eventtime.analytic_functions`) and the core computes it.

Emitted rows then go through the job's ``filter`` (which may read the analytic columns: as
in Stream Analytics, the functions see every kept event, the filter only their output) and
``select``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DecimalType,
    DoubleType,
    IntegralType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from tidegate.eventtime import analytics as A
from tidegate.eventtime.analytic_functions.base import VALUE
from tidegate.eventtime.analytic_functions.over_duration import ARRAY, WIDENED
from tidegate.jobspec import JobSpec
from tidegate.jobspec.expressions import canonical_expression
from tidegate.jobspec.fields import HEADERS
from tidegate.spark.pipeline.window_stage import ROLE, Frontiers, arrival_us, one_group_or, row_frontiers
from tidegate.spark.spec_columns import spec_column

# the columns an event carries through the stage besides its payload and the function parts (and
# headers, when the job reads them: its filter and select read the stage's rows)
CARRIED = ["partition", "offset", "arrival_time", "key", "system_us"]
# the Spark SQL types a function may declare for its column, besides its value's
RESULT_TYPES = {"bigint": LongType(), "double": DoubleType(), "boolean": BooleanType(), "string": StringType()}


def per_over_key(spec: JobSpec) -> bool:
    """The functions partition by exactly the ``over`` field: each key's results wait only
    for its own substream watermark (semantics §3)."""
    if not spec.over:
        return False
    keys = {tuple(canonical_expression(p) for p in a.partition_by) for a in spec.analytics}
    return keys == {(canonical_expression(spec.over),)}


def _parts(i: int) -> tuple[str, str, str]:
    return f"_a{i}_value", f"_a{i}_default", f"_a{i}_when"


def entering_rows(spec: JobSpec, kept: DataFrame, unit: str | None) -> DataFrame:
    """This batch's kept events as the stage holds them: carried columns, payload, the
    partition key ``_pk<j>`` and each function's evaluated parts."""
    columns = CARRIED + ([HEADERS] if HEADERS in kept.columns else []) + ([unit] if unit else []) + list(spec.payload)
    parts: dict[str, Column] = {}
    for j, expr in enumerate(spec.analytics[0].partition_by if spec.analytics else ()):
        parts[f"_pk{j}"] = spec_column(expr)
    typed = kept.select(*[spec_column(a.expression).alias(_parts(i)[0]) for i, a in enumerate(spec.analytics)
                          if a.expression is not None]).schema  # fmt: skip
    for i, a in enumerate(spec.analytics):
        value, default, when = _parts(i)
        if a.expression is not None:
            parts[value] = spec_column(a.expression)
            if a.default is not None:  # the default takes the value's type
                parts[default] = spec_column(a.default).cast(typed[value].dataType)
        if a.when is not None:
            parts[when] = spec_column(a.when).cast("boolean")
    return kept.select(*columns, *[c.alias(n) for n, c in parts.items()])


def _result_type(spec: JobSpec, i: int, schema: StructType) -> DataType:
    """The column's type as the function declares it: its value's, or a Spark SQL type."""
    result = spec.analytics[i].function.result
    if result == WIDENED:  # SUM: as Spark's sum widens its input
        return widened(schema[_parts(i)[0]].dataType)
    if result == ARRAY:  # MAX(expr, n): its n largest values
        return ArrayType(schema[_parts(i)[0]].dataType, containsNull=True)
    return schema[_parts(i)[0]].dataType if result == VALUE else RESULT_TYPES[result]


def widened(value: DataType) -> DataType:
    """The type of a sum of ``value``s: whole numbers ``bigint``, decimals ten digits wider,
    any other number ``double``."""
    if isinstance(value, IntegralType):
        return LongType()
    if isinstance(value, DecimalType):
        return DecimalType(min(38, value.precision + 10), value.scale)
    return DoubleType()


def analytic_step(
    spec: JobSpec,
    rows: DataFrame,
    frontiers: Frontiers,
    key_frontiers: dict[str | None, Frontiers] | None = None,
    unit_column: str | None = None,
    emit_after_us: int | None = None,
) -> DataFrame:
    """``rows``: buffer ∪ :func:`entering_rows`. Returns them tagged ``_role``: ``emit`` rows
    (final now, with the analytic columns) and ``keep`` rows (the next buffer); an event
    may be both."""
    result_fields = [
        StructField(a.name, _result_type(spec, i, rows.schema), True) for i, a in enumerate(spec.analytics)
    ]
    schema = StructType(list(rows.schema.fields) + result_fields + [StructField(ROLE, StringType(), False)])
    names = [f.name for f in schema.fields]
    functions = [a.function for a in spec.analytics]
    present = set(rows.columns)
    integral = {f.name for f in result_fields if isinstance(f.dataType, IntegralType)}

    def per_group(pdf: pd.DataFrame) -> pd.DataFrame:
        order = A.analytic_order(
            pdf["system_us"].to_numpy(np.int64),
            arrival_us(pdf["arrival_time"]),
            pdf["partition"].to_numpy(),
            pdf["offset"].to_numpy(),
        )
        pdf = pdf.iloc[order].reset_index(drop=True)
        prev, now = row_frontiers(pdf, frontiers, key_frontiers, unit_column)

        def column(name: str):
            return pdf[name].to_numpy(dtype=object) if name in present else None

        st = A.step(
            functions, pdf["system_us"].to_numpy(np.int64), prev, now,
            whens=[column(_parts(i)[2]) for i in range(len(functions))],
            values=[column(_parts(i)[0]) for i in range(len(functions))],
            defaults=[column(_parts(i)[1]) for i in range(len(functions))],
            emit_after_us=emit_after_us,
        )  # fmt: skip
        emitted = pdf[st.emit].reset_index(drop=True)  # the results below align by position
        kept = pdf[st.keep].reset_index(drop=True)
        for a, values in zip(spec.analytics, st.results, strict=True):  # one result per function
            emitted[a.name] = pd.Series([_plain(v, a.name in integral) for v in values[st.emit]], dtype=object)
            kept[a.name] = pd.Series([None] * len(kept), dtype=object)
        emitted[ROLE] = "emit"
        kept[ROLE] = "keep"
        return pd.concat([emitted, kept], ignore_index=True)[names]

    keys = one_group_or([F.col(f"_pk{j}") for j in range(len(spec.analytics[0].partition_by))])
    return rows.groupBy(*keys).applyInPandas(per_group, schema)


def _plain(value, integral: bool):
    """A result as Arrow takes it: NULL for a missing value (pandas reads NULL doubles and
    integers as NaN), whole numbers for integer columns."""
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NaT:
        return None
    return int(value) if integral else value


def emitted_output(spec: JobSpec, stepped: DataFrame) -> DataFrame:
    """The emitted events through ``filter`` and ``select``: position, system time, columns."""
    emitted = stepped.where(F.col(ROLE) == "emit")
    if spec.filter:
        emitted = emitted.where(spec_column(spec.filter))
    position = [F.col("partition"), F.col("offset"), F.timestamp_micros("system_us").alias("system_time")]
    if spec.select:
        return emitted.select(*position, *[spec_column(e).alias(n) for n, e in spec.select])
    return emitted.select(*position, *spec.payload.keys(), *[a.name for a in spec.analytics])


def still_held(stepped: DataFrame, buffer_columns: Sequence[str]) -> DataFrame:
    return stepped.where(F.col(ROLE) == "keep").select(*buffer_columns)
