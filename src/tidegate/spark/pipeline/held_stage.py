"""The stage that holds rows between micro-batches: a window (its events, or their merged
parts), analytic functions or a join, then any later steps (WITH) — chosen once per job.

It owns what the engine asks of that stage each batch: the state frame it keeps in a state
version (:attr:`HeldStage.held`), the rows it steps over (what the previous version held and
the batch's kept events, :meth:`HeldStage.rows`), and its step from the previous frontier to
this one (the rows it emits and what it holds next, :meth:`HeldStage.step`). What each of
those stages computes lives in its own module (``window_stage``, ``window_partials``,
``analytic_stage``, ``join_stage``, ``step_stage``); the engine decides when they run.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tidegate.eventtime.windows import HoppingWindow, TumblingWindow, close_delay_us
from tidegate.jobspec import JobSpec
from tidegate.lineage.layout import BATCH_COLUMN
from tidegate.spark.columns import cols, reused
from tidegate.spark.pipeline import join_stage
from tidegate.spark.pipeline.analytic_stage import (
    analytic_step,
    emitted_output,
    entering_rows,
    per_over_key,
    still_held,
)
from tidegate.spark.pipeline.job_inputs import JobInputs
from tidegate.spark.pipeline.sink.files import HOUR_KEY, hour_columns, with_batch_id
from tidegate.spark.pipeline.sink.state import StateStore
from tidegate.spark.pipeline.step_rows import Enrich
from tidegate.spark.pipeline.step_stage import run_later_steps
from tidegate.spark.pipeline.window_partials import (
    FRAME as PARTIALS,
)
from tidegate.spark.pipeline.window_partials import (
    Partial,
    contributions,
    emitted_rows,
    merge_step,
    merged_parts,
    output_column,
    partials_for,
    step_on_driver,
    still_open,
    with_output_columns,
)
from tidegate.spark.pipeline.window_stage import (
    aggregate_emitted,
    entering,
    fixed_window_step,
    still_buffered,
    window_step,
)
from tidegate.spark.spec_columns import spec_column

# what DataFrame.cache() uses: the cached columnar batches kept as objects. PySpark's
# MEMORY_AND_DISK is the serialized level, which serializes every cached batch on the way in
# and back on every read — CPU on each micro-batch's critical path, for memory nobody needs.
CACHED = StorageLevel.MEMORY_AND_DISK_DESER

UNIT = "_unit"  # an event's ``over`` key as text: the unit of its substream

Frontiers = tuple[int, int]  # (the previous frontier, this batch's)
# per ``over`` key (as text; None for a NULL one): (its previous frontier, its frontier now)
KeyFrontiers = dict[str | None, tuple[int, int]]


class HeldStage:
    """A job's stage after the policy that keeps rows from one batch to the next."""

    def __init__(self, spark: SparkSession, spec: JobSpec, store: StateStore, inputs: JobInputs,
                 emit_after_us: int | None) -> None:  # fmt: skip
        self.spark = spark
        self.spec = spec
        self.store = store
        self.inputs = inputs
        self.emit_after_us = emit_after_us
        self.group_columns = [name for name, _ in spec.group_by]
        self.per_key = (
            bool(spec.over)
            and (
                (spec.window is not None and spec.over in self._group_sources())
                or (bool(spec.analytics) and per_over_key(spec))
            )
            and spec.watermark_percentile is None
        )  # a percentile watermark is one frontier for all
        # mergeable aggregates of a tumbling or hopping window: state keeps parts per open
        # (window, group), not the events (tidegate.spark.pipeline.window_partials)
        # (not with steps: a later step reads the window rows as Spark computes them; not with
        # having: the rows a window gives on the driver are not filtered there)
        self.partials = (
            None if spec.steps or spec.having else partials_for(spec.window, spec.aggregates, spec.row_fields)
        )

    def _parts(self) -> tuple[list[Partial], TumblingWindow | HoppingWindow]:
        """The parts the window keeps, and that window: asked only of a job whose window keeps
        parts (partials_for gives them only for a tumbling or hopping window)."""
        window = self.spec.window
        if self.partials is None or not isinstance(window, (TumblingWindow, HoppingWindow)):
            raise ValueError(f"job {self.spec.name}: its window stage keeps events, not parts")
        return self.partials, window

    @property
    def held(self) -> str:
        """The state frame holding what open windows need: their parts, or their events."""
        return PARTIALS if self.partials is not None else "buffer"

    @property
    def _first_emit_after(self) -> int | None:
        """Where the first step's output is cut: at the job's first output time, unless later
        steps read it — they need its rows before that time too (step_stage)."""
        return None if self.spec.steps else self.emit_after_us

    def _group_sources(self) -> set[str]:
        return {expr.strip() for _, expr in self.spec.group_by} | set(self.group_columns)

    # -- what it steps over --------------------------------------------------------------
    def rows(self, kept: DataFrame, version: int | None) -> DataFrame | None:
        """What the stage steps over, from the batch's kept events and what ``version`` held;
        None for a job without such a stage."""
        spec = self.spec
        return (
            self._window_rows(kept, version)
            if spec.window is not None
            else self._analytic_rows(kept, version)
            if spec.analytics
            else self._join_rows(kept, version)
            if spec.join
            else None
        )

    def _window_rows(self, kept: DataFrame, version: int | None) -> DataFrame:
        """What the window stage steps over: the events the previous version buffered (same
        columns as this batch's) and this batch's kept ones."""
        spec = self.spec
        fresh = kept.select(*_entering_window(bool(spec.over), tuple(spec.row_fields), tuple(spec.group_by)))
        fresh = entering(fresh, spec.window)
        buffer = self.store.frame(version, "buffer", fresh.schema)  # with parts: a version written before them
        events = fresh if buffer is None else buffer.unionByName(fresh)
        if self.partials is None:
            return events
        partials, window = self._parts()
        keys = self._partial_keys()
        contributed = contributions(events, window, partials, keys)
        kept_parts = self.store.frame(version, PARTIALS, contributed.schema)
        return contributed if kept_parts is None else kept_parts.unionByName(contributed)

    def _partial_keys(self) -> list[str]:
        """What parts are kept per, besides the window: the group columns, and the unit whose
        frontier closes them."""
        return self.group_columns + ([UNIT] if self.per_key and UNIT not in self.group_columns else [])

    def _analytic_rows(self, kept: DataFrame, version: int | None) -> DataFrame:
        """What the analytic stage steps over: the previous version's buffer (events not yet
        final, and the history later ones may look back to) and this batch's kept events."""
        fresh = entering_rows(self.spec, kept, UNIT if self.spec.over else None)
        buffer = self.store.frame(version, "buffer", fresh.schema)
        return fresh if buffer is None else buffer.unionByName(fresh)

    def _join_rows(self, kept: DataFrame, version: int | None) -> DataFrame:
        """What the join stage steps over: the events the previous version held, and this
        batch's kept events once per input they belong to."""
        fresh = join_stage.entering_rows(self.spec, kept, self.inputs.members())
        buffer = self.store.frame(version, "buffer", fresh.schema)
        return fresh if buffer is None else buffer.unionByName(fresh)

    # -- window parts on the driver --------------------------------------------------------
    def collect_merged(self, rows: DataFrame, batch_id: int) -> pa.Table:
        """The window parts merged per (window, group), each with the output row it gives
        should it close now (and that row's batch columns), as Arrow on the driver: one job
        that needs no frontier, so it runs while the policy stage's states are collected."""
        partials, _ = self._parts()
        merged = merged_parts(rows, partials, self._partial_keys())
        table = with_output_columns(merged, partials, hour_columns(F.col(output_column("window_end")))).toArrow()
        return with_batch_id(table, batch_id, name=output_column(BATCH_COLUMN), before=output_column(HOUR_KEY))

    def step_merged(self, merged: pa.Table, frontiers: Frontiers, key_frontiers: KeyFrontiers | None,
                    ) -> tuple[pa.Table, pa.Table]:  # fmt: skip
        """The step on the driver, over the merged parts :meth:`collect_merged` gave: (the
        rows it emits, with their batch columns; the parts still open)."""
        partials, window = self._parts()
        return step_on_driver(
            merged, partials, self.group_columns, [BATCH_COLUMN, HOUR_KEY], frontiers, key_frontiers,
            UNIT if key_frontiers is not None else None, self.emit_after_us, close_delay_us(window),
        )  # fmt: skip

    # -- the step ----------------------------------------------------------------------------
    def step(self, rows: DataFrame, frontiers: Frontiers, key_frontiers: KeyFrontiers | None,
             ) -> tuple[DataFrame, DataFrame, DataFrame]:  # fmt: skip
        """(emitted rows, next buffer, the persisted step to unpersist after the batch)."""
        if self.spec.window is not None:
            return self._windows(rows, *frontiers, key_frontiers)
        if self.spec.analytics:
            return self._analytics(rows, *frontiers, key_frontiers)
        if key_frontiers is not None:  # per_key is only ever set for a window or analytic functions
            raise ValueError(f"job {self.spec.name}: a join has one frontier, not one per key")
        return self._join(rows, *frontiers, key_frontiers)

    def later_steps(self, emitted: DataFrame, events: DataFrame | None, version: int | None, frontiers: Frontiers,
                    enrich: Mapping[str, Enrich] | None = None) -> tuple[dict[str, DataFrame], list, list]:  # fmt: skip
        """The steps after the first (WITH), over the rows it emitted and the batch's kept
        ``events`` (for the steps reading the input), each step's reference joins by name in
        ``enrich``: (every step's rows by name, (frame, rows) per window step's next buffer,
        their persisted steps to unpersist after the batch)."""
        return run_later_steps(
            self.spark, self.store, self.spec, emitted, events, version, frontiers, self.emit_after_us, enrich or {}
        )

    def _join(
        self,
        rows: DataFrame,
        prev_frontier: int,
        frontier: int,
        key_frontiers: None,
    ) -> tuple[DataFrame, DataFrame, DataFrame]:
        """(emitted rows, next buffer, the persisted step to unpersist after the batch)."""
        assert self.spec.join is not None  # the join stage runs for a job with a join only
        stepped = join_stage.join_step(self.spec.join, rows, (prev_frontier, frontier), self._first_emit_after)
        stepped = stepped.persist(CACHED)  # output and buffer both read it
        return join_stage.emitted_output(self.spec, rows, stepped), join_stage.still_held(rows, stepped), stepped

    def _analytics(
        self,
        rows: DataFrame,
        prev_frontier: int,
        frontier: int,
        key_frontiers: KeyFrontiers | None,
    ) -> tuple[DataFrame, DataFrame, DataFrame]:
        """(emitted rows, next buffer, the persisted step to unpersist after the batch)."""
        unit = UNIT if key_frontiers is not None else None
        stepped = analytic_step(self.spec, rows, (prev_frontier, frontier), key_frontiers, unit, self._first_emit_after)
        stepped = stepped.persist(CACHED)  # output and buffer both read it
        return emitted_output(self.spec, stepped), still_held(stepped, rows.columns), stepped

    def _windows(
        self,
        rows: DataFrame,
        prev_frontier: int,
        frontier: int,
        key_frontiers: KeyFrontiers | None,
    ) -> tuple[DataFrame, DataFrame, DataFrame]:
        """(emitted rows, next buffer, the persisted step to unpersist after the batch)."""
        spec = self.spec
        window = spec.window
        assert window is not None  # step() sends only a windowed job here
        buffer_columns = rows.columns
        unit = UNIT if key_frontiers is not None else None
        frontiers = (prev_frontier, frontier)
        if self.partials is not None:  # parts per (window, group), merged in Spark SQL
            stepped = merge_step(
                self.spark,
                rows,
                self.partials,
                self._partial_keys(),
                frontiers,
                key_frontiers,
                unit,
                self.emit_after_us,
                close_delay_us(window),
            ).persist(CACHED)
            return emitted_rows(stepped, self.partials, self.group_columns), still_open(stepped), stepped
        if isinstance(window, (TumblingWindow, HoppingWindow)):  # Spark SQL only
            stepped = fixed_window_step(
                self.spark, rows, window, frontiers, key_frontiers, unit, self._first_emit_after
            )
        else:  # the core per key group, in Python workers
            stepped = window_step(
                rows, window, self.group_columns, frontiers, key_frontiers, unit, self._first_emit_after
            )
        stepped = stepped.persist(CACHED)  # output and buffer both read it
        emitted = aggregate_emitted(stepped, self.group_columns, spec.aggregates, spec.having)
        return emitted, still_buffered(stepped, buffer_columns), stepped


@reused
def _entering_window(over: bool, payload: tuple[str, ...], group_by: tuple[tuple[str, str], ...]) -> tuple[Column, ...]:
    """What a kept event carries into the window stage: its position, system time, unit and
    payload, and each group column computed from them."""
    carried = ["partition", "offset", "system_us"] + ([UNIT] if over else []) + list(payload)
    return (*cols(carried), *[spec_column(e).alias(n) for n, e in group_by if n not in carried])
