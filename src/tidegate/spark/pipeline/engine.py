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
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pyspark import StorageLevel, inheritable_thread_target
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tidegate.eventtime import policy as P
from tidegate.eventtime.policy import NONE
from tidegate.eventtime.windows import HoppingWindow, TumblingWindow
from tidegate.jobspec import JobSpec
from tidegate.lineage.layout import JobPaths, batch_name
from tidegate.spark.pipeline.parse import REASON, parse_batch, quarantine_rows
from tidegate.spark.pipeline.policy_stage import (
    STATE_SCHEMA,
    apply_policy_stage,
    carry_idle,
    idle_counts,
    small_rows,
    split_outcomes,
    state_rows,
)
from tidegate.runtime.fencing import NO_FENCE
from tidegate.spark.pipeline.sink import StateStore, run_together, write_batch, write_document, write_table
from tidegate.spark.pipeline.window_stage import aggregate_emitted, fixed_window_step, still_buffered, window_step

UNIT = "_unit"
ARRIVAL_US = "arrival_us"
EVENT_US = "event_us"


@dataclass(frozen=True)
class BatchReport:
    batch_id: int
    input_events: int
    quarantined: int
    rows_emitted: int
    job_watermark_us: int
    clock_us: int | None
    counts: dict
    seconds: float  # from the batch's start to its rows being visible
    last_output_us: int | None = None  # the largest window end emitted in this batch
    stages: dict | None = None  # SPEC §4: per stage input/output watermark and event-time lag
    substreams: dict | None = None  # with per-key watermarks: how many, and their spread


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
        phases = _Phases()
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
            held_state = _state_table(states) if not spec.over or self.per_key else None
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
                    substreams = _substream_summary(now_keys)
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
            rows_emitted = _rows_written(visible)
            last_output = _last_window_end(visible) if spec.window else None
            meta = {
                "batch_id": batch_id,
                "partitions": self.partitions,
                "frontier_us": None if frontier == NONE else frontier,
                "clock_us": clock_us,
                "fingerprint": spec.fingerprint,
            }
            self.store.commit(batch_id, staged, meta, documents)
            phases.tick("commit")
            buffered_from = _min_buffered_us(self.store.path(batch_id, "buffer")) if spec.window else None
        finally:
            for df in cached:
                df.unpersist()
        report = BatchReport(batch_id, sum(c["input"] for c in counts.values()), quarantined,
                             rows_emitted, frontier, clock_us, counts, time.monotonic() - started,
                             last_output, self._stages(frontier, clock_us, buffered_from), substreams)
        self._write_metrics(report, phases.seconds, write_seconds)
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

    def _stages(self, frontier: int, clock_us: int | None, buffered_from_us: int | None) -> dict:
        """SPEC §4 per stage: input watermark (min over its inputs), output watermark (min of
        the input and the oldest data it still buffers) and the event-time lag it adds.

        The policy stage buffers nothing: its output watermark is the job watermark (the
        minimum over partitions of the unit watermarks, which follow the broker clock).
        The window stage holds the events of open windows, so its output watermark stops at
        the oldest of them. Values are µs; None while unknown."""
        wm = None if frontier == NONE else int(frontier)
        clock_term = None if clock_us is None else clock_us - self.spec.policy.late_arrival_tolerance_us
        stages = {"policy": _stage(clock_term, wm)}
        if self.spec.window is not None:
            held = wm if buffered_from_us is None or wm is None else min(wm, buffered_from_us)
            stages["window"] = _stage(wm, held)
        return stages

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

    # -- metrics -----------------------------------------------------------------------
    def _write_metrics(self, report: BatchReport, phases: dict[str, float], writes: dict[str, float]) -> None:
        now = self.now_us()
        wm = report.job_watermark_us
        record = {
            "job": self.spec.name,
            "version": self.spec.version,
            "batch_id": report.batch_id,
            "processed_at_us": now,
            "input_events": report.input_events,
            "quarantined": report.quarantined,
            "rows_emitted": report.rows_emitted,
            "job_watermark_us": None if wm == NONE else wm,
            "watermark_delay_us": None if wm == NONE else now - wm,
            "processing_time_watermark_us": report.clock_us,
            "processing_time_lag_us": None if report.clock_us is None else now - report.clock_us,
            "partitions": {str(p): c for p, c in sorted(report.counts.items())},
            "last_output_us": report.last_output_us,
            "stages": report.stages,
            "substreams": report.substreams,
            "batch_seconds": round(report.seconds, 3),
            "phase_seconds": {k: round(v, 3) for k, v in phases.items()},
            "write_seconds": writes,  # each concurrent write of the "writes" phase
        }
        write_document(record, self.paths.metrics_file(report.batch_id), fence=self.fence)


def _none(value: int | None) -> int:
    return int(NONE) if value is None else int(value)


class _Phases:
    """Wall time of each part of a batch, for the metrics an operator reads."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.monotonic()

    def tick(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - self._last
        self._last = now


def _state_table(states: dict[int, P.PartitionState]):
    """The policy state version as the Arrow table the policy stage reads back."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    rows = [r for p in sorted(states) for r in state_rows(p, states[p])]
    schema = to_arrow_schema(STATE_SCHEMA, timezone="UTC")
    return pa.Table.from_pylist(rows, schema=schema)


def _substream_summary(frontiers: dict[str, int]) -> dict:
    known = [w for w in frontiers.values() if w != NONE]
    return {
        "count": len(frontiers),
        "min_watermark_us": min(known) if known else None,
        "max_watermark_us": max(known) if known else None,
    }


def _stage(input_us: int | None, output_us: int | None) -> dict:
    lag = None if input_us is None or output_us is None else input_us - output_us
    return {"input_watermark_us": input_us, "output_watermark_us": output_us, "event_time_lag_us": lag}


def _last_window_end(directory: Path) -> int | None:
    """The largest ``window_end`` in the rows just written (µs), read from the files."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    ends = []
    for f in directory.glob("*.parquet"):
        column = pq.read_table(f, columns=["window_end"]).column("window_end")
        # Spark may write INT96 (read as ns): normalise to µs before taking the integer
        micros = column.cast(pa.timestamp("us", tz=column.type.tz)).cast(pa.int64())
        top = pc.max(micros).as_py()
        if top is not None:
            ends.append(int(top))
    return max(ends) if ends else None


def _min_buffered_us(directory: Path) -> int | None:
    """The oldest system time the window stage still buffers, from the Parquet statistics."""
    import pyarrow.parquet as pq

    lows = []
    for f in directory.glob("*.parquet"):
        meta = pq.ParquetFile(f).metadata
        col = meta.schema.names.index("system_us") if "system_us" in meta.schema.names else None
        if col is None:
            continue
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(col).statistics
            if stats is not None and stats.has_min_max and meta.row_group(g).num_rows:
                lows.append(int(stats.min))
    return min(lows) if lows else None


def _rows_written(directory: Path) -> int:
    """Row count from the Parquet footers just written: no Spark job."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in directory.glob("*.parquet"))


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
