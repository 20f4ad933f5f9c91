"""``tidegate demo run``: the main job end to end on the embedded defaults — or on Kafka.

Generates realistic device traffic (skewed clocks, late and early events, bursts, an idle
partition, malformed payloads) into the embedded event log, runs the device-fleet job
as a Spark Structured Streaming query over it, recomputes the same query on the batch
path, and prints where everything is and whether the two agree.

``--source kafka`` does the same over a Kafka topic: on the broker of ``--bootstrap``, or
on a local one it starts (and stops) under the demo's home. The broker stamps arrivals as
records come, so the traffic is written in real time (seconds) and the job is the
seconds-scale ``jobs/device_fleet_seconds.yaml``; the batch path reads the same offsets
through Spark's own Kafka connector.

``--storage s3`` keeps the lineages on an S3 store instead of a local folder: a local
SeaweedFS server (``tidegate.storage.seaweedfs``, built by ``scripts/seaweedfs.sh``) started
under the demo's home, with the lineage root ``s3a://tidegate-demo/lineages``. Batches
commit there by record, not by rename (docs/concepts/output-layout.md).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from tidegate.errors import TidegateError
from tidegate.eventtime.durations import format_time_us
from tidegate.examples import DEMO_SPEC
from tidegate.jobspec import default_spec

DEMO_BUCKET = "tidegate-demo"


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("demo", help="the main job end to end on generated traffic")
    dsub = group.add_subparsers(dest="demo_command", metavar="ACTION", required=True)
    p = dsub.add_parser(
        "run",
        help="generate traffic, run the main streaming job and check it against the batch path",
        description="Generates device traffic into the embedded event log (or a Kafka topic), runs the "
        "device-fleet job over it as a streaming query, recomputes the same query on the batch path, and "
        "prints where everything is and whether the two agree (exit 1 if not).",
    )
    p.add_argument("--home", type=Path, default=Path("var/demo"), help="where the demo keeps its log and runs")
    p.add_argument("--spec", type=Path, default=None, help=f"job spec to run (default: jobs/{DEMO_SPEC})")
    p.add_argument(
        "--source",
        choices=("event-log", "kafka", "hub"),
        default="event-log",
        help="event-log: the embedded event log (default); kafka: a Kafka topic (hub: the old name of event-log, "
        "deprecated, removed in 0.9)",
    )
    p.add_argument(
        "--bootstrap",
        default=None,
        help="with --source kafka: the brokers (default: start a local broker for the demo)",
    )
    p.add_argument("--events", type=int, default=None, help="default 200,000 (event-log), 20,000 (kafka)")
    p.add_argument("--devices", type=int, default=60, help="devices in the fleet (default 60)")
    p.add_argument("--partitions", type=int, default=4, help="partitions of the log or topic (default 4)")
    p.add_argument("--seed", type=int, default=7, help="the same seed gives the same traffic (default 7)")
    p.add_argument(
        "--rate",
        type=float,
        default=None,
        help="fleet events per second of event time (sets the span); default 50 (event-log), 1,000 (kafka)",
    )
    p.add_argument(
        "--max-events-per-batch",
        type=int,
        default=None,
        help="micro-batch size limit; default 50,000 (event-log), 5,000 (kafka)",
    )
    p.add_argument(
        "--storage",
        choices=("local", "s3"),
        default="local",
        help="where the lineages live: local folders under --home (default), or a local S3 store "
        "(SeaweedFS) the demo starts, as s3a://tidegate-demo/lineages",
    )
    p.add_argument("--keep", action="store_true", help="reuse an existing demo home instead of starting fresh")
    p.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    if args.source == "hub":
        print("`--source hub` is deprecated; use `--source event-log` (removed in 0.9)", file=sys.stderr)
    if args.source == "kafka":
        return _run_on_kafka(args)
    args.events = 200_000 if args.events is None else args.events
    args.rate = 50.0 if args.rate is None else args.rate
    args.max_events_per_batch = args.max_events_per_batch or 50_000
    from tidegate.inputs.event_log import EventLog
    from tidegate.inputs.event_log.generator import GeneratorConfig, generate
    from tidegate.jobspec import load_spec

    home: Path = args.home.resolve()
    if home.exists() and not args.keep:
        shutil.rmtree(home)
    home.mkdir(parents=True, exist_ok=True)
    event_log = home / "event-log"
    spec = load_spec(args.spec or default_spec())
    say(f"job {spec.name} v{spec.version}: {spec.describe()}")

    if not EventLog.exists(event_log):
        EventLog.create(event_log, partitions=args.partitions, clock="manual")
        config = GeneratorConfig(
            devices=args.devices,
            partitions=args.partitions,
            events=args.events,
            seed=args.seed,
            mode="backfill",
            rate_per_s=args.rate,
            idle_partitions=1 if args.partitions > 2 else 0,
        )
        say(f"generating {args.events:,} events from {args.devices} devices into {event_log}")
        summary = generate(EventLog.open(event_log), config, progress=True)
        say(f"generated: {summary}")
    return _run_and_compare(args, spec, event_log, home)


def _run_on_kafka(args: argparse.Namespace) -> int:
    from tidegate.inputs.kafka import broker
    from tidegate.inputs.kafka.client import KafkaTopic
    from tidegate.inputs.kafka.producer import TopicWriter
    from tidegate.inputs.kafka.topics import create_topic, delete_topic
    from tidegate.inputs.kafka.traffic import kafka_traffic
    from tidegate.jobspec import load_spec, parse_spec

    home: Path = args.home.resolve()
    if home.exists() and not args.keep:
        broker.stop(home / "kafka")
        shutil.rmtree(home)
    home.mkdir(parents=True, exist_ok=True)
    started = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        say(f"starting a local Kafka broker under {home / 'kafka'}")
        started = broker.start(home / "kafka", port=0)
        bootstrap = started.bootstrap
    try:
        data = load_spec(args.spec or default_spec("device_fleet_seconds.yaml")).to_dict()
        data["source"] = {"kafka": {"bootstrap_servers": bootstrap, "topic": "tidegate-demo"}}
        spec = parse_spec(data, origin="demo")
        topic = KafkaTopic(bootstrap, "tidegate-demo")
        say(f"job {spec.name} v{spec.version}: {spec.describe()}")
        if not args.keep:
            try:
                delete_topic(topic)
            except TidegateError:
                pass  # none yet
        create_topic(topic, args.partitions)
        events = 20_000 if args.events is None else args.events
        args.max_events_per_batch = args.max_events_per_batch or 5_000
        rate = 1_000.0 if args.rate is None else args.rate
        say(
            f"writing {events:,} events from {args.devices} devices to {topic} at {rate:,.0f}/s"
            " (the broker stamps arrival)"
        )
        summary = kafka_traffic(TopicWriter(topic), events=events, devices=args.devices, rate_per_s=rate,
                                seed=args.seed, progress=True)  # fmt: skip
        say(f"generated: {summary}")
        return _run_and_compare(args, spec, topic, home)
    finally:
        if started is not None:
            broker.stop(Path(started.data_dir))


def _run_and_compare(args: argparse.Namespace, spec, event_log, home: Path) -> int:
    from tidegate.storage.store import LOCAL

    if getattr(args, "storage", "local") != "s3":
        return _compare_runs(args, spec, event_log, LOCAL, home, {})
    from tidegate.storage.seaweedfs import LocalS3Server
    from tidegate.storage.spark import session_conf
    from tidegate.storage.store import S3Store
    from tidegate.storage.uri import parse_root

    say(f"starting a local S3 store (SeaweedFS) under {home / 's3'}")
    server = LocalS3Server(home / "s3", name="demo").start()
    try:
        server.create_bucket(DEMO_BUCKET)
        store = S3Store(server.settings())
        root = parse_root(f"s3a://{DEMO_BUCKET}/lineages")
        say(f"lineages under {root} ({server.endpoint})")
        return _compare_runs(
            args, spec, event_log, store, store.path_of(root), session_conf({DEMO_BUCKET: server.settings()})
        )
    finally:
        server.stop()


def _compare_runs(args: argparse.Namespace, spec, event_log, store, root, conf: dict) -> int:
    from tidegate.spark.output import read_output
    from tidegate.spark.pipeline.runner import run_batch, run_stream
    from tidegate.spark.session import build_session
    from tidegate.spark.tools.compare import compare

    spark = build_session("tidegate-demo", conf=conf)
    say("running the streaming job until it has caught up with the log")
    stream = run_stream(
        spark,
        spec,
        event_log,
        root / "stream",
        extra_options={"maxEventsPerBatch": str(args.max_events_per_batch)},
        progress=True,
        store=store,
    )
    say("recomputing the same query on the batch path")
    batch = run_batch(spark, spec, event_log, root / "batch", store=store)

    # committed batches only: on an object store, files no commit record lists are not output
    diff = compare(
        read_output(spark, batch.paths.output, store=store), read_output(spark, stream.paths.output, store=store)
    )
    missing, extra = diff.missing, diff.extra
    audit = read_output(spark, stream.paths.audit, store=store)
    outcomes = {(r["action"], r["reason"]): r["count"] for r in audit.groupBy("action", "reason").count().collect()}
    watermark = _last_watermark(store, stream.paths.metrics)

    print()
    print(f"input events        {stream.input_events:>10,}  in {stream.batches} micro-batches, {stream.seconds:.1f} s")
    for (action, reason), n in sorted(outcomes.items()):
        print(f"  {action:<9} {reason or '-':<18}{n:>10,}")
    print(f"quarantined         {stream.quarantined:>10,}  (bad input, with reason and position)")
    print(f"window rows emitted {stream.rows_emitted:>10,}  job watermark {format_time_us(watermark)}")
    print(f"batch path rows     {batch.rows_emitted:>10,}  streaming vs batch: {missing} missing, {extra} extra")
    print()
    for name, where in (
        ("output", stream.paths.output),
        ("audit", stream.paths.audit),
        ("quarantine", stream.paths.quarantine),
        ("metrics", stream.paths.metrics),
        ("batch ref", batch.paths.output),
    ):
        print(f"{name:<11} {store.uri(where)}")
    if missing or extra:
        say("streaming output differs from the batch recomputation — this is a bug; please report it")
        return 1
    return 0


def _last_watermark(store, metrics) -> int | None:
    """The job watermark of the last batch's metrics file."""
    from tidegate.lineage.layout import is_staging

    reports = [
        store.read_json(e.path)
        for e in store.list(metrics, recursive=True)
        if e.name.endswith(".json") and not is_staging(e.name)
    ]
    return max(reports, key=lambda r: r["batch_id"])["job_watermark_us"] if reports else None


def say(message: str) -> None:
    print(f"tidegate: {message}", file=sys.stderr, flush=True)
