"""The comparison frame: a job's output set against its batch reference, row by row.

Great Expectations validates one table with fixed column names, but every job has its
own group-by and aggregate columns. So instead of a suite per job, each (output,
reference) pair is turned into one frame whose columns are the same for every job, and
one committed suite (``expectations/``) holds the rules of semantics §8 over those columns.
The job-specific numbers (window size, tolerance) reach the suite as expectation
parameters at run time.

Per-event outputs — a join's rows, an analytic job's rows, a plain per-event job's rows
(a filter, a projection, a reference join) — are compared the same way:
a row's "window" is its output time, an instant (``window_start = window_end =
system_time``, ``window_us`` 0), its key the input position(s) that make it
(``partition``, ``offset``; a join adds ``right_partition``, ``right_offset``, NULL for an
unmatched left row), and its values every selected column. Only the time and the left
position must be non-null there: a NULL right side or a LAG without a previous value is a
value, compared null-safe with the reference.

The frame is a full outer join of the output and the reference on the window and the
group-by keys (null-safe, so a null key matches only a null key). It has one row per
output row — a doubled output row stays two rows — plus one per reference row that
the output lacks:

=================  ==========================================================================
column             meaning
=================  ==========================================================================
window_start/_end  the window's start and end (timestamps), from either side
window_start_us    the same in µs since epoch, for reports that must not depend on a timezone
window_end_us
key                the group-by values as a JSON object, nulls kept: ``{"deviceId":"dev-1"}``;
                   ``{}`` for a job without group-by; per-event rows: their input position(s)
in_output          the output has this (window, key)
in_reference       the reference has this (window, key)
output_rows        how many output rows have this (window, key); 0 if none
reference_rows     how many reference rows have it
window_us          end − start in µs
null_values        how many of the output row's window, key and aggregate values are null (per-event
                   rows: of its time and left position)
null_columns       their names, comma-separated ("" when none)
value_difference   where both sides have the row: the largest difference over the aggregates,
                   relative (``|got − expected| / max(|got|, |expected|)``) for floating point,
                   0 or 1 (equal or not) for every other type; null elsewhere
mismatches         where both sides have the row: JSON list of ``{column, expected, got}`` for
                   the aggregates that differ by more than the tolerance; null when none
=================  ==========================================================================

Only rows whose window ends in the span ``(from, to]`` are compared, on both sides: the
span is what a recovery recomputed, and windows outside it were validated before.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, FloatType

from tidegate.errors import TidegateError
from tidegate.jobspec import JobSpec
from tidegate.jobspec.cross_apply import INDEX_COLUMN
from tidegate.jobspec.joins import OUTPUT_POSITION
from tidegate.jobspec.references import joined_columns
from tidegate.lineage.layout import LAYOUT_COLUMNS

WINDOW_COLUMNS = ("window_start", "window_end")
EVENT_TIME = "system_time"  # a per-event row's output time: final once the watermark passes it
EVENT_POSITION = ("partition", "offset")  # the event an analytic row is the result of
JOIN_POSITION = tuple(c for c in OUTPUT_POSITION if c != EVENT_TIME)  # a join row's left and right event
IGNORED_COLUMNS = LAYOUT_COLUMNS  # the batch id in the rows, the folders' partition columns
_OUT, _REF = "_o", "_r"  # column prefixes of the two sides while they are joined


@dataclass(frozen=True)
class Layout:
    """Which columns of a job's output identify a row (window or time, and keys) and which
    are its values; ``required`` are those that may never be null (None: every column)."""

    keys: tuple[str, ...]
    aggregates: tuple[str, ...]  # the compared values: aggregates, or a per-event row's columns
    time: str | None = None  # per-event rows: the column holding the row's output time
    required: tuple[str, ...] | None = None

    @classmethod
    def of(cls, spec: JobSpec, positioned: bool = True) -> Layout:
        """Window rows by window and group-by key; every per-event row — a join's, an analytic
        job's, a per-event step's, a plain per-event job's — by its time and position(s).
        ``positioned`` False: per-event rows of window rows (a per-event step over a window
        step), which have no position: by their time and every column."""
        spec = spec.emitted  # a job with steps: the rows of the step it emits
        if spec.window is not None:
            return cls(tuple(n for n, _ in spec.group_by), tuple(n for n, _ in spec.aggregates))
        if not positioned:
            return cls(tuple(n for n, _ in spec.select), (), EVENT_TIME, (EVENT_TIME,))
        if spec.join is not None:
            return cls(JOIN_POSITION, tuple(n for n, _ in spec.select), EVENT_TIME, (EVENT_TIME,) + EVENT_POSITION)
        # an analytic row, and a plain per-event job's row (one per kept event, final once the
        # watermark passes its time): keyed by its event's position, compared over its time
        values = [n for n, _ in spec.select] or [*spec.payload, *(a.name for a in spec.analytics)]
        position: tuple[str, ...] = EVENT_POSITION
        if spec.cross_apply is not None:  # one row per element: its place in the event is part of its identity
            values = [n for n, _ in spec.select] or [spec.cross_apply.name, *spec.payload]
            position += (INDEX_COLUMN,)
        if spec.references:  # which snapshot of each table each row was joined with is part of the row
            values += joined_columns(spec.references, spec.select)
        return cls(position, tuple(values), EVENT_TIME, (EVENT_TIME,) + position)

    @property
    def per_event(self) -> bool:
        return self.time is not None

    @property
    def columns(self) -> tuple[str, ...]:
        """What the output must have."""
        first = WINDOW_COLUMNS if self.time is None else (self.time,)  # per-event: its time
        return first + self.keys + self.aggregates

    @property
    def not_null(self) -> tuple[str, ...]:
        """The frame's columns a null in which breaks ``no_null_values``."""
        if self.required is None:
            return WINDOW_COLUMNS + self.keys + self.aggregates
        return WINDOW_COLUMNS + tuple(c for c in self.required if c != self.time)


def comparison_frame(
    layout: Layout,
    output: DataFrame,
    reference: DataFrame,
    span_us: tuple[int, int] | None,
    relative_tolerance: float,
) -> DataFrame:
    """The frame described in the module docstring, for window ends in ``(from, to]``."""
    out = _side(output, "output", layout, span_us, _OUT)
    ref = _side(reference, "reference", layout, span_us, _REF)
    on = [out[_OUT + c].eqNullSafe(ref[_REF + c]) for c in WINDOW_COLUMNS + layout.keys]
    joined = out.join(ref, on=on, how="full_outer")

    def both(name: str) -> Column:
        return F.coalesce(F.col(_OUT + name), F.col(_REF + name))

    in_output = F.col(_OUT + "_rows").isNotNull()
    in_reference = F.col(_REF + "_rows").isNotNull()
    matched = in_output & in_reference
    differences = {a: _difference(joined, a) for a in layout.aggregates}
    null_flags = [F.when(in_output & F.col(_OUT + c).isNull(), F.lit(c)) for c in layout.not_null]
    return joined.select(
        both("window_start").alias("window_start"),
        both("window_end").alias("window_end"),
        F.unix_micros(both("window_start")).alias("window_start_us"),
        F.unix_micros(both("window_end")).alias("window_end_us"),
        _key_json(layout.keys, both).alias("key"),
        in_output.alias("in_output"),
        in_reference.alias("in_reference"),
        F.coalesce(F.col(_OUT + "_rows"), F.lit(0)).alias("output_rows"),
        F.coalesce(F.col(_REF + "_rows"), F.lit(0)).alias("reference_rows"),
        (F.unix_micros(both("window_end")) - F.unix_micros(both("window_start"))).alias("window_us"),
        sum((F.when(flag.isNotNull(), 1).otherwise(0) for flag in null_flags), F.lit(0)).alias("null_values"),
        F.concat_ws(",", *null_flags).alias("null_columns"),
        F.when(matched, _largest(list(differences.values()))).alias("value_difference"),
        F.when(matched, _mismatches(differences, relative_tolerance)).alias("mismatches"),
    )


def _side(df: DataFrame, role: str, layout: Layout, span_us: tuple[int, int] | None, prefix: str) -> DataFrame:
    present = [f.name for f in df.schema.fields if f.name not in IGNORED_COLUMNS]
    missing = [c for c in layout.columns if c not in present]
    if missing:
        raise TidegateError(
            f"the {role} has no column {', '.join(missing)} (it has {', '.join(present)})",
            "pass the job's output (window rows: window_start, window_end, group-by columns, aggregates; "
            "join and analytic rows: system_time, positions, selected columns) "
            "and check that the spec is the one that produced it",
        )
    df = df.select(*layout.columns)
    if layout.time is not None:  # per-event: an instant, [t, t]
        df = df.select(
            F.col(layout.time).alias("window_start"),
            F.col(layout.time).alias("window_end"),
            *layout.keys,
            *layout.aggregates,
        )
    if span_us is not None:
        low, high = span_us
        end = F.unix_micros(F.col("window_end"))
        df = df.where((end > F.lit(low)) & (end <= F.lit(high)))
    per_row = Window.partitionBy(*(WINDOW_COLUMNS + layout.keys))
    df = df.withColumn("_rows", F.count(F.lit(1)).over(per_row))
    return df.select(*(F.col(c).alias(prefix + c) for c in df.columns))


def _key_json(keys: tuple[str, ...], value) -> Column:
    if not keys:
        return F.lit("{}")
    return F.to_json(F.struct(*(value(k).alias(k) for k in keys)), {"ignoreNullFields": "false"})


def _difference(joined: DataFrame, name: str) -> Column:
    """0 when equal (nulls equal nulls), else relative for floating point and 1 otherwise."""
    got, expected = F.col(_OUT + name), F.col(_REF + name)
    types = {joined.schema[_OUT + name].dataType, joined.schema[_REF + name].dataType}
    unequal = F.lit(1.0)
    if any(isinstance(t, (DoubleType, FloatType)) for t in types):
        g, e = got.cast("double"), expected.cast("double")
        # greatest(|g|, |e|) > 0 whenever g != e; NaN (inf − inf, NaN vs number) counts as unequal
        unequal = F.coalesce(F.nanvl(F.abs(g - e) / F.greatest(F.abs(g), F.abs(e)), F.lit(1.0)), F.lit(1.0))
    return F.when(got.eqNullSafe(expected), F.lit(0.0)).otherwise(unequal)


def _largest(values: list[Column]) -> Column:
    if not values:
        return F.lit(0.0)
    return values[0] if len(values) == 1 else F.greatest(*values)


def _mismatches(differences: dict[str, Column], relative_tolerance: float) -> Column:
    if not differences:
        return F.lit(None).cast("string")
    found = F.filter(
        F.array(*(
            F.when(diff > F.lit(relative_tolerance), F.struct(
                F.lit(name).alias("column"),
                F.col(_REF + name).cast("string").alias("expected"),
                F.col(_OUT + name).cast("string").alias("got"),
            ))
            for name, diff in differences.items()
        )),
        lambda m: m.isNotNull(),
    )  # fmt: skip
    return F.when(F.size(found) > 0, F.to_json(found, {"ignoreNullFields": "false"}))
