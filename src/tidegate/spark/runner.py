"""Run a job: streaming over the event log (``run_stream``) or as one batch (``run_batch``).

Both call the same :class:`Engine`; the batch path is one micro-batch holding the whole
span, judged with the same broker clock, so for the same input and clock the two emit
the same rows — the batch path is the reference the stream must equal.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from tidegate.errors import TidegateError
from tidegate.hub import EventLog
from tidegate.jobspec import JobSpec
from tidegate.spark.engine import Engine, JobPaths
from tidegate.spark.source import batch_offsets


@dataclass(frozen=True)
class RunResult:
    paths: JobPaths
    batches: int
    input_events: int
    quarantined: int
    rows_emitted: int
    seconds: float
    reports: tuple = ()


def _source_options(spec: JobSpec, hub: Path) -> dict[str, str]:
    options = {"hub": str(hub)}
    if spec.source.max_events_per_batch:
        options["maxEventsPerBatch"] = str(spec.source.max_events_per_batch)
    if spec.source.max_arrival_span_per_batch_us:
        options["maxArrivalSpanPerBatch"] = f"{spec.source.max_arrival_span_per_batch_us}us"
    return options


def run_stream(
    spark: SparkSession,
    spec: JobSpec,
    hub: Path,
    root: Path,
    *,
    extra_options: dict[str, str] | None = None,
    emit_after_us: int | None = None,
    until_caught_up: bool = True,
    timeout_s: float | None = None,
    progress: bool = False,
) -> RunResult:
    """Start the streaming query with its checkpoint under ``root``. With
    ``until_caught_up`` it returns once everything in the log is processed; otherwise it
    runs until stopped (or ``timeout_s``)."""
    log = EventLog.open(hub)
    paths = JobPaths(root)
    # the tidegate source plans one Spark partition per log partition: no shuffle needed
    engine = Engine(spark, spec, paths, list(range(log.partitions)), emit_after_us=emit_after_us,
                    by_log_partition=True)
    options = _source_options(spec, hub) | (extra_options or {})
    stream = spark.readStream.format("tidegate").options(**options).load()
    started = time.monotonic()

    def each_batch(df: DataFrame, batch_id: int) -> None:
        _, end = batch_offsets(paths.checkpoint, batch_id)
        report = engine.process_batch(df, batch_id, end.clock_us)
        if progress:
            print(
                f"\rbatch {batch_id}: {report.input_events} events, {report.rows_emitted} rows emitted, "
                f"{sum(r.input_events for r in engine.reports)} events so far",
                end="",
                file=sys.stderr,
                flush=True,
            )

    query = (
        stream.writeStream.foreachBatch(each_batch)
        .option("checkpointLocation", str(paths.checkpoint))
        .queryName(f"tidegate-{spec.name}")
        .start()
    )
    try:
        if until_caught_up:
            query.processAllAvailable()
        else:
            query.awaitTermination(timeout_s)
    finally:
        query.stop()
        if progress:
            print(file=sys.stderr)
    if query.exception() is not None:
        raise TidegateError(f"job {spec.name} failed: {query.exception()}", "see the error above; fix and restart")
    return _result(engine, paths, time.monotonic() - started)


def run_batch(spark: SparkSession, spec: JobSpec, hub: Path, root: Path) -> RunResult:
    """The batch path: the whole retained log as one batch, closed with the log's clock."""
    log = EventLog.open(hub)
    snapshot = log.snapshot()
    paths = JobPaths(root)
    if paths.checkpoint.exists():
        raise TidegateError(
            f"{root} already holds a run", "give the batch reference an empty directory of its own"
        )
    engine = Engine(spark, spec, paths, list(range(log.partitions)))
    ending = {str(p): o for p, o in enumerate(snapshot.end_offsets)}
    df = spark.read.format("tidegate").options(hub=str(hub), endingOffsets=json.dumps(ending)).load()
    started = time.monotonic()
    engine.process_batch(df, 0, snapshot.clock_us)
    return _result(engine, paths, time.monotonic() - started)


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

