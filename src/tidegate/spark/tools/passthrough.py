"""The first end-to-end job: the event log, unchanged, into Parquet — exactly once.

It reads the ``tidegate`` source and writes ``partition, offset, arrival_time, key,
payload`` with Spark's file sink. The file sink records each batch's files in
``<output>/_spark_metadata`` and the checkpoint records each batch's offsets, so after a
crash (even ``kill -9``) a restart re-runs only the unfinished batch and readers that go
through Spark (``spark.read.parquet(output)``) see every event exactly once. Files a
killed batch left behind stay on disk but are not listed in ``_spark_metadata``; readers
that bypass Spark's metadata (plain pyarrow on the directory) would see them.

``jobs/passthrough.py`` is the ``spark-submit`` entry point; it calls :func:`main`.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from tidegate.errors import TidegateError
from tidegate.spark.pipeline.read import read_log_stream

Mode = Literal["available-now", "until-caught-up", "continuous"]
COLUMNS = ["partition", "offset", "arrival_time", "key", "payload"]


@dataclass(frozen=True)
class BatchProgress:
    batch_id: int
    events: int


@dataclass(frozen=True)
class PassthroughResult:
    batches: int  # micro-batches run by this call (not counting earlier runs on the checkpoint)
    events: int
    seconds: float


class _Progress(StreamingQueryListener):
    """Progress of one run of the query.

    Filtered by run id, not query id: the query id lives in the checkpoint, so a restart
    shares it, and a late progress report of the previous run can reach this listener.
    """

    def __init__(self, run_id: str | None, on_batch: Callable[[BatchProgress], None] | None) -> None:
        self.run_id = run_id
        self.on_batch = on_batch
        self.batches: list[tuple[str, BatchProgress]] = []

    def onQueryStarted(self, event) -> None:  # noqa: N802 (Spark's names)
        pass

    def onQueryProgress(self, event) -> None:  # noqa: N802
        progress = event.progress
        run_id = str(progress.runId)
        if self.run_id is not None and run_id != self.run_id:
            return
        batch = BatchProgress(progress.batchId, progress.numInputRows)
        self.batches.append((run_id, batch))
        if self.on_batch and batch.events and run_id == self.run_id:
            self.on_batch(batch)

    def onQueryIdle(self, event) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event) -> None:  # noqa: N802
        pass


def run_passthrough(
    spark: SparkSession,
    event_log: str | Path,
    output: str | Path,
    checkpoint: str | Path,
    *,
    mode: Mode = "available-now",
    max_events_per_batch: int | None = None,
    source_options: dict[str, str] | None = None,
    timeout_s: float | None = None,
    on_batch: Callable[[BatchProgress], None] | None = None,
) -> PassthroughResult:
    """Copy the log to Parquet at ``output`` with its checkpoint at ``checkpoint``.

    ``mode``: ``available-now`` reads what the log holds when the query starts and stops;
    ``until-caught-up`` runs until a trigger finds nothing new, then stops;
    ``continuous`` runs until stopped (or ``timeout_s``). Restarting with the same
    ``checkpoint`` resumes just after the last committed batch.
    """
    options = {"event_log": str(event_log)} | (source_options or {})
    if max_events_per_batch:
        options["maxEventsPerBatch"] = str(max_events_per_batch)
    events = read_log_stream(spark, options).select(*COLUMNS)
    writer = (
        events.writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .outputMode("append")
        .queryName("tidegate-passthrough")
    )
    if mode == "available-now":
        writer = writer.trigger(availableNow=True)
    elif mode not in ("until-caught-up", "continuous"):
        raise TidegateError(f"unknown mode {mode!r}", "use available-now, until-caught-up or continuous")

    listener = _Progress(None, on_batch)
    spark.streams.addListener(listener)
    started = time.monotonic()
    query = writer.start()
    listener.run_id = str(query.runId)
    try:
        if mode == "until-caught-up":
            query.processAllAvailable()
        else:
            query.awaitTermination(timeout_s)
    finally:
        query.stop()
        spark.streams.removeListener(listener)
    if query.exception() is not None:
        raise TidegateError(
            f"the passthrough query failed: {query.exception()}",
            "fix the cause above and restart; the checkpoint resumes it",
        )
    # the listener hears progress asynchronously, the query keeps the last 100 reports: join them
    # (a batch may report twice: idle triggers repeat the last batch id with 0 events)
    ran = {b.batch_id: b.events for run_id, b in listener.batches if run_id == listener.run_id}
    for progress in query.recentProgress:
        ran[progress["batchId"]] = max(ran.get(progress["batchId"], 0), progress["numInputRows"])
    return PassthroughResult(len(ran), sum(ran.values()), time.monotonic() - started)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="passthrough", description="Copy a Tidegate event log to Parquet, exactly once (Spark file sink)."
    )
    p.add_argument("--event-log", required=True, type=Path, help="event log directory")
    p.add_argument("--output", required=True, type=Path, help="Parquet output directory")
    p.add_argument("--checkpoint", required=True, type=Path, help="checkpoint directory (reuse it to resume)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--available-now", action="store_true", help="read what the log holds now, then stop")
    when.add_argument("--until-caught-up", action="store_true", help="run until nothing new arrives, then stop")
    p.add_argument("--max-events-per-batch", type=int, help="micro-batch size limit")
    p.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="extra tidegate source option (repeatable)"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        extra = dict(_key_value(o) for o in args.option)
        from tidegate.spark.session import build_session

        spark = build_session("tidegate-passthrough")
        mode: Mode = (
            "available-now" if args.available_now else "until-caught-up" if args.until_caught_up else "continuous"
        )

        def show(batch: BatchProgress) -> None:
            print(f"batch {batch.batch_id}: {batch.events} events", file=sys.stderr, flush=True)

        result = run_passthrough(
            spark, args.event_log, args.output, args.checkpoint,
            mode=mode, max_events_per_batch=args.max_events_per_batch, source_options=extra, on_batch=show,
        )  # fmt: skip
    except TidegateError as exc:
        print(f"passthrough: {exc}", file=sys.stderr)
        return 2
    print(f"passthrough: {result.events} events in {result.batches} batches, {result.seconds:.1f} s")
    return 0


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise TidegateError(f"--option {text!r} is not KEY=VALUE", "write e.g. --option startingOffsets=latest")
    return key, value
