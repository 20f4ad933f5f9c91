"""Run a job: streaming over its log (``run_stream``) or as one batch (``run_batch``).

Both call the same :class:`Engine`; the batch path is one micro-batch holding the whole
span, judged with the same broker clock, so for the same input and clock the two emit
the same rows — the batch path is the reference the stream must equal. The log is the
embedded event log (a directory) or a Kafka topic (:mod:`tidegate.inputs.log`); a Kafka job's
batch path reads through Spark's own Kafka connector (:mod:`tidegate.spark.kafka`).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from tidegate.errors import ConfigError, TidegateError
from tidegate.inputs.kafka.client import KafkaTopic
from tidegate.inputs.log import LogLocation, open_log, source_options
from tidegate.inputs.log_set import layout_of
from tidegate.jobspec import JobSpec
from tidegate.jobspec.spec_expressions import reads_headers
from tidegate.lineage.fence import NO_FENCE
from tidegate.lineage.layout import JobPaths
from tidegate.lineage.offsets import SourceOffset, batch_offsets
from tidegate.lineage.reference_records import keep_records
from tidegate.spark.pipeline.engine import Engine
from tidegate.spark.pipeline.read import read_log, read_log_stream
from tidegate.spark.pipeline.release_gate import ReleaseGate
from tidegate.spark.pipeline.sink.metrics import BatchReport
from tidegate.storage.store import LOCAL, Store


@dataclass(frozen=True)
class RunResult:
    paths: JobPaths
    batches: int
    input_events: int
    quarantined: int
    rows_emitted: int
    seconds: float
    reports: tuple = ()


def _source_options(spec: JobSpec, location: LogLocation, root: Path, store: Store = LOCAL) -> dict[str, str]:
    options = source_options(location) | _corrupt_frame_options(spec, root, store) | _headers_option(spec)
    if spec.source.max_events_per_batch:
        options["maxEventsPerBatch"] = str(spec.source.max_events_per_batch)
    if spec.source.max_arrival_span_per_batch_us:
        options["maxArrivalSpanPerBatch"] = f"{spec.source.max_arrival_span_per_batch_us}us"
    return options


def _headers_option(spec: JobSpec) -> dict[str, str]:
    """``includeHeaders`` for a job whose expressions read ``headers``: only its reader decodes the
    records' headers (the column is not part of the rows of any other job)."""
    return {"includeHeaders": "true"} if reads_headers(spec) else {}


def _corrupt_frame_options(spec: JobSpec, root: Path, store: Store = LOCAL) -> dict[str, str]:
    """``source.on_corrupt_frame: quarantine``: damaged frames of the log are skipped and
    recorded under ``<root>/corrupt_frames/`` (one JSON file per skipped span; see
    tidegate.inputs.event_log.verify.record_skipped) — not in quarantine/, whose Parquet the engine owns.

    The records are written by whichever process finds the damage — the driver when it plans,
    the executor when a frame fails its CRC — with plain file writes, so they belong to a
    local root only. On an object store they would land on each executor's own disk under a
    path named like the bucket, and no reader would ever see them: refused, not lost."""
    if spec.source.on_corrupt_frame != "quarantine":
        return {}
    if not store.is_local:
        raise ConfigError(
            f"job {spec.name}: source.on_corrupt_frame: quarantine records skipped frames on the disk of the "
            f"process that finds them, which its lineage on {store.uri(root)} cannot hold",
            "on an s3a:// root use on_corrupt_frame: fail (the default), and mend the log with "
            "`tidegate event-log repair`",
        )
    return {"onCorruptFrame": "quarantine", "corruptFramePath": str(JobPaths(root).corrupt_frames)}


class StopRequested(TidegateError):
    """Raised inside a micro-batch that began after a graceful stop was asked for: the
    batch has written nothing, is not committed, and runs again on the next start."""


class StreamingRun:
    """A job's streaming query, stoppable between micro-batches.

    ``on_batch(report, end_offset)`` runs after each batch's rows are visible and before
    Spark commits it — where a driver records metrics. A graceful :meth:`stop` lets the
    batch in flight finish and commit; a batch that would start after it is refused.
    """

    def __init__(
        self,
        spark: SparkSession,
        spec: JobSpec,
        location: LogLocation,
        root: Path,
        *,
        extra_options: dict[str, str] | None = None,
        emit_after_us: int | None = None,
        emit_from_offsets: dict[int, int] | None = None,
        on_batch: Callable[[BatchReport, SourceOffset], None] | None = None,
        trigger_interval: str | None = None,
        progress: bool = False,
        fence=NO_FENCE,
        store: Store = LOCAL,
        gate: ReleaseGate | None = None,
    ) -> None:
        log = open_log(location)
        self.spark = spark
        self.spec = spec
        self.paths = JobPaths(root, store)
        self.options = _source_options(spec, location, root, store) | (extra_options or {})  # refused before any work
        # the tidegate source plans one Spark partition per log partition: no shuffle needed
        # watermark delay is measured on the broker's clock: the wall clock for a live log,
        # the log's own clock for one filled with recorded (backfilled) arrivals
        self.engine = Engine(
            spark,
            spec,
            self.paths,
            list(range(log.partitions)),
            emit_after_us=emit_after_us,
            emit_from_offsets=emit_from_offsets,
            by_log_partition=True,
            now_us=log.clock_now_us,
            fence=fence,
            layout=layout_of(log),
        )
        self.on_batch = on_batch
        self.gate = gate  # holds triggers while no window can close (release_gate)
        self.trigger_interval = trigger_interval
        self.progress = progress
        self.query: StreamingQuery | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._in_batch = False
        self.started = time.monotonic()

    def start(self) -> StreamingRun:
        stream = read_log_stream(self.spark, self.options, gate=self.gate)
        writer = (
            stream.writeStream.foreachBatch(self._each_batch)
            .option("checkpointLocation", self.paths.uri(self.paths.checkpoint))
            .queryName(f"tidegate-{self.spec.name}")
        )
        if self.trigger_interval:
            writer = writer.trigger(processingTime=self.trigger_interval)
        self.started = time.monotonic()
        self.query = writer.start()
        return self

    def _each_batch(self, df: DataFrame, batch_id: int) -> None:
        with self._lock:
            if self._stopping:
                raise StopRequested(f"batch {batch_id} not started: the job is stopping", "start the job again")
            self._in_batch = True
        try:
            _, end = batch_offsets(self.paths.checkpoint, batch_id, self.paths.store)
            report = self.engine.process_batch(df, batch_id, end.clock_us)
            if self.gate is not None:
                self.gate.after_batch(report.next_close_in_us, report.seconds)
            if self.on_batch is not None:
                self.on_batch(report, end)
            if self.progress:
                done = sum(r.input_events for r in self.engine.reports)
                line = (
                    f"batch {batch_id}: {report.input_events:,} events, {report.rows_emitted:,} rows emitted, "
                    f"{done:,} events so far"
                )
                tty = sys.stderr.isatty()  # on a terminal one line redrawn; in a log one line per batch
                print(f"\r{line}" if tty else line, end="" if tty else "\n", file=sys.stderr, flush=True)
        finally:
            with self._lock:
                self._in_batch = False

    @property
    def in_batch(self) -> bool:
        return self._in_batch

    def process_all_available(self) -> None:
        assert self.query is not None, "start() first"
        self.query.processAllAvailable()

    def stop(self, grace_s: float = 60.0) -> bool:
        """Stop after the batch in flight (if any) has finished; after ``grace_s`` the query
        is stopped anyway (the interrupted batch is not committed and runs again on the next
        start). True when the stop was graceful."""
        with self._lock:
            self._stopping = True
        deadline = time.monotonic() + grace_s
        while self._in_batch and time.monotonic() < deadline:
            time.sleep(0.05)
        graceful = not self._in_batch
        if self.query is not None:
            self.query.stop()
        if self.progress and sys.stderr.isatty():  # end the redrawn line
            print(file=sys.stderr)
        return graceful

    def failure(self) -> BaseException | None:
        """The query's error, unless it is the refusal of a batch during a graceful stop."""
        if self.query is None:
            return None
        exc = self.query.exception()
        if exc is None or StopRequested.__name__ in str(exc):
            return None
        return exc

    def result(self) -> RunResult:
        return _result(self.engine, self.paths, time.monotonic() - self.started)


def run_stream(
    spark: SparkSession,
    spec: JobSpec,
    location: LogLocation,
    root: Path,
    *,
    extra_options: dict[str, str] | None = None,
    emit_after_us: int | None = None,
    emit_from_offsets: dict[int, int] | None = None,
    until_caught_up: bool = True,
    timeout_s: float | None = None,
    progress: bool = False,
    store: Store = LOCAL,
) -> RunResult:
    """Start the streaming query with its checkpoint under ``root`` (a path of ``store``).
    With ``until_caught_up`` it returns once everything in the log is processed; otherwise
    it runs until stopped (or ``timeout_s``)."""
    run = StreamingRun(
        spark,
        spec,
        location,
        root,
        extra_options=extra_options,
        emit_after_us=emit_after_us,
        emit_from_offsets=emit_from_offsets,
        progress=progress,
        store=store,
    ).start()
    try:
        if until_caught_up:
            run.process_all_available()
        else:
            assert run.query is not None  # start() set it
            # pyspark annotates timeout as int, but takes any positive number of seconds (int(timeout * 1000))
            run.query.awaitTermination(timeout_s)  # type: ignore[arg-type]
    finally:
        run.stop(grace_s=0 if not until_caught_up else 60)
    if run.failure() is not None:
        raise TidegateError(f"job {spec.name} failed: {run.failure()}", "see the error above; fix and restart")
    return run.result()


def run_batch(
    spark: SparkSession,
    spec: JobSpec,
    location: LogLocation,
    root: Path,
    *,
    from_arrival_us: int | None = None,
    emit_after_us: int | None = None,
    store: Store = LOCAL,
    records_of: JobPaths | None = None,
) -> RunResult:
    """The batch path: the retained log (from ``from_arrival_us`` when given) as one batch,
    closed with the log's clock. With ``emit_after_us`` it emits what a stream started
    with that first output time would — the span a recovery is checked over. ``records_of``:
    the lineage whose reference records it joins by (a snapshot that came late to the stream
    joins from the same time here); without, every snapshot is taken as on time."""
    from tidegate.eventtime.durations import format_time_us

    log = open_log(location)
    snapshot = log.snapshot()
    paths = JobPaths(root, store)
    if store.exists(paths.checkpoint):
        raise TidegateError(f"{root} already holds a run", "give the batch reference an empty directory of its own")
    if records_of is not None:
        for reference in spec.reference_tables:
            keep_records(records_of, paths, reference.name)
    engine = Engine(spark, spec, paths, list(range(log.partitions)), emit_after_us=emit_after_us, layout=layout_of(log))
    ending = {str(p): o for p, o in enumerate(snapshot.end_offsets)}
    if isinstance(location, KafkaTopic):
        df = _kafka_batch(spark, log, location, snapshot.end_offsets, from_arrival_us, reads_headers(spec))
    else:
        options = (
            source_options(location) | {"endingOffsets": json.dumps(ending)} | _corrupt_frame_options(spec, root, store)
            | _headers_option(spec)
        )  # fmt: skip
        if from_arrival_us is not None:
            options["startingArrivalTime"] = format_time_us(from_arrival_us)
        df = read_log(spark, options)
    started = time.monotonic()
    engine.process_batch(df, 0, snapshot.clock_us)
    return _result(engine, paths, time.monotonic() - started)


def _kafka_batch(
    spark: SparkSession, log, topic: KafkaTopic, ends, from_arrival_us: int | None, headers: bool
) -> DataFrame:
    """The span through Spark's Kafka connector, from offsets planned as the stream plans them
    (with ``headers``: the records' headers too)."""
    from tidegate.inputs.planning import resolve_positions
    from tidegate.spark.kafka import read_range

    starts = resolve_positions(log, "earliest", from_arrival_us, log.snapshot(), accept_partial=True,
                               field="startingArrivalTime")  # fmt: skip
    return read_range(spark, topic, starts, {p: max(e, starts[p]) for p, e in enumerate(ends)}, headers)


def _result(engine: Engine, paths: JobPaths, seconds: float) -> RunResult:
    reports = engine.reports
    return RunResult(
        paths=paths,
        batches=len(reports),
        input_events=sum(r.input_events for r in reports),
        quarantined=sum(r.quarantined for r in reports),
        rows_emitted=sum(r.rows_emitted for r in reports),
        seconds=seconds,
        reports=tuple(reports),
    )
