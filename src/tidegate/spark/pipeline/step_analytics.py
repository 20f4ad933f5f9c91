"""A later step's analytic functions on Spark (WITH): LAG, LAST, ISFIRST … over the rows it reads.

The analytic stage (:mod:`.analytic_stage`) runs over the rows the step reads as it runs over
the first step's events: each row enters with its System.Timestamp as ``system_us`` (a window
row's ``window_end``, any other row's ``system_time``; the job's events their system time),
the stage keeps what is not final yet and what later rows may look back to as frame
``step<i>`` of the state version, and a row is emitted once the job watermark passes its
time — every row it may look back to, timed before it, was emitted by the step it reads in
this batch or an earlier one (:mod:`.step_stage`).

Rows of a step have no arrival time, and a window's rows no position: among rows of one
partition key with equal times, the order is fixed by their content (a hash of every column,
in the arrival time's place), then their position, so every batching and every replay takes
them the same way. The job's events keep the first step's order: arrival time, partition,
offset.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from tidegate.jobspec import JobSpec
from tidegate.jobspec.step_spec import EVENT_OUTPUT, StepSpec
from tidegate.spark.pipeline.analytic_stage import analytic_step, emitted_output, entering_rows, still_held
from tidegate.spark.pipeline.sink.state import StateStore

_CACHED = StorageLevel.MEMORY_AND_DISK_DESER  # as the engine caches its own steps
_NO_PARTITION = -1  # a row without a position (a window's) while it is in the stage
_CONTENT_SPAN = 1 << 50  # the content hash, in µs as an arrival time: about 35 years from the epoch


def step_view(spec: JobSpec, step: StepSpec, read_columns: list[str]) -> JobSpec:
    """``step`` as the analytic stage reads a job: its functions, filter and select over rows
    whose payload is ``read_columns``."""
    return replace(
        spec, payload=dict.fromkeys(read_columns, ""), analytics=step.analytics, filter=step.filter,
        select=step.select, window=None, join=None, group_by=(), aggregates=(), having=None, first_step=None,
        steps=(), references=(), cross_apply=None, over=None,
    )  # fmt: skip


def analytic_later_step(
    store: StateStore,
    spec: JobSpec,
    step: StepSpec,
    frame: str,
    read: DataFrame,
    reads_window: bool,
    version: int | None,
    frontiers: tuple[int, int],
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(the step's rows of the batch, its next buffer for ``frame``, the persisted step to
    unpersist after the batch). ``read``: the batch's kept events (``from: input``) or the rows
    the step it reads emitted in the batch (``reads_window``: a window step's)."""
    if step.reads_input:
        view, rows = step_view(spec, step, list(spec.row_fields)), read
    else:
        values = [c for c in read.columns if c not in EVENT_OUTPUT]
        view, rows = step_view(spec, step, values), _as_events(read, values, reads_window)
    fresh = entering_rows(view, rows, None)
    held = store.frame(version, frame, fresh.schema)
    stepped_over = fresh if held is None else held.unionByName(fresh)
    stepped = analytic_step(view, stepped_over, frontiers).persist(_CACHED)  # output and buffer both read it
    emitted = emitted_output(view, stepped)
    if not step.reads_input:  # a row without a position gets its NULLs back
        lost = F.col("partition") == _NO_PARTITION
        emitted = emitted.withColumns(
            {"partition": F.when(~lost, F.col("partition")), "offset": F.when(~lost, F.col("offset"))}
        )
    return emitted, still_held(stepped, stepped_over.columns), stepped


def _as_events(read: DataFrame, values: list[str], reads_window: bool) -> DataFrame:
    """A step's rows as the analytic stage takes events: a position (-1 and 0 for none), the
    content hash as arrival time, no key, the System.Timestamp as ``system_us``, then ``values``."""
    time = F.col("window_end") if reads_window else F.col("system_time")
    has = set(read.columns)
    partition = F.col("partition") if "partition" in has else F.lit(None).cast("int")
    offset = F.col("offset") if "offset" in has else F.lit(None).cast("bigint")
    content = F.pmod(F.xxhash64(*[F.col(c) for c in read.columns]), F.lit(_CONTENT_SPAN))
    return read.select(
        F.coalesce(partition, F.lit(_NO_PARTITION)).alias("partition"),
        F.coalesce(offset, F.lit(0).cast("bigint")).alias("offset"),
        F.timestamp_micros(content).alias("arrival_time"),
        F.lit(None).cast("string").alias("key"),
        F.unix_micros(time).alias("system_us"),
        *[F.col(c) for c in values],
    )
