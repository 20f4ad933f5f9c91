"""The event-time engine: one micro-batch at a time, exactly once.

Why ``foreachBatch`` with Tidegate's own versioned state rather than Spark's built-in
watermark: Spark's watermark is one value, max event time − delay over all partitions,
and cannot express "min over partitions" or per-key substreams (semantics §3). Here the
state of batch N is a pure function of the state of batch N−1 and batch N's input, which
Spark fixes in its offset log; every write is keyed by the batch id and made visible by
a rename, so a batch re-run after a crash rewrites the same bytes: exactly once.

Where each of those writes lands is :mod:`tidegate.lineage.layout`'s to say; the runtime
reads the lineage back through the same package.

The engine is the order of a micro-batch's stages (parse, policy, cross apply, the stage that
holds rows between batches, sink) and the state they hand each other (the ``_Judged`` →
``_Closed`` → ``_Planned`` records); what each stage computes lives in its own module
beside this one, which stage holds rows, and how it steps, in :mod:`.held_stage`, and how
the batch's outputs are written and its state version committed, in :mod:`.batch_write`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import pyarrow as pa
from pyspark import inheritable_thread_target
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tidegate.eventtime import policy as P
from tidegate.eventtime.policy import NONE
from tidegate.eventtime.windows import next_close_us
from tidegate.inputs.log_set import InputLayout
from tidegate.jobspec import JobSpec
from tidegate.lineage.fence import NO_FENCE
from tidegate.lineage.layout import JobPaths
from tidegate.spark.columns import reused
from tidegate.spark.expression_guard import check_spec_with_spark
from tidegate.spark.output import by_position
from tidegate.spark.pipeline import java_source, join_stage
from tidegate.spark.pipeline.batch_write import BatchWriter
from tidegate.spark.pipeline.cross_apply_stage import bound_rows, cross_applied
from tidegate.spark.pipeline.event_time import check_event_time_types
from tidegate.spark.pipeline.held_stage import CACHED, UNIT, HeldStage
from tidegate.spark.pipeline.job_inputs import JobInputs
from tidegate.spark.pipeline.named_outputs import step_outputs
from tidegate.spark.pipeline.parse import (
    JSON_DOCUMENTS,
    REASON,
    TEXT_COLUMNS,
    parse_shapes,
    quarantine_columns,
    quarantine_rows,
)
from tidegate.spark.pipeline.percentile_stage import (
    COUNT as BEHIND,
)
from tidegate.spark.pipeline.percentile_stage import (
    behind_counts,
    behind_rows,
    percentile_frontier_us,
    split_behind,
)
from tidegate.spark.pipeline.policy_jvm import runs_on_jvm
from tidegate.spark.pipeline.policy_stage import (
    apply_policy_stage,
    carry_idle,
    idle_counts,
    is_kind,
    small_rows,
    split_outcomes,
    state_table,
)
from tidegate.spark.pipeline.reference_stage import ReferenceStage, processed_through_us
from tidegate.spark.pipeline.release_gate import release_window
from tidegate.spark.pipeline.sink import files
from tidegate.spark.pipeline.sink.files import hour_columns, with_batch_id, write_document
from tidegate.spark.pipeline.sink.metrics import (
    BatchReport,
    Phases,
    last_window_end,
    min_buffered_us,
    rows_written,
    stage_watermarks,
    substream_summary,
)
from tidegate.spark.pipeline.sink.state import StateStore
from tidegate.spark.pipeline.step_rows import job_event_rows, reads_events
from tidegate.spark.spec_columns import spec_column

INPUTS = "inputs"  # a join job's partition counts: kept events per input
ARRIVAL_US = "arrival_us"
EVENT_US = "event_us"


@dataclass(frozen=True)
class _Previous:
    """What the last committed state version before the batch left for it."""

    version: int | None  # None: the batch is the lineage's first
    frontier_us: int  # NONE before the first version
    processed_through_us: int | None  # the largest system time processed (kept only by reference jobs)
    policy: str | pa.Table | None  # the folder of the version's policy state (on an object store: its rows)


@dataclass(frozen=True)
class _Judged:
    """The policy stage's verdict on the batch, and what the driver planned from it meanwhile."""

    outcomes: DataFrame  # every judged event with its action and reason
    policy_state: DataFrame  # the policy state rows of the next version
    quarantine: DataFrame
    kept: DataFrame  # not dropped, and through the job's filter
    window_rows: DataFrame | None  # what the window (or analytic) stage steps over; None without one
    states: dict[int, P.PartitionState]  # collected on the driver, per partition that had a task
    counts: dict[int, dict]
    behind: DataFrame | None = None  # side output rows: kept events behind a percentile watermark
    merged: pa.Table | None = None  # window parts merged, with their output columns, for the driver's step
    quarantine_table: pa.Table | None = None  # bad input that came with the counts, with its batch columns
    events: DataFrame | None = None  # kept, before the first step's filter: what later steps reading the input read


@dataclass(frozen=True)
class _Closed:
    """Every partition after the batch: its state, its counts with its watermark, the frontier."""

    states: dict[int, P.PartitionState]
    counts: dict[int, dict]
    frontier_us: int  # the job watermark, or the arrival floor with ``over``; NONE while unknown
    quarantined: int
    held_state: pa.Table | None  # the policy state version, when the driver collected all of it


@dataclass(frozen=True)
class _Planned:
    """The rows the batch emits and what the window stage hands to the next version."""

    emitted: DataFrame | None  # None: the driver holds the rows (``emitted_table``)
    buffer: DataFrame | None = None
    stepped: DataFrame | None = None  # persisted window step, unpersisted after the batch
    documents: dict = field(default_factory=dict)  # small JSON parts of the next version
    substreams: dict | None = None
    emitted_table: pa.Table | None = None  # the emitted rows, on the driver with their batch columns
    buffer_table: pa.Table | None = None  # the next version's window parts, on the driver
    step_buffers: list = field(default_factory=list)  # (frame, rows) per later step (step_stage)
    step_cached: list = field(default_factory=list)  # their persisted steps, unpersisted after the batch
    named: dict = field(default_factory=dict)  # each named output's rows (sinks.outputs), by name


class Engine:
    """Runs a job spec's query over micro-batches of the event log."""

    def __init__(
        self,
        spark: SparkSession,
        spec: JobSpec,
        paths: JobPaths,
        partitions: list[int],
        *,
        emit_after_us: int | None = None,
        emit_from_offsets: dict[int, int] | None = None,
        audit: bool | None = None,
        by_log_partition: bool = False,
        now_us: Callable[[], int] = lambda: time.time_ns() // 1000,
        fence=NO_FENCE,
        policy_runner: str | None = None,
        layout: InputLayout | None = None,
    ) -> None:
        check_spec_with_spark(spark, spec)  # Spark's own parser has the last word on what runs
        self.spark = spark
        self.spec = spec
        self.inputs = JobInputs(spec, layout)  # inputs with their own logs: ``layout`` says whose partitions are whose
        check_event_time_types(spark, self.inputs.time_sources)  # an expression's value must be a time or text
        self.paths = paths
        self.partitions = sorted(partitions)
        self.emit_after_us = emit_after_us
        self.emit_from_offsets = emit_from_offsets  # per event: what is before them is judged, not emitted
        self.by_log_partition = by_log_partition
        self.now_us = now_us
        self.fence = fence  # every commit of a batch passes it (tidegate.lineage.fence)
        self.store = StateStore(spark, paths.state, fence, paths.store)
        self.stage = HeldStage(spark, spec, self.store, self.inputs, emit_after_us)  # window, analytics or join
        self.reference = ReferenceStage(spark, spec.references, paths) if spec.references else None
        self.step_references = {s.name: ReferenceStage(spark, s.references, paths, named=True)
                                for s in spec.steps if s.references}  # fmt: skip
        self.writer = BatchWriter(
            spec, paths, self.store, self.partitions, fence, audit=spec.sinks.audit if audit is None else audit
        )
        # the driver collects every unit's state when a frontier needs them, or the reference the
        # largest system time processed (from when on a snapshot read for the first time joins)
        self.collect_units = (
            not spec.over or self.stage.per_key or spec.watermark_percentile is not None or bool(spec.reference_tables)
        )
        self.reports: list[BatchReport] = []
        self.release_window = release_window(spec)
        self.policy_on_jvm = runs_on_jvm(spark, policy_runner)  # else the core in Python workers
        self.parse_on_jvm = java_source.loadable(spark, JSON_DOCUMENTS)  # else from_json: the same documents

    # -- the micro-batch -------------------------------------------------------------
    def process_batch(self, raw: DataFrame, batch_id: int, clock_us: int | None) -> BatchReport:
        """Batch ``batch_id`` through the stages in order — parse, policy, window, sink — judged
        with the broker clock ``clock_us``; what it did, also written to its metrics file."""
        started = time.monotonic()
        prev = self._previous(batch_id)
        events, event_columns = self._parse(raw)
        result = self._apply_policy(events, prev, clock_us)
        cached = [result]
        phases = Phases()
        try:
            judged = self._carry_idle(self._judge(result, event_columns, prev, batch_id), prev, clock_us)
            phases.tick("policy")
            closed = self._close_partitions(judged, prev)
            planned = self._plan_outputs(judged, closed, prev)
            if planned.stepped is not None:
                cached.append(planned.stepped)
            cached.extend(planned.step_cached)
            phases.tick("plan")
            staged, visible, write_seconds = self.writer.write(
                batch_id,
                held=self.stage.held,
                emitted=planned.emitted,
                emitted_table=planned.emitted_table,
                buffer=planned.buffer,
                buffer_table=planned.buffer_table,
                step_buffers=planned.step_buffers,
                quarantine=judged.quarantine,
                quarantine_table=judged.quarantine_table,
                quarantined=closed.quarantined,
                policy_state=judged.policy_state,
                held_state=closed.held_state,
                behind=judged.behind,
                outcomes=judged.outcomes,
                judged_events=sum(c["judged"] for c in closed.counts.values()),
                named=planned.named,
            )
            phases.tick("writes")
            rows_emitted = rows_written(visible, self.paths.store)
            last_output = (
                last_window_end(visible, store=self.paths.store)
                if self.spec.output_window is not None
                else last_window_end(visible, "system_time", self.paths.store)
                if self.spec.needs_lookback
                else None
            )
            self.writer.commit(
                batch_id,
                staged,
                closed.frontier_us,
                clock_us,
                planned.documents,
                processed_through_us(closed.states, prev.processed_through_us),
            )
            phases.tick("commit")
            buffered_from = (
                min_buffered_us(self.store.path(batch_id, self.stage.held), self.paths.store)
                if self.spec.window
                else None
            )
        finally:
            for df in cached:
                df.unpersist()
        report = BatchReport(
            job=self.spec.name, version=self.spec.version, batch_id=batch_id,
            input_events=sum(c["input"] for c in closed.counts.values()), quarantined=closed.quarantined,
            rows_emitted=rows_emitted, job_watermark_us=closed.frontier_us, clock_us=clock_us,
            counts=closed.counts, seconds=time.monotonic() - started, last_output_us=last_output,
            stages=stage_watermarks(self.spec, closed.frontier_us, clock_us, buffered_from),
            substreams=planned.substreams,
            phase_seconds=phases.seconds, write_seconds=write_seconds, processed_at_us=self.now_us(),
            next_close_in_us=self._next_close_in(closed, planned.documents),
        )  # fmt: skip
        filed_at = clock_us if clock_us is not None else report.processed_at_us
        write_document(
            report.record(), self.paths.metrics_file(batch_id, filed_at), fence=self.fence, store=self.paths.store
        )
        self.reports.append(report)
        return report

    def _previous(self, batch_id: int) -> _Previous:
        """The state version batch ``batch_id`` starts from (a re-run starts where it did)."""
        version = self.store.latest_before(batch_id)
        meta = self.store.meta(version)
        frontier, through = _none(meta.get("frontier_us")), meta.get("processed_through_us")
        if version is None:
            return _Previous(version, frontier, through, None)
        policy = self.store.path(version, "policy")
        # on an object store the driver reads it: the workers have no keys for the store
        return _Previous(
            version,
            frontier,
            through,
            str(policy) if not self.paths.on_object_store else self.paths.store.read_parquet(policy),
        )

    def _parse(self, raw: DataFrame) -> tuple[DataFrame, list[str]]:
        """Parse (semantics §9) in the policy stage's pass: bad input rides through it untouched and
        comes out as quarantine rows; only those keep their payload text. The events, and the
        columns an outcome keeps of each."""
        spec = self.spec
        judged = parse_shapes(raw, self.inputs.shapes, spec.source.payload_limits, on_jvm=self.parse_on_jvm).judged
        judged = bound_rows(judged, spec.cross_apply, REASON)  # an event over max_rows is bad input
        events = judged.withColumns(dict(_judged_times(spec.over)))
        return events, [c for c in events.columns if c not in ("payload", REASON)]

    def _apply_policy(self, events: DataFrame, prev: _Previous, clock_us: int | None) -> DataFrame:
        """The policy stage, cached: everything after it reads its result."""
        spec = self.spec
        return apply_policy_stage(
            self.spark,
            events,
            self.partitions,
            prev.policy,
            spec.policy,
            clock_us,
            UNIT if spec.over else None,
            by_log_partition=self.by_log_partition,
            reject_column=REASON,
            on_jvm=self.policy_on_jvm,
            by_partition=self.inputs.by_partition,
        ).persist(CACHED)

    def _judge(self, result: DataFrame, event_columns: list[str], prev: _Previous, batch_id: int) -> _Judged:
        """Collect the partitions' states and counts, and with them the batch's bad input when
        it is small — the batch's one heavy job — while the driver plans what follows from the
        result and, for window parts, collects them merged (:meth:`.HeldStage.collect_merged`)
        beside it."""
        spec = self.spec
        # bad input comes with the states and counts, up to a share of what the driver writes itself
        # per partition and rows of a bounded size: when all of it came, that collect is the
        # quarantine's write
        bad_per_partition = max(1, files.DRIVER_WRITE_ROWS // len(self.partitions))
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tidegate-policy") as pool:
            judging = pool.submit(
                inheritable_thread_target(small_rows),
                result,
                self.collect_units,
                _bad_input_columns(),
                bad_per_partition,
                TEXT_COLUMNS,
                files.DRIVER_ROW_TEXT_BYTES,
            )
            quarantine = quarantine_rows(result.where(is_kind("q")))
            outcomes, policy_state = split_outcomes(result, event_columns)
            kept, behind = outcomes.where(F.col("action") != P.DROPPED), None
            if spec.watermark_percentile is not None:  # lossy: what fell behind goes aside, counted
                kept, behind = split_behind(kept, prev.frontier_us)
                behind = None if behind is None else behind_rows(behind, prev.frontier_us, list(spec.payload))
            kept = cross_applied(kept, spec.cross_apply)  # judged as events, read on as rows
            if self.reference is not None:  # before the filter, which may read the reference's columns
                kept = self.reference.enrich(
                    kept, None if prev.frontier_us == NONE else prev.frontier_us, prev.processed_through_us
                )
            events = kept if reads_events(spec) else None
            if spec.filter and not spec.analytics and not spec.join:  # those see every kept event
                kept = kept.where(spec_column(spec.filter))
            rows = self.stage.rows(kept, prev.version)
            taken = join_stage.input_counts(spec, kept, self.inputs.members()) if spec.join is not None else {}
            merged = None
            if self.stage.partials is not None:
                assert rows is not None  # a window that keeps parts always has rows to step over
                merged = self.stage.collect_merged(rows, batch_id)
            states, counts, bad = judging.result()
        for p, n in behind_counts(behind).items():
            counts[p][BEHIND] = n
        for p, per_input in taken.items():
            counts[p][INPUTS] = per_input
        return _Judged(outcomes, policy_state, quarantine, kept, rows, states, counts, behind, merged,
                       with_batch_id(bad, batch_id), events)  # fmt: skip

    def _carry_idle(self, judged: _Judged, prev: _Previous, clock_us: int | None) -> _Judged:
        """Partitions none of whose events reached a task this batch: their state carried
        forward, so their watermark still follows the broker clock."""
        idle = [p for p in self.partitions if p not in judged.counts]
        if not idle:
            return judged
        carried, carried_rows = carry_idle(self.spark, idle, prev.policy, self.spec.policy, clock_us,
                                           self.inputs.by_partition)  # fmt: skip
        return replace(
            judged, states=judged.states | carried, counts=judged.counts | {p: idle_counts() for p in idle},
            policy_state=judged.policy_state.unionByName(carried_rows),
        )  # fmt: skip

    def _close_partitions(self, judged: _Judged, prev: _Previous) -> _Closed:
        """Every partition's state after the batch and, beside its counts, its watermark (semantics §5)."""
        spec = self.spec
        # the driver holds every unit's state when it collected them: it writes the version itself
        held_state = state_table(judged.states) if self.collect_units else None
        states = {p: judged.states.get(p, P.PartitionState()) for p in self.partitions}
        frontier = self._frontier(states, prev.frontier_us)
        counts = judged.counts
        for p in self.partitions:  # semantics §5: each partition's own watermark beside its counts
            w = (
                states[p].arrival_watermark_us
                if spec.over
                else states[p].unit_watermark_us(None, self.inputs.policy_of(p))
            )
            counts.setdefault(p, idle_counts())["watermark_us"] = None if w == NONE else int(w)
        for c in counts.values():  # semantics §5 and §9: input = judged + quarantined, nothing silently lost
            c.setdefault("quarantined", 0)
            if spec.watermark_percentile is not None:
                c.setdefault(BEHIND, 0)
            if spec.join is not None:
                c.setdefault(INPUTS, {i.name: 0 for i in spec.inputs})
            c["input"] = c["judged"] + c["quarantined"]
        quarantined = sum(c["quarantined"] for c in counts.values())
        return _Closed(states, counts, frontier, quarantined, held_state)

    def _plan_outputs(self, judged: _Judged, closed: _Closed, prev: _Previous) -> _Planned:
        """The emitted rows: the kept events projected, or the windows the frontier closed."""
        if not self.spec.needs_lookback:
            kept = judged.kept
            if self.emit_from_offsets:
                kept = by_position(kept, self.emit_from_offsets, before=False)
            return _Planned(job_event_rows(self.spec, kept))
        keys, substreams, documents = None, None, {}
        if self.stage.per_key:
            now_keys = self._key_frontiers(closed.states)
            substreams = substream_summary(now_keys)
            prev_keys = self.store.document(prev.version, "frontiers")
            keys = {k: (prev_keys.get(k, prev.frontier_us), now) for k, now in now_keys.items()}
            documents["frontiers"] = now_keys
        frontiers = (prev.frontier_us, closed.frontier_us)
        if judged.merged is not None:  # the step on the driver, over the merged parts it holds
            emitted, kept = self.stage.step_merged(judged.merged, frontiers, keys)
            if emitted.num_rows <= files.DRIVER_WRITE_ROWS:  # else Spark writes them, as write_batch would
                return _Planned(None, None, None, documents, substreams, emitted, kept)
        if judged.window_rows is None:  # a per-event first step, read by later steps: it holds nothing
            emitted, buffer, stepped = job_event_rows(self.spec, judged.kept), None, None
        else:
            emitted, buffer, stepped = self.stage.step(judged.window_rows, frontiers, keys)
        if not self.spec.steps:
            return _Planned(emitted, buffer, stepped, documents, substreams)
        watermark = None if prev.frontier_us == NONE else prev.frontier_us
        enrich = {name: stage.at(watermark, prev.processed_through_us) for name, stage in self.step_references.items()}
        by_step, step_buffers, step_cached = self.stage.later_steps(
            emitted, judged.events, prev.version, frontiers, enrich
        )
        emitted, named = step_outputs(self.spec, by_step, self.emit_after_us)
        return _Planned(
            emitted,
            buffer,
            stepped,
            documents,
            substreams,
            step_buffers=step_buffers,
            step_cached=step_cached,
            named=named,
        )

    # -- watermarks --------------------------------------------------------------------
    def _frontier(self, parts: dict[int, P.PartitionState], previous_us: int) -> int:
        """The scalar frontier: job watermark (no ``over``) or the arrival floor (``over``);
        with ``watermark.percentile``, the percentile over the units (never below ``previous_us``)."""
        from tidegate.eventtime.watermarks import arrival_floor_us, job_watermark_us

        states = [parts.get(p, P.PartitionState()) for p in self.partitions]
        if self.spec.watermark_percentile is not None:
            return percentile_frontier_us(
                states, self.spec.policy, self.spec.watermark_percentile, bool(self.spec.over), previous_us
            )
        if self.spec.over:
            return arrival_floor_us(states)
        return job_watermark_us(states, [self.inputs.policy_of(p) for p in self.partitions])

    def _next_close_in(self, closed: _Closed, documents: Mapping) -> int | None:
        """How much further in event time the watermarks must move before the next window
        end, when only window ends release the job's rows (the release gate's measure); None
        otherwise, or while no unit has a watermark. Watermarks are taken to move together: a
        unit ahead of the median one (an early event carried it) waits for the median to
        catch up with it."""
        window = self.release_window
        if window is None:
            return None
        # per key, the frontiers the batch planned its windows with (_plan_outputs), not computed again
        frontiers = documents["frontiers"].values() if self.stage.per_key else [closed.frontier_us]
        known = sorted(int(w) for w in frontiers if w != NONE)
        if not known:
            return None
        pace = known[(len(known) - 1) // 2]
        return min(next_close_us(window, w) - min(w, pace) for w in known)

    def _key_frontiers(self, states: dict[int, P.PartitionState]) -> dict[str | None, int]:
        """Per ``over`` key: min over partitions of W(p, k) — a key never seen in p follows
        p's arrival term (semantics §2 substreams). One entry per substream, on the driver."""
        from tidegate.eventtime.watermarks import key_watermark_us

        ordered = [states[p] for p in self.partitions]
        keys = {k for st in ordered for k in st.max_system_us}
        return {_unit_key(k): key_watermark_us(ordered, k, self.spec.policy) for k in keys}


def _none(value: int | None) -> int:
    return int(NONE) if value is None else int(value)


def _unit_key(unit: object) -> str | None:
    """A substream's unit as the policy state keys it: the ``over`` value as text
    (:func:`_judged_times`), None for a NULL one."""
    if unit is not None and not isinstance(unit, str):
        raise TypeError(f"substream unit {unit!r} is not text: units are the over value cast to string")
    return unit


@reused
def _judged_times(over: str | None) -> Mapping[str, Column]:
    """The columns the parsed batch gains for the policy: arrival and event time in µs, the
    payload kept for bad input only, and the substream's unit (``over`` as text)."""
    return MappingProxyType(
        {
            ARRIVAL_US: F.unix_micros("arrival_time"),
            EVENT_US: F.unix_micros("event_time"),
            "payload": F.when(F.col(REASON).isNotNull(), F.col("payload")),
            **({UNIT: F.col(over).cast("string")} if over else {}),
        }
    )


@reused
def _bad_input_columns() -> tuple[Column, ...]:
    """A bad input row of the policy stage's result as the quarantine writes it, with its hour key."""
    return (*quarantine_columns(), *(c.alias(n) for n, c in hour_columns(F.col("arrival_time")).items()))
