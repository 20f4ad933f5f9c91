"""Benchmark: the ``tidegate`` source against Spark's own Parquet file source, same events, same sink.

    .venv/bin/python bench/bench_source.py [--events 1000000] [--partitions 4] [--work DIR] [--kafka]

Generates N events with the event log's traffic generator, writes them to an event log and (read back
from it, so they are byte-identical) to Parquet files, then streams each with
``Trigger.AvailableNow`` into the ``noop`` sink and reports events/s and the ratio
tidegate / parquet (bar >= 0.5, aim >= 1.0). A warm-up run of each comes first (``--warmup``
events, enough for the JIT to compile both read paths) so neither pays for JVM, JIT and
Python worker start-up alone. Not a test: numbers depend on the machine.

Two rates per source:

* end to end: events / wall time from ``start()`` until the query has stopped. It includes
  starting the query, which for a Python data source means Spark spawning a fresh Python
  process for the source's planner (~1–2 s, paid once per query, outside our code);
* processing: events / the time Spark spent in its triggers (the sum of
  ``durationMs.triggerExecution``, what Spark reports as ``processedRowsPerSecond``) —
  the rate a running job catches up at.

"Outside triggers" is wall minus trigger time: starting and stopping the query.

``tidegate`` is the source jobs read with: the JVM reader of the log
(:mod:`tidegate.spark.pipeline.java_source`). ``tidegate python`` is the same log through the Python
data source (the fallback without a JDK). ``python floor`` is the least any PySpark Python
data source costs: a stream reader that only reads the same Parquet files with pyarrow and
yields their record batches (no offsets to plan, no log). The gap between it and the
Parquet file source is what the Python Data Source API itself costs (a planner process per
query, the Arrow hand-over from Python workers).

``--kafka`` adds ``tidegate kafka``: the same events (keys and payloads read back from the
event log) in a topic of a local broker started under the work directory, read by the
``tidegate`` source over Kafka as Kafka jobs read it (the JVM reader: Kafka's wire protocol
on the executors, as on any plaintext listener, CRCs checked and the broker's throttling
honoured), ``tidegate kafka consumer``: the same topic through Kafka's Java consumer
(``source.kafka.reader: consumer``, what TLS and SASL listeners are read with), and
``tidegate kafka python``: the same topic through the Python data source (confluent-kafka in
Python workers), the fallback without Kafka's client jars. The wire reader is the default on
plaintext listeners only while it reads faster than the consumer: each run prints wire /
consumer per timed read.
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

import results_page
from scratch import scratch
from tidegate.inputs.event_log import EventLog
from tidegate.inputs.event_log.generator import GeneratorConfig, generate
from tidegate.spark.pipeline.read import read_log_stream
from tidegate.spark.pipeline.source import SOURCE_SCHEMA
from tidegate.spark.session import build_session

PARQUET_FILE_ROWS = 250_000


def say(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def make_inputs(root: Path, events: int, partitions: int) -> tuple[Path, Path]:
    event_log, parquet = root / "event-log", root / "parquet"
    log = EventLog.create(event_log, partitions=partitions, clock="manual")
    say(f"generating {events:,} events into {event_log}")
    summary = generate(
        log, GeneratorConfig(partitions=partitions, events=events, seed=7, mode="backfill"), progress=True
    )
    say(f"generated {summary.events:,} events in {summary.seconds:.1f} s")
    parquet.mkdir()
    for p in range(partitions):
        end = log.end_offset(p)
        for i, lo in enumerate(range(0, end, PARQUET_FILE_ROWS)):
            table = log.read(p, lo, min(end, lo + PARQUET_FILE_ROWS))
            pq.write_table(table, parquet / f"p{p:03d}-{i:04d}.parquet")
    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in parquet.glob("*.parquet"))
    size = sum(f.stat().st_size for f in parquet.glob("*.parquet")) / 2**20
    say(f"wrote the same {rows:,} events as {len(list(parquet.glob('*.parquet')))} Parquet files ({size:.0f} MiB)")
    return event_log, parquet


Timing = tuple[int, float, float]  # events, wall seconds start → stopped, seconds inside triggers


def run(spark, name: str, reader, checkpoint: Path) -> Timing:
    """Stream ``reader`` into the noop sink with AvailableNow."""
    started = time.monotonic()
    query = (
        reader.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .queryName(name)
        .start()
    )
    while not query.awaitTermination(1):  # returns the moment the query ends
        done = sum(p["numInputRows"] for p in query.recentProgress)
        print(
            f"\r[bench]   {name}: {done:,} events so far, {time.monotonic() - started:.0f} s",
            end="",
            file=sys.stderr,
            flush=True,
        )
    seconds = time.monotonic() - started
    print(file=sys.stderr)
    if query.exception() is not None:
        raise SystemExit(f"{name} failed: {query.exception()}")
    progress = query.recentProgress
    in_triggers = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
    return sum(p["numInputRows"] for p in progress), seconds, in_triggers


class _File(InputPartition):
    def __init__(self, path: str) -> None:
        self.path = path


class _FloorReader(DataSourceStreamReader):
    """One micro-batch of every file; read() yields the file's record batches as they are."""

    def __init__(self, files: list[str]) -> None:
        self.files = files

    def initialOffset(self) -> dict:
        return {"read": 0}

    def latestOffset(self) -> dict:
        return {"read": 1}

    def partitions(self, start: dict, end: dict) -> list[_File]:
        return [_File(f) for f in self.files] if start["read"] < end["read"] else []

    def read(self, partition: _File):
        yield from pq.read_table(partition.path).to_batches()

    def commit(self, end: dict) -> None:
        pass


class FloorSource(DataSource):
    """``format("python-floor")``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "python-floor"

    def schema(self):
        return SOURCE_SCHEMA

    def streamReader(self, schema) -> _FloorReader:
        return _FloorReader(self.options["files"].split(","))


SOURCES = ("tidegate", "tidegate python", "python floor", "parquet")
KAFKA, KAFKA_CONSUMER, KAFKA_PYTHON = "tidegate kafka", "tidegate kafka consumer", "tidegate kafka python"


def make_topic(work: Path, event_log: Path, tag: str):
    """The event log's events, partition by partition, in a topic of a broker under ``work``."""
    from tidegate.inputs.kafka import broker
    from tidegate.inputs.kafka.client import KafkaTopic
    from tidegate.inputs.kafka.producer import TopicWriter
    from tidegate.inputs.kafka.topics import create_topic

    state = broker.start(work / "kafka")
    atexit.register(broker.stop, work / "kafka")  # also when a run fails
    log = EventLog.open(event_log)
    topic = KafkaTopic(state.bootstrap, f"bench-{tag}")
    create_topic(topic, log.partitions)
    writer = TopicWriter(topic)
    started = time.monotonic()
    for p in range(log.partitions):
        for batch in log.read_batches(p, 0, log.end_offset(p)):
            writer.append(p, batch.column("key").to_pylist(), batch.column("payload").to_pylist())
    say(f"wrote the same events to {topic} in {time.monotonic() - started:.1f} s")
    return topic


def measure(spark, event_log: Path, parquet: Path, scratch: Path, tag: str, topic=None) -> dict[str, Timing]:
    files = ",".join(str(f) for f in sorted(parquet.glob("*.parquet")))
    readers = {
        "tidegate": read_log_stream(spark, {"event_log": str(event_log)}),  # what jobs read with: the JVM reader
        "tidegate python": read_log_stream(spark, {"event_log": str(event_log)}, reader="python"),
        "python floor": spark.readStream.format("python-floor").option("files", files).load(),
        "parquet": spark.readStream.schema(SOURCE_SCHEMA).parquet(str(parquet)),
    }
    if topic is not None:
        readers[KAFKA] = read_log_stream(spark, topic.source_options(), reader="jvm")
        consumer = dataclasses.replace(topic, reader="consumer")  # what TLS and SASL listeners are read with
        readers[KAFKA_CONSUMER] = read_log_stream(spark, consumer.source_options(), reader="jvm")
        readers[KAFKA_PYTHON] = read_log_stream(spark, topic.source_options(), reader="python")
    return {
        name: run(spark, f"{name.replace(' ', '-')}-{tag}", df, scratch / f"ck-{name.replace(' ', '-')}-{tag}")
        for name, df in readers.items()
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--warmup", type=int, default=250_000, help="events of the untimed warm-up run of each source")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of each source; the best counts")
    ap.add_argument("--work", type=Path, help="scratch directory (default: a temporary one, removed after)")
    ap.add_argument("--kafka", action="store_true", help="also read the same events from a Kafka topic (local broker)")
    args = results_page.parse_args(ap, argv)

    if args.work is not None and args.work.exists() and any(args.work.iterdir()):
        raise SystemExit(f"{args.work} is not empty; give an empty or new --work directory")
    with scratch(args.work, "source") as work:
        warm_event_log, warm_parquet = make_inputs(work / "warmup", args.warmup, args.partitions)
        event_log, parquet = make_inputs(work / "main", args.events, args.partitions)
        warm_topic = make_topic(work, warm_event_log, "warmup") if args.kafka else None
        topic = make_topic(work, event_log, "main") if args.kafka else None
        say(f"starting Spark ({args.master})")
        spark = build_session("tidegate-bench-source", master=args.master)
        spark.dataSource.register(FloorSource)
        say("warm-up run of every source")
        measure(spark, warm_event_log, warm_parquet, work, "warmup", warm_topic)
        best: dict[str, tuple[float, float, float]] = {}  # fastest wall, trigger and outside-trigger seconds
        paired: list[float] = []  # end-to-end ratio of each timed run, both sources in the same run
        paired_kafka: list[float] = []
        wire_over_consumer: list[float] = []  # the wire reader's lead over Kafka's consumer, per timed run
        for i in range(args.repeat):
            say(f"timed run {i + 1}/{args.repeat}")
            timings = measure(spark, event_log, parquet, work, f"run{i}", topic)
            for name, (events, wall, busy) in timings.items():
                if events != args.events:
                    raise SystemExit(f"{name} read {events:,} events, expected {args.events:,}")
                say(
                    f"  {name}: {events / wall:,.0f} events/s end to end ({wall:.1f} s), "
                    f"{events / busy:,.0f} processing"
                )
                old = best.get(name, (wall, busy, wall - busy))
                best[name] = (min(old[0], wall), min(old[1], busy), min(old[2], wall - busy))
            paired.append(timings["parquet"][1] / timings["tidegate"][1])
            if args.kafka:
                paired_kafka.append(timings["parquet"][1] / timings[KAFKA][1])
                wire_over_consumer.append(timings[KAFKA_CONSUMER][1] / timings[KAFKA][1])
        n = args.events
        wall = {k: n / v[0] for k, v in best.items()}
        busy = {k: n / v[1] for k, v in best.items()}
        print(
            f"events           {n:>11,}  ({args.partitions} partitions, {args.master}, noop sink, AvailableNow, "
            f"best of {args.repeat})"
        )
        print(f"{'':22}{'end to end':>11}  {'processing':>11}   (events/s)   outside triggers (s)")
        for k in (*SOURCES, KAFKA, KAFKA_CONSUMER, KAFKA_PYTHON) if args.kafka else SOURCES:
            print(f"{k:<22}{wall[k]:>11,.0f}  {busy[k]:>11,.0f}   {best[k][2]:>23.2f}")
        for label, rates in (("end to end", wall), ("processing", busy)):
            ratio = rates["tidegate"] / rates["parquet"]
            verdict = "meets the aim" if ratio >= 1.0 else "meets the bar" if ratio >= 0.5 else "BELOW THE BAR"
            python, floor = rates["tidegate python"] / rates["parquet"], rates["python floor"] / rates["parquet"]
            print(
                f"ratio {label:<11}{ratio:>11.2f}  (bar >= 0.5, aim >= 1.0): {verdict};"
                f" tidegate python {python:.2f}, python floor {floor:.2f}"
            )
        if args.kafka:
            ratio, event_log_ratio = wall[KAFKA] / wall["parquet"], wall[KAFKA] / wall["tidegate"]
            verdict = "meets the aim" if ratio >= 0.9 else "meets the bar" if ratio >= 0.5 else "BELOW THE BAR"
            python, consumer = wall[KAFKA_PYTHON] / wall["parquet"], wall[KAFKA_CONSUMER] / wall["parquet"]
            print(
                f"ratio kafka end to end {ratio:.2f} to parquet (bar >= 0.5, aim >= 0.9): {verdict}; "
                f"{event_log_ratio:.2f} to the embedded log; through Kafka's consumer {consumer:.2f}, "
                f"through the Python source {python:.2f}"
            )
            lead = wall[KAFKA] / wall[KAFKA_CONSUMER]
            print(f"kafka wire / consumer end to end {lead:.2f}: "
                  + ("the wire reader keeps its lead, it stays the default on plaintext listeners" if lead > 1.0
                     else "NO LEAD: the consumer should be the default"))  # fmt: skip
        print(f"end-to-end ratio of each timed run: {' '.join(f'{r:.2f}' for r in paired)}")
        if args.kafka:
            print(f"kafka end-to-end ratio of each timed run: {' '.join(f'{r:.2f}' for r in paired_kafka)}")
            print(f"kafka wire / consumer of each timed run: {' '.join(f'{r:.2f}' for r in wire_over_consumer)}")
        return 0


if __name__ == "__main__":
    sys.exit(results_page.run(main, __file__))
