"""Per-event rows on Spark: a per-event query's rows, and what a later step (WITH) reads.

* :func:`event_rows` — the rows of a per-event query over the kept events: each event's
  position, its system time as ``system_time`` and the selected columns (or the payload).
  A per-event first step and a per-event later step reading the job's events
  (``from: input``) both emit these.
* :func:`per_event_step` — a per-event later step over an earlier step's rows: its reference
  joins (each row by its System.Timestamp), filter and projection of each row, which keeps
  that row's System.Timestamp (a window row's ``window_end``, any other row's
  ``system_time``) and is emitted in the same micro-batch as the row itself, so it is final
  exactly when that row is.
* :func:`input_rows` — what a later window step reading the job's events keeps of each: its
  position, system time (``system_us``), payload and group columns, as the first step's window
  keeps them.

None of them holds anything between micro-batches: per-event rows are computed from the
rows of the batch alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from tidegate.jobspec import JobSpec
from tidegate.jobspec.cross_apply import INDEX_COLUMN
from tidegate.jobspec.reference import ReferenceSpec
from tidegate.jobspec.references import joined_columns
from tidegate.jobspec.step_spec import EVENT_OUTPUT, StepSpec
from tidegate.spark.spec_columns import spec_column

NamedExprs = tuple[tuple[str, str], ...]
Enrich = Callable[[DataFrame, str], DataFrame]  # a step's reference joins: rows, their time column in µs
_TIME_US = "_step_system_us"  # a row's System.Timestamp in µs, while its step joins reference tables
_POSITION = (("partition", "int"), ("offset", "bigint"))


def event_rows(
    kept: DataFrame,
    select: NamedExprs,
    fields: Sequence[str],
    *,
    cross_apply: bool = False,
    references: Sequence[ReferenceSpec] = (),
    named: bool = False,
) -> DataFrame:
    """Each kept event as a per-event row: ``partition``, ``offset`` (and ``cross_apply_index``
    with ``cross_apply``), ``system_time``, then the ``select`` columns — or every field of
    ``fields`` — and, after a reference join, the snapshot joined (and the table's row when
    nothing is selected; ``named``: a later step's tables)."""
    system_time = F.timestamp_micros("system_us").alias("system_time")
    position = [F.col("partition"), F.col("offset")] + ([F.col(INDEX_COLUMN)] if cross_apply else [])
    joined = joined_columns(references, select, named) if references else []  # and which snapshot of each table
    if select:
        return kept.select(*position, system_time, *[spec_column(e).alias(n) for n, e in select], *joined)
    return kept.select(*position, system_time, *(f for f in fields if f != INDEX_COLUMN), *joined)


def job_event_rows(spec: JobSpec, kept: DataFrame) -> DataFrame:
    """:func:`event_rows` of a per-event job (or first step): its select, payload, cross apply and reference."""
    return event_rows(
        kept, spec.select, list(spec.row_fields), cross_apply=spec.cross_apply is not None, references=spec.references
    )


def per_event_step(step: StepSpec, read: DataFrame, reads_window: bool, payload: Sequence[str],
                   enrich: Enrich | None = None) -> DataFrame:  # fmt: skip
    """The rows of the per-event later ``step`` from ``read``: the job's kept events when it
    reads the input (``payload``: what it keeps of each without a select), else the rows of
    the step it reads (``reads_window``: a window step's, timed by their ``window_end``).
    ``enrich``: its reference joins, applied before its filter, which may read them."""
    if step.reads_input:
        rows = read if enrich is None else enrich(read, "system_us")
        rows = rows.where(spec_column(step.filter)) if step.filter else rows
        return event_rows(rows, step.select, payload, references=step.references, named=True)
    time = F.col("window_end") if reads_window else F.col("system_time")
    rows = read if enrich is None else enrich(read.withColumn(_TIME_US, F.unix_micros(time)), _TIME_US).drop(_TIME_US)
    rows = rows.where(spec_column(step.filter)) if step.filter else rows
    position = [F.col(c) if c in rows.columns else F.lit(None).cast(kind).alias(c) for c, kind in _POSITION]
    if step.select:
        joined = joined_columns(step.references, step.select, named=True) if step.references else []
        values = [spec_column(e).alias(n) for n, e in step.select] + [F.col(c) for c in joined]
    else:  # every column read, then each table's row and snapshot
        values = [F.col(c) for c in rows.columns if c not in EVENT_OUTPUT]
    return rows.select(*position, time.alias("system_time"), *values)


def input_rows(step: StepSpec, kept: DataFrame, payload: Sequence[str]) -> DataFrame:
    """What the later window ``step`` reading the job's events takes from the batch's kept
    events: those through its filter, with their position, ``system_us``, ``payload`` fields
    and each group column computed from them."""
    rows = kept.where(spec_column(step.filter)) if step.filter else kept
    carried = ["partition", "offset", "system_us", *payload]
    lower = {c.lower() for c in carried}
    group = [spec_column(e).alias(n) for n, e in step.group_by if n.lower() not in lower]
    return rows.select(*carried, *group)


def reads_events(spec: JobSpec) -> bool:
    """Whether a later step of ``spec`` reads the job's events (``from: input``)."""
    return any(s.reads_input for s in spec.steps)
