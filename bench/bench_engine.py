"""Benchmark: a Tidegate job against plain Spark Structured Streaming, same events, one run.

    .venv/bin/python bench/bench_engine.py [--events 500000] [--batch 100000] [--partitions 4]

(a) Tidegate: time policy (late 2m, out-of-order 30s) + tumbling 1-minute count/sum by
    device + Parquet sink, audit off — twice: with one job watermark (what Spark's
    ``withWatermark`` gives, the like-for-like run) and with substreams per device
    (``over: deviceId``: per-device policy state and per-device watermarks, which Spark
    cannot express).
(b) Plain Spark: the same source and payload parsing, ``withWatermark`` (2 minutes) +
    ``window`` + ``groupBy`` + Parquet sink in append mode.

All read the same event log with the same micro-batch limit and run until caught up, after a
warm-up run of each. Each side runs twice, in two rounds of opposite order (plain Spark first,
then last): in one JVM a run right after another goes faster, whatever runs, so one fixed order
would favour whoever runs later. Prints events/s of each over both runs and the ratios (bar
>= 0.8, aim >= 1.0; and per round),
and two latencies, both from the queries' own progress reports, alike for both: the mean
trigger (``triggerExecution``: the offset log, the source's offsets, planning, the batch, the
commit log) of the triggers that read events, and the emission latency — from the start of the
trigger whose events move the watermark past a window's end to the end of the trigger that
writes its row. A Tidegate job writes it in the same trigger; plain Spark's stateful
aggregation evicts with the watermark of the trigger before, so it writes the row one trigger
later (the next one that reads events, or the no-data trigger Spark runs for it). The phase
table shows what a Tidegate batch spends inside its trigger.
(c) Small batches, as a live job sees them: both (one watermark) over a log of their own in
    batches of ``--small-batch`` events (default 100, what 100 events/s gives with a 1 s
    trigger), twice each, alternating. What such a batch costs is almost all fixed cost — the
    queries planned, the Spark jobs run — so the rows are its mean duration, the CPU
    seconds the whole process group (driver, JVM, Python workers) spent per batch, and the
    classes Spark's code generation compiled per batch (a plan that changes every batch —
    a literal that does — compiles anew each time). Then again with each side alone in a
    process of its own whose JVM is quick (C1 only, a serial GC), as a job's driver runs on a
    machine of at most two cores: no other query's background work is charged to it.

Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from pyspark.sql import functions as F

import results_page
from scratch import scratch
from tidegate.inputs.event_log import EventLog
from tidegate.inputs.event_log.generator import GeneratorConfig, generate
from tidegate.jobspec import parse_spec
from tidegate.runtime.estimates.contention import group_cpu_by_pid
from tidegate.spark.pipeline.read import read_log_stream
from tidegate.spark.pipeline.runner import RunResult, StreamingRun, run_stream
from tidegate.spark.session import build_session

WARM_EVENTS = 200_000
SMALL_BATCHES = 30  # per run of the small-batch rows
SPEC = {
    "name": "bench-fleet",
    "version": 1,
    "payload": {"deviceId": "string", "eventTime": "string", "temperature": "double"},
    "timestamp_by": "eventTime",
    "over": "deviceId",
    "policy": {"out_of_order_tolerance": "30s", "late_arrival_tolerance": "2m"},
    "window": {"kind": "tumbling", "size": "1m"},
    "group_by": ["deviceId"],
    "aggregates": {"readings": "count(*)", "total": "sum(temperature)"},
    "sinks": {"audit": False},
}


def say(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def plain_spark(spark, event_log: Path, out: Path, batch: int) -> tuple[float, int, list[float]]:
    schema = "deviceId string, eventTime string, temperature double"
    # the reader Tidegate jobs use, so both sides pay the same to read the log
    stream = read_log_stream(spark, {"event_log": str(event_log), "maxEventsPerBatch": str(batch)})
    parsed = stream.select(F.from_json("payload", schema).alias("j")).select(
        F.col("j.deviceId").alias("deviceId"),
        F.col("j.eventTime").try_cast("timestamp").alias("event_time"),
        F.col("j.temperature").alias("temperature"),
    )
    windows = (
        parsed.where(F.col("event_time").isNotNull())
        .withWatermark("event_time", "2 minutes")
        .groupBy(F.window("event_time", "1 minute"), "deviceId")
        .agg(F.count("*").alias("readings"), F.sum("temperature").alias("total"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "deviceId",
            "readings",
            "total",
        )
    )
    started = time.monotonic()
    query = (
        windows.writeStream.format("parquet")
        .outputMode("append")
        .option("path", str(out / "output"))
        .option("checkpointLocation", str(out / "checkpoint"))
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    seconds = time.monotonic() - started
    rows = spark.read.parquet(str(out / "output")).count()
    return seconds, rows, triggers(query), emission_latencies(query, later=1)


def triggers(query) -> list[float]:
    """Seconds of each trigger that read events, as the query's progress reports time it."""
    return [p.durationMs.get("triggerExecution", 0) / 1000 for p in query.recentProgress if p.numInputRows]


def emission_latencies(query, later: int) -> list[float]:
    """For each trigger that read events, seconds from its start to the end of the trigger
    ``later`` triggers on, which writes the windows its watermark closed (0: itself)."""
    progress = sorted(query.recentProgress, key=lambda p: p.batchId)

    def start(p) -> float:
        return datetime.fromisoformat(p.timestamp.replace("Z", "+00:00")).timestamp()

    return [
        start(progress[i + later]) + progress[i + later].durationMs.get("triggerExecution", 0) / 1000 - start(p)
        for i, p in enumerate(progress)
        if p.numInputRows and i + later < len(progress)
    ]


def tidegate(spark, spec, event_log: Path, root: Path, batch: int) -> tuple[RunResult, list[float], list[float]]:
    """A Tidegate job run until caught up, as :func:`run_stream` runs it; its triggers and
    emission latencies."""
    run = StreamingRun(
        spark, spec, event_log, root, extra_options={"maxEventsPerBatch": str(batch)}, progress=True
    ).start()
    try:
        run.process_all_available()
    finally:
        run.stop()
    if run.failure() is not None:
        raise RuntimeError(f"the Tidegate job failed: {run.failure()}")
    return run.result(), triggers(run.query), emission_latencies(run.query, later=0)


@dataclass(frozen=True)
class _Run:
    """One run of one side until caught up: its seconds, window rows, triggers and emission
    latencies, and (Tidegate) its batches' reports."""

    seconds: float
    rows: int
    triggers: list[float]
    emitted: list[float]
    reports: list = field(default_factory=list)


def one_run(spark, spec, event_log: Path, root: Path, batch: int) -> _Run:
    """Plain Spark (``spec`` None) or the Tidegate job ``spec``, run until caught up."""
    if spec is None:
        return _Run(*plain_spark(spark, event_log, root, batch))
    started = time.monotonic()
    result, trigger_s, emitted_s = tidegate(spark, spec, event_log, root, batch)
    return _Run(time.monotonic() - started, result.rows_emitted, trigger_s, emitted_s, result.reports)


def cpu_s() -> float:
    """CPU seconds so far of this process group: the bench, its Spark JVM, their Python workers."""
    return sum(group_cpu_by_pid([os.getpgrp()]).values())


SMALL_SIDES = ("plain Spark", "Tidegate")


def small_batches(
    spark, spec, work: Path, config: GeneratorConfig, per_batch: int, sides: tuple[str, ...] = SMALL_SIDES
) -> dict[str, list[tuple]]:
    """``sides`` (both by default) over a log of :data:`SMALL_BATCHES` batches of ``per_batch``
    events, twice each, alternating, after a round that is not counted (the first small batches
    of each side cost more: new plans, new code): per run (mean batch s, CPU s per batch)."""
    event_log = work / "small-event-log"
    generate(
        EventLog.create(event_log, partitions=config.partitions, clock="manual"),
        replace(config, events=SMALL_BATCHES * per_batch),
    )
    runs: dict[str, list[tuple]] = {side: [] for side in sides}
    compiled = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    for i in range(3):
        for side in sides:
            cpu, classes = cpu_s(), compiled.getCount()
            if side == "plain Spark":
                _, _, durations, _ = plain_spark(spark, event_log, work / f"small-plain-{i}", per_batch)
            else:
                result = run_stream(
                    spark,
                    spec,
                    event_log,
                    work / f"small-tidegate-{i}",
                    extra_options={"maxEventsPerBatch": str(per_batch)},
                )
                durations = [r.seconds for r in result.reports if r.input_events]
            n = len(durations)
            if i:
                cost = ((cpu_s() - cpu) / n, (compiled.getCount() - classes) / n)
                runs[side].append((statistics.mean(durations), *cost))
    return runs


def print_small(small: dict[str, list[tuple]], per_batch: int, jvm: str) -> None:
    print(
        f"small batches of {per_batch} events, one watermark, two runs each{jvm} "
        "(mean batch s / CPU s a batch, the whole process group / classes compiled a batch)"
    )
    for name, got in small.items():
        print(f"  {name:<26}" + "   ".join(f"{mean:.3f} / {cpu:.3f} / {code:.1f}" for mean, cpu, code in got))
    if set(small) != set(SMALL_SIDES):
        return
    for i, label in ((0, "mean batch"), (1, "CPU a batch")):
        ratios = [p[i] / t[i] for p, t in zip(small["plain Spark"], small["Tidegate"], strict=True)]
        print(f"ratio Spark/Tidegate, {label:<12} " + "   ".join(f"{r:.2f}" for r in ratios) + "   (aim 1.0)")


def small_only(args) -> int:
    """One side's small-batch rows alone, in this process's JVM, as JSON on standard output."""
    with scratch(args.work, "engine-small") as work:
        config = GeneratorConfig(
            devices=args.devices, partitions=args.partitions, events=0, seed=3, mode="backfill", rate_per_s=200.0
        )
        spark = build_session("tidegate-bench-engine-small")
        spec = parse_spec({**SPEC, "over": None})
        print(json.dumps(small_batches(spark, spec, work, config, args.small_batch, (args.small_only,))))
    return 0


def print_small_in_a_quick_jvm(args) -> None:
    """The small-batch rows again, each side alone in a process whose JVM is quick (the C1
    compiler only, a serial GC): how a job's driver runs on a machine of at most two cores
    (:func:`tidegate.jvm.options.quick_driver`), where C2 would still be compiling minutes
    later — and as each runs in production, with no other query's background work (state
    store maintenance, garbage) in the CPU it is charged."""
    small: dict[str, list[tuple]] = {}
    for side in SMALL_SIDES:
        child = [sys.executable, __file__, "--small-only", side, "--small-batch", str(args.small_batch),
                 "--partitions", str(args.partitions), "--devices", str(args.devices)]  # fmt: skip
        # a session of its own: the CPU it counts is its own process group's, not this bench's JVM's
        done = subprocess.run(
            child, env=os.environ | {"TIDEGATE_JVM_OPTIONS": "quick"}, capture_output=True, text=True,
            start_new_session=True, timeout=1800,
        )  # fmt: skip
        if done.returncode or not done.stdout.strip():
            print(f"small batches of {side} in a quick JVM: failed (exit {done.returncode}): {done.stderr[-1500:]}")
            return
        small[side] = [tuple(run) for run in json.loads(done.stdout.strip().splitlines()[-1])[side]]
    print_small(small, args.small_batch, ", each side alone in a quick JVM (C1 only, serial GC)")


def phase_table(runs: dict[str, list]) -> str:
    """Mean seconds per batch of each phase of the engine's batches (their metrics'
    ``phase_seconds``), and of each concurrent write inside ``writes``, as a Markdown table."""
    busy = {name: [r for r in reports if r.input_events] for name, reports in runs.items()}
    phases = list(dict.fromkeys(k for reports in busy.values() for r in reports for k in r.phase_seconds))
    writes = list(dict.fromkeys(k for reports in busy.values() for r in reports for k in r.write_seconds))

    def mean(reports, values) -> str:
        got = [values(r) for r in reports]
        return f"{statistics.mean(got):.2f}" if got else "-"

    lines = ["| phase (mean s per batch) | " + " | ".join(busy) + " |", "|---|" + "---|" * len(busy)]
    for k in phases:
        lines.append(
            f"| {k} | "
            + " | ".join(mean(rs, lambda r, k=k: r.phase_seconds.get(k, 0.0)) for rs in busy.values())
            + " |"
        )
    for k in writes:
        lines.append(
            f"| &nbsp;&nbsp;write {k} | "
            + " | ".join(mean(rs, lambda r, k=k: r.write_seconds.get(k, 0.0)) for rs in busy.values())
            + " |"
        )
    lines.append("| whole batch | " + " | ".join(mean(rs, lambda r: r.seconds) for rs in busy.values()) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=500_000)
    ap.add_argument("--batch", type=int, default=100_000, help="max events per micro-batch, both jobs")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--devices", type=int, default=200)
    ap.add_argument("--small-batch", type=int, default=100, help="events per batch of the small-batch rows (0: none)")
    ap.add_argument("--work", type=Path, help="scratch directory (default: a temporary one, removed after)")
    ap.add_argument(
        "--small-only",
        choices=SMALL_SIDES,
        help="only this side's small-batch rows as JSON, in a JVM of its own (the bench runs each so in a quick JVM)",
    )
    args = results_page.parse_args(ap, argv)
    if args.small_only:
        return small_only(args)

    with scratch(args.work, "engine") as work:
        event_log = work / "event-log"
        log = EventLog.create(event_log, partitions=args.partitions, clock="manual")
        config = GeneratorConfig(
            devices=args.devices,
            partitions=args.partitions,
            events=args.events,
            seed=3,
            mode="backfill",
            rate_per_s=200.0,
        )
        summary = generate(log, config, progress=True)
        say(f"generated {summary.events:,} events")
        spark = build_session("tidegate-bench-engine")
        specs = {"one watermark": parse_spec({**SPEC, "over": None}), "substreams": parse_spec(SPEC)}

        say("warm-up (JVM, Python workers) on every path, over a log of its own of at most 200k events")
        warm_event_log = work / "warm-event-log"
        generate(
            EventLog.create(warm_event_log, partitions=args.partitions, clock="manual"),
            replace(config, events=min(args.events, WARM_EVENTS)),
        )
        plain_spark(spark, warm_event_log, work / "warm", 10_000_000)
        for i, spec in enumerate(specs.values()):
            run_stream(
                spark,
                spec,
                warm_event_log,
                work / f"warm-tidegate-{i}",
                extra_options={"maxEventsPerBatch": "10000000"},
            )

        # a run goes faster right after another in the same JVM (same code, alternating order: the
        # second of a pair ~10 % faster in 9 of 11 pairs), so each side runs twice, in opposite orders
        sides = ["plain Spark", *specs]
        runs: dict[str, list[_Run]] = {side: [] for side in sides}
        for round_, order in enumerate((sides, sides[::-1])):
            for side in order:
                say(f"round {round_ + 1}: {side}")
                runs[side].append(
                    one_run(spark, specs.get(side), event_log, work / f"{side}-{round_}".replace(" ", "-"), args.batch)
                )

        small = (
            small_batches(spark, specs["one watermark"], work, config, args.small_batch) if args.small_batch else None
        )

        n = summary.events
        plain = runs.pop("plain Spark")
        plain_s = sum(r.seconds for r in plain)
        print()
        print(
            f"events                      {n:,} in micro-batches of at most {args.batch:,}, each side run "
            "twice: round 1 plain Spark first, round 2 last"
        )
        print(
            f"plain Spark                 {2 * n / plain_s:>10,.0f} events/s  "
            f"({' + '.join(f'{r.seconds:.1f}' for r in plain)} s, {plain[0].rows:,} window rows)"
        )
        for name, got in runs.items():
            print(
                f"Tidegate, {name:<17} {2 * n / sum(r.seconds for r in got):>10,.0f} events/s  "
                f"({' + '.join(f'{r.seconds:.1f}' for r in got)} s, {got[0].rows:,} window rows)"
            )
        for name, got in runs.items():
            print(
                f"ratio Tidegate/Spark, {name:<13} {plain_s / sum(r.seconds for r in got):.2f}   (bar 0.8, aim 1.0; "
                "per round " + ", ".join(f"{p.seconds / r.seconds:.2f}" for p, r in zip(plain, got, strict=True)) + ")"
            )
        print(
            "latency, mean s: a trigger that read events / emission (its start → the end of the trigger "
            "that writes the windows its watermark closed)"
        )

        def pooled(got: list[_Run]) -> tuple[float, float]:
            return (
                statistics.mean(t for r in got for t in r.triggers),
                statistics.mean(e for r in got for e in r.emitted),
            )

        latency = {f"Tidegate, {name}": pooled(got) for name, got in runs.items()}
        spark_latency = pooled(plain)
        for name, (trigger, emitted) in latency.items():
            print(f"  {name:<27} {trigger:.2f} / {emitted:.2f} s")
        print(
            f"  plain Spark                 {spark_latency[0]:.2f} / {spark_latency[1]:.2f} s "
            "(writes a window one trigger later)"
        )
        for name, (trigger, emitted) in latency.items():
            print(
                f"ratio {name}/Spark, trigger {trigger / spark_latency[0]:.2f}, "
                f"emission {emitted / spark_latency[1]:.2f}   (bar 1.0)"
            )
        if small:
            print_small(small, args.small_batch, "")
            print_small_in_a_quick_jvm(args)
        print()
        print(phase_table({name: [b for r in got for b in r.reports] for name, got in runs.items()}))
        return 0


if __name__ == "__main__":
    sys.exit(results_page.run(main, __file__))
