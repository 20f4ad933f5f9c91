"""``tidegate demo``: the main job end to end on the embedded defaults.

Generates realistic device traffic (skewed clocks, late and early events, bursts, an idle
partition, malformed payloads) into the embedded event log, runs the device-fleet job
as a Spark Structured Streaming query over it, recomputes the same query on the batch
path, and prints where everything is and whether the two agree.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_time_us

REPO_JOBS = Path(__file__).resolve().parents[3] / "jobs"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="generate traffic, run the main streaming job and check it against the batch path")
    p.add_argument("--home", type=Path, default=Path("var/demo"), help="where the demo keeps its log and runs")
    p.add_argument("--spec", type=Path, default=None, help="job spec to run (default: jobs/device_fleet.yaml)")
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--devices", type=int, default=60)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--rate", type=float, default=50.0, help="fleet events per second of event time (sets the span)")
    p.add_argument("--max-events-per-batch", type=int, default=50_000, help="micro-batch size limit")
    p.add_argument("--keep", action="store_true", help="reuse an existing demo home instead of starting fresh")
    p.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from tidegate.hub import EventLog
    from tidegate.hub.generator import GeneratorConfig, generate
    from tidegate.jobspec import load_spec
    from tidegate.spark.tools.compare import compare
    from tidegate.spark.pipeline.runner import run_batch, run_stream
    from tidegate.spark.session import build_session

    home: Path = args.home.resolve()
    if home.exists() and not args.keep:
        shutil.rmtree(home)
    home.mkdir(parents=True, exist_ok=True)
    hub = home / "hub"
    spec = load_spec(args.spec or default_spec())
    say(f"job {spec.name} v{spec.version}: {spec.describe()}")

    if not (hub / "hub.json").exists():
        EventLog.create(hub, partitions=args.partitions, clock="manual")
        config = GeneratorConfig(
            devices=args.devices,
            partitions=args.partitions,
            events=args.events,
            seed=args.seed,
            mode="backfill",
            rate_per_s=args.rate,
            idle_partitions=1 if args.partitions > 2 else 0,
        )
        say(f"generating {args.events:,} events from {args.devices} devices into {hub}")
        summary = generate(EventLog.open(hub), config, progress=True)
        say(f"generated: {summary}")

    spark = build_session("tidegate-demo")
    say("running the streaming job until it has caught up with the log")
    stream = run_stream(
        spark,
        spec,
        hub,
        home / "stream",
        extra_options={"maxEventsPerBatch": str(args.max_events_per_batch)},
        progress=True,
    )
    say("recomputing the same query on the batch path")
    batch = run_batch(spark, spec, hub, home / "batch")

    diff = compare(spark.read.parquet(str(batch.paths.output)), spark.read.parquet(str(stream.paths.output)))
    missing, extra = diff.missing, diff.extra
    audit = spark.read.parquet(str(stream.paths.audit))
    outcomes = {
        (r["action"], r["reason"]): r["count"]
        for r in audit.groupBy("action", "reason").count().collect()
    }
    last = stream.paths.metrics
    watermark = max(
        (r for r in (spark.read.json(str(last)).collect())), key=lambda r: r["batch_id"]
    )["job_watermark_us"]

    print()
    print(f"input events        {stream.input_events:>10,}  in {stream.batches} micro-batches, {stream.seconds:.1f} s")
    for (action, reason), n in sorted(outcomes.items()):
        print(f"  {action:<9} {reason or '-':<18}{n:>10,}")
    print(f"quarantined         {stream.quarantined:>10,}  (bad input, with reason and position)")
    print(f"window rows emitted {stream.rows_emitted:>10,}  job watermark {format_time_us(watermark)}")
    print(f"batch path rows     {batch.rows_emitted:>10,}  streaming vs batch: {missing} missing, {extra} extra")
    print()
    print(f"output      {stream.paths.output}")
    print(f"audit       {stream.paths.audit}")
    print(f"quarantine  {stream.paths.quarantine}")
    print(f"metrics     {stream.paths.metrics}")
    print(f"batch ref   {batch.paths.output}")
    if missing or extra:
        say("streaming output differs from the batch recomputation — this is a bug; please report it")
        return 1
    return 0


def default_spec() -> Path:
    for candidate in (Path("jobs/device_fleet.yaml"), REPO_JOBS / "device_fleet.yaml"):
        if candidate.exists():
            return candidate
    raise ConfigError(
        "no job spec given and jobs/device_fleet.yaml not found",
        "run from the Tidegate checkout, or pass --spec PATH",
    )


def say(message: str) -> None:
    print(f"tidegate: {message}", file=sys.stderr, flush=True)
