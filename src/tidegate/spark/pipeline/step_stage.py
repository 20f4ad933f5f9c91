"""Later steps on Spark (Stream Analytics' ``WITH``): windows and per-event steps over the
job's events or an earlier step's rows.

Each later window step is the window stage (:mod:`tidegate.spark.pipeline.window_stage`)
applied to what it reads in the same micro-batch: the batch's kept events (``from: input``,
timed by their system time, as the first step's window times them) or the rows the step it
reads emitted (several steps may read one), timed by their System.Timestamp: a window row by
its ``window_end``, any other row (per event, analytic, join) by its ``system_time``. A later
per-event step joins its reference tables, then filters and projects each row it reads in
the same batch (:mod:`.step_rows`); its rows keep that System.Timestamp. Why one frontier serves every
step: every step emits a row exactly when the job watermark ``W`` passes its time (a window's
end, an event's or a join row's time) — a per-event step with the row it reads — so after a
batch closed at ``W`` each step has emitted every row timed before ``W``: the next step's
input watermark is ``W`` too, and it closes its own windows on the same ``(previous,
current)`` frontiers in the same batch. With ``over``, the first step may close a key's
windows on that key's watermark; later steps wait for the job's scalar frontier, which no
key's is below, so they never miss a row.

Each window step keeps its own buffer in the state version (frame ``step<i>``: the rows its
open windows still need), so a restart from a checkpoint resumes every step where it was, and
a replay from ``T − L`` (``L`` adding up the spans along the longest way through the steps)
rebuilds them. A step with analytic functions keeps its buffer the same way
(:mod:`.step_analytics`); a plain per-event step holds nothing. Only the window steps no step reads are cut at
the first output time as they run: a step another reads feeds it everything, and an output of
such a step, or of a per-event step, is cut where it is written (:mod:`.named_outputs`).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tidegate.eventtime.windows import HoppingWindow, TumblingWindow
from tidegate.jobspec import JobSpec
from tidegate.jobspec.step_spec import StepSpec
from tidegate.spark.pipeline.sink.state import StateStore
from tidegate.spark.pipeline.step_analytics import analytic_later_step
from tidegate.spark.pipeline.step_join import join_later_step
from tidegate.spark.pipeline.step_rows import Enrich, input_rows, per_event_step
from tidegate.spark.pipeline.window_stage import (
    aggregate_emitted,
    entering,
    fixed_window_step,
    still_buffered,
    window_step,
)
from tidegate.spark.spec_columns import spec_column

_CACHED = StorageLevel.MEMORY_AND_DISK_DESER  # as the engine caches its own steps


def frame_name(index: int) -> str:
    """The state frame of later window step ``index`` (1 for the first later step): by
    position, not name, as the fingerprint hashes the steps by position."""
    return f"step{index}"


def step_rows(step: StepSpec, emitted: DataFrame, reads_window: bool) -> DataFrame:
    """What ``step`` takes from the rows the step it reads emitted: every column, with
    ``system_us`` their System.Timestamp, the ``group_by`` expressions as columns, and
    ``partition`` / ``offset`` (NULL for a window's rows, which have no one position)."""
    read = emitted.where(spec_column(step.filter)) if step.filter else emitted
    time = F.col("window_end") if reads_window else F.col("system_time")
    columns = [c for c in read.columns if c not in ("partition", "offset")]
    position = [
        F.col(c) if c in read.columns else F.lit(None).cast(kind).alias(c)
        for c, kind in (("partition", "int"), ("offset", "bigint"))
    ]
    lower = {c.lower() for c in read.columns}
    group = [spec_column(e).alias(n) for n, e in step.group_by if n.lower() not in lower]
    return read.select(*position, F.unix_micros(time).alias("system_us"), *columns, *group)


def run_later_steps(
    spark: SparkSession,
    store: StateStore,
    spec: JobSpec,
    emitted: DataFrame,
    events: DataFrame | None,
    version: int | None,
    frontiers: tuple[int, int],
    emit_after_us: int | None,
    enrich: Mapping[str, Enrich] | None = None,
) -> tuple[dict[str, DataFrame], list[tuple[str, DataFrame]], list[DataFrame]]:
    """``emitted``: the first step's rows of the batch; ``events``: the batch's kept events,
    for the steps that read the input (None when none does); ``enrich``: the reference joins
    of each step that has them, by name. (Every step's rows by step name,
    the window steps no step reads cut at ``emit_after_us``; each later window step's next
    buffer by frame name; the persisted steps to unpersist after the batch.)"""
    if spec.first_step is None:
        raise ValueError(f"job {spec.name} has no steps to run")
    by_step = {spec.first_step: emitted}
    buffers: list[tuple[str, DataFrame]] = []
    cached: list[DataFrame] = []
    windowed = {s.name for s in spec.steps if s.window is not None} | (
        {spec.first_step} if spec.window is not None else set()
    )
    ends = leaves(spec)
    payload = list(spec.row_fields)
    for index, step in enumerate(spec.steps, start=1):
        if step.reads_input and events is None:
            raise ValueError(f"job {spec.name}: step {step.name} reads the input, and no events were given")
        if step.join is not None:  # two steps' rows joined, each row once final
            rows, buffer, stepped = join_later_step(
                store, step, frame_name(index), by_step[step.join.left], by_step[step.join.right], windowed,
                version, frontiers,
            )  # fmt: skip
            by_step[step.name] = rows
            buffers.append((frame_name(index), buffer))
            cached.append(stepped)
            continue
        read = events if step.reads_input else by_step[step.reads]
        assert read is not None  # checked above
        if step.analytics:  # per event with analytic functions: each row once final, as the first step's
            rows, buffer, stepped = analytic_later_step(
                store, spec, step, frame_name(index), read, step.reads in windowed, version, frontiers
            )
            by_step[step.name] = rows
            buffers.append((frame_name(index), buffer))
            cached.append(stepped)
            continue
        if step.window is None:  # per event: the rows it reads, filtered and projected, in this batch
            joins = (enrich or {}).get(step.name) if step.references else None
            if step.references and joins is None:
                raise ValueError(f"job {spec.name}: step {step.name} joins reference tables, and no join was given")
            by_step[step.name] = per_event_step(step, read, step.reads in windowed, payload, joins)
            continue
        taken = input_rows(step, read, payload) if step.reads_input else step_rows(step, read, step.reads in windowed)
        fresh = entering(taken, step.window)
        held = store.frame(version, frame_name(index), fresh.schema)
        rows = fresh if held is None else held.unionByName(fresh)
        group_columns = [n for n, _ in step.group_by]
        cut = emit_after_us if step.name in ends else None  # a step another reads feeds it everything
        if isinstance(step.window, (TumblingWindow, HoppingWindow)):  # Spark SQL only
            stepped = fixed_window_step(spark, rows, step.window, frontiers, None, None, cut)
        else:  # the core per key group, in Python workers
            stepped = window_step(rows, step.window, group_columns, frontiers, None, None, cut)
        stepped = stepped.persist(_CACHED)  # the next step (or the output) and the buffer both read it
        cached.append(stepped)
        buffers.append((frame_name(index), still_buffered(stepped, rows.columns)))
        by_step[step.name] = aggregate_emitted(stepped, group_columns, step.aggregates, step.having)
    return by_step, buffers, cached


def leaves(spec: JobSpec) -> set[str]:
    """The later window steps no step reads: each is cut at the first output time as it runs
    (a per-event step's rows are cut where they are written, by their time)."""
    read = {r for s in spec.steps for r in s.reads_all}
    return {s.name for s in spec.steps if s.window is not None and s.name not in read}
