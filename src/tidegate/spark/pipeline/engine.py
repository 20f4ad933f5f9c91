"""The event-time engine: one micro-batch at a time, exactly once.

Why ``foreachBatch`` with Tidegate's own versioned state rather than Spark's built-in
watermark: Spark's watermark is one value, max event time − delay over all partitions,
and cannot express "min over partitions" or per-key substreams (SPEC §3). Here the
state of batch N is a pure function of the state of batch N−1 and batch N's input, which
Spark fixes in its offset log; every write is keyed by the batch id and made visible by
a rename, so a batch re-run after a crash rewrites the same bytes: exactly once.

Where each of those writes lands is :mod:`tidegate.lineage.layout`'s to say; the runtime
reads the lineage back through the same package.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from pyspark import StorageLevel, inheritable_thread_target
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tidegate.eventtime import policy as P
from tidegate.eventtime.policy import NONE
from tidegate.eventtime.windows import HoppingWindow, TumblingWindow
from tidegate.jobspec import JobSpec
from tidegate.lineage.layout import JobPaths, batch_name
from tidegate.runtime.fencing import NO_FENCE
from tidegate.spark.pipeline.parse import REASON, parse_batch, quarantine_rows
from tidegate.spark.pipeline.policy_stage import (
    apply_policy_stage,
    carry_idle,
    idle_counts,
    small_rows,
    split_outcomes,
    state_table,
)
from tidegate.spark.pipeline.sink.files import run_together, write_batch, write_document, write_table
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
from tidegate.spark.pipeline.window_stage import aggregate_emitted, fixed_window_step, still_buffered, window_step

UNIT = "_unit"
ARRIVAL_US = "arrival_us"
EVENT_US = "event_us"


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
        audit: bool | None = None,
        by_log_partition: bool = False,
        now_us: Callable[[], int] = lambda: time.time_ns() // 1000,
        fence=NO_FENCE,
    ) -> None:
        self.spark = spark
        self.spec = spec
        self.paths = paths
        self.partitions = sorted(partitions)
        self.emit_after_us = emit_after_us
        self.by_log_partition = by_log_partition
        self.audit = spec.sinks.audit if audit is None else audit
        self.now_us = now_us
        self.fence = fence  # every commit of a batch passes it (tidegate.runtime.fencing)
        self.store = StateStore(spark, paths.state, fence)
        self.group_columns = [name for name, _ in spec.group_by]
        self.per_key = bool(spec.over) and spec.window is not None and spec.over in self._group_sources()
        self.reports: list[BatchReport] = []

    def _group_sources(self) -> set[str]:
        return {expr.strip() for _, expr in self.spec.group_by} | set(self.group_columns)

    # -- the micro-batch -------------------------------------------------------------
    def process_batch(self, raw: DataFrame, batch_id: int, clock_us: int | None) -> BatchReport:
        spec = self.spec
        started = time.monotonic()
        version = self.store.latest_before(batch_id)
        prev_meta = self.store.meta(version)
        prev_frontier = _none(prev_meta.get("frontier_us"))

        # one pass: bad input rides through the policy stage untouched and comes out as
        # quarantine rows; only those keep their payload text
        judged = parse_batch(raw, dict(spec.payload), spec.timestamp_by, spec.time_format,
                             spec.source.payload_limits).judged
        events = judged.withColumns({
            ARRIVAL_US: F.unix_micros("arrival_time"),
            EVENT_US: F.unix_micros("event_time"),
            "payload": F.when(F.col(REASON).isNotNull(), F.col("payload")),
        })
        if spec.over:
            events = events.withColumn(UNIT, F.col(spec.over).cast("string"))
        event_columns = [c for c in events.columns if c not in ("payload", REASON)]
        prev_policy = None if version is None else str(self.store.path(version, "policy"))
        result = apply_policy_stage(
            self.spark, events, self.partitions, prev_policy, spec.policy, clock_us, UNIT if spec.over else None,
            by_log_partition=self.by_log_partition, reject_column=REASON,
        ).persist(StorageLevel.MEMORY_AND_DISK)
        cached = [result]
        phases = Phases()
        try:
            # the batch's one heavy job runs while the driver plans what follows it
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tidegate-policy") as pool:
                judging = pool.submit(inheritable_thread_target(small_rows), result, not spec.over or self.per_key)
                outcomes, new_state = split_outcomes(result, event_columns)
                quarantine = quarantine_rows(result.where(F.col("_kind") == "q"))
                kept = outcomes.where(F.col("action") != P.DROPPED)
                if spec.filter:
                    kept = kept.where(F.expr(spec.filter))
                rows = None if spec.window is None else self._window_rows(kept, version)
                states, counts = judging.result()
            idle = [p for p in self.partitions if p not in counts]
            if idle:  # no event of theirs reached a task this batch: carry their state forward
                carried, carried_rows = carry_idle(self.spark, idle, prev_policy, spec.policy, clock_us)
                states.update(carried)
                new_state = new_state.unionByName(carried_rows)
                counts.update({p: idle_counts() for p in idle})
            phases.tick("policy")
            # the driver holds every unit's state when it collected them: it writes the version itself
            held_state = state_table(states) if not spec.over or self.per_key else None
            states = {p: states.get(p, P.PartitionState()) for p in self.partitions}
            frontier = self._frontier(states)
            for p in self.partitions:  # SPEC §5: each partition's own watermark beside its counts
                w = states[p].arrival_watermark_us if spec.over else states[p].unit_watermark_us(None, spec.policy)
                counts.setdefault(p, idle_counts())["watermark_us"] = None if w == NONE else int(w)
            for c in counts.values():  # SPEC §5 and §9: input = judged + quarantined, nothing silently lost
                c.setdefault("quarantined", 0)
                c["input"] = c["judged"] + c["quarantined"]
            quarantined = sum(c["quarantined"] for c in counts.values())
            frames: dict[str, DataFrame | None] = {"policy": new_state}
            substreams = None
            documents: dict[str, dict] = {}
            if spec.window is None:
                emitted = self._project(kept)
            else:
                keys = None
                if self.per_key:
                    now_keys = self._key_frontiers(states)
                    substreams = substream_summary(now_keys)
                    prev_keys = self.store.document(version, "frontiers")
                    keys = {k: (prev_keys.get(k, prev_frontier), now) for k, now in now_keys.items()}
                    documents["frontiers"] = now_keys
                emitted, frames["buffer"], stepped = self._windows(rows, prev_frontier, frontier, keys)
                cached.append(stepped)
            phases.tick("plan")
            # every output of the batch at once; each becomes visible by its own rename and
            # the state version is committed last, so a crash anywhere re-runs the batch whole
            staged = self.store.staging(batch_id)

            def state_write(name: str, df: DataFrame) -> tuple[str, Callable[[], None]]:
                return f"state_{name}", lambda: df.write.mode("overwrite").parquet(str(staged / name))

            # the output lane fills the window step's cache that the buffer write then reads
            lanes = [
                [("output", lambda: write_batch(emitted, self.paths.output, batch_id, fence=self.fence))]
                + ([state_write("buffer", frames["buffer"])] if frames.get("buffer") is not None else []),
                [("quarantine", lambda: write_batch(quarantine, self.paths.quarantine, batch_id, rows=quarantined,
                                                        fence=self.fence)),
                 ("state_policy", lambda: write_table(held_state, staged / "policy")) if held_state is not None
                 else state_write("policy", frames["policy"])],
            ]
            if self.audit:
                lanes.append([("audit", lambda: write_batch(_audit_rows(outcomes), self.paths.audit, batch_id,
                                                                fence=self.fence))])
            write_seconds = run_together(lanes)
            phases.tick("writes")
            visible = self.paths.output / batch_name(batch_id)
            rows_emitted = rows_written(visible)
            last_output = last_window_end(visible) if spec.window else None
            meta = {
                "batch_id": batch_id,
                "partitions": self.partitions,
                "frontier_us": None if frontier == NONE else frontier,
                "clock_us": clock_us,
                "fingerprint": spec.fingerprint,
            }
            self.store.commit(batch_id, staged, meta, documents)
            phases.tick("commit")
            buffered_from = min_buffered_us(self.store.path(batch_id, "buffer")) if spec.window else None
        finally:
            for df in cached:
                df.unpersist()
        report = BatchReport(
            job=spec.name, version=spec.version, batch_id=batch_id,
            input_events=sum(c["input"] for c in counts.values()), quarantined=quarantined,
            rows_emitted=rows_emitted, job_watermark_us=frontier, clock_us=clock_us, counts=counts,
            seconds=time.monotonic() - started, last_output_us=last_output,
            stages=stage_watermarks(spec, frontier, clock_us, buffered_from), substreams=substreams,
            phase_seconds=phases.seconds, write_seconds=write_seconds, processed_at_us=self.now_us(),
        )  # fmt: skip
        write_document(report.record(), self.paths.metrics_file(batch_id), fence=self.fence)
        self.reports.append(report)
        return report

    # -- watermarks --------------------------------------------------------------------
    def _frontier(self, parts: dict[int, P.PartitionState]) -> int:
        """The scalar frontier: job watermark (no ``over``) or the arrival floor (``over``)."""
        from tidegate.eventtime.watermarks import arrival_floor_us, job_watermark_us

        states = [parts.get(p, P.PartitionState()) for p in self.partitions]
        if self.spec.over:
            return arrival_floor_us(states)
        return job_watermark_us(states, self.spec.policy)

    def _key_frontiers(self, states: dict[int, P.PartitionState]) -> dict[str, int]:
        """Per ``over`` key: min over partitions of W(p, k) — a key never seen in p follows
        p's arrival term (SPEC §2 substreams). One entry per substream, on the driver."""
        from tidegate.eventtime.watermarks import key_watermark_us

        ordered = [states[p] for p in self.partitions]
        keys = {k for st in ordered for k in st.max_system_us}
        return {k: key_watermark_us(ordered, k, self.spec.policy) for k in keys}

    # -- query shapes ------------------------------------------------------------------
    def _project(self, kept: DataFrame) -> DataFrame:
        system_time = F.timestamp_micros("system_us").alias("system_time")
        position = [F.col("partition"), F.col("offset")]
        if self.spec.select:
            return kept.select(*position, system_time, *[F.expr(e).alias(n) for n, e in self.spec.select])
        return kept.select(*position, system_time, *self.spec.payload.keys())

    def _window_rows(self, kept: DataFrame, version: int | None) -> DataFrame:
        """What the window stage steps over: the events the previous version buffered (same
        columns as this batch's) and this batch's kept ones."""
        spec = self.spec
        carried = ["partition", "offset", "system_us"] + ([UNIT] if spec.over else []) + list(spec.payload.keys())
        fresh = kept.select(*carried, *[F.expr(e).alias(n) for n, e in spec.group_by if n not in carried])
        buffer = self.store.frame(version, "buffer", fresh.schema)
        return fresh if buffer is None else buffer.unionByName(fresh)

    def _windows(
        self,
        rows: DataFrame,
        prev_frontier: int,
        frontier: int,
        key_frontiers: dict[str, tuple[int, int]] | None,
    ) -> tuple[DataFrame, DataFrame, DataFrame]:
        """(emitted rows, next buffer, the persisted step to unpersist after the batch)."""
        spec = self.spec
        buffer_columns = rows.columns
        unit = UNIT if key_frontiers is not None else None
        frontiers = (prev_frontier, frontier)
        if isinstance(spec.window, (TumblingWindow, HoppingWindow)):  # Spark SQL only
            stepped = fixed_window_step(self.spark, rows, spec.window, frontiers, key_frontiers, unit,
                                        self.emit_after_us)
        else:  # the core per key group, in Python workers
            stepped = window_step(rows, spec.window, self.group_columns, frontiers, key_frontiers, unit,
                                  self.emit_after_us)
        stepped = stepped.persist(StorageLevel.MEMORY_AND_DISK)  # output and buffer both read it
        emitted = aggregate_emitted(stepped, self.group_columns, spec.aggregates)
        return emitted, still_buffered(stepped, buffer_columns), stepped


def _none(value: int | None) -> int:
    return int(NONE) if value is None else int(value)


def _audit_rows(outcomes: DataFrame) -> DataFrame:
    action = F.element_at(F.array(*[F.lit(n) for n in P.ACTION_NAMES]), F.col("action").cast("int") + 1)
    reason = F.element_at(F.array(*[F.lit(n) for n in P.REASON_NAMES]), F.col("reason").cast("int") + 1)
    cols = ["partition", "offset", "arrival_time", "event_time"] + ([UNIT] if UNIT in outcomes.columns else [])
    return outcomes.select(
        *cols,
        action.alias("action"),
        reason.alias("reason"),
        F.timestamp_micros("system_us").alias("system_time"),
        F.timestamp_micros("watermark_us").alias("watermark"),
    )
