"""Benchmark: the same streaming job on a local root and on an S3 root, side by side in one run.

    .venv/bin/python bench/bench_storage.py [--events 9000] [--batch 1500] [--rounds 2] [--work DIR]

Generates the demo's device traffic for ``jobs/device_fleet.yaml`` (10 events a second of event
time, so windows close within the run) into an embedded event log once, starts a local
SeaweedFS server (:class:`tidegate.storage.seaweedfs.LocalS3Server`) and one Spark session that
reaches it (:func:`tidegate.storage.spark.session_conf`; the same session serves both roots),
runs a warm-up on each root, then runs the job until caught up, alternating local, S3, local,
S3 … (``--rounds`` of each) so that the machine's noise falls on both. Each run gets a fresh
lineage root (a folder, or ``s3a://bench/run-N``) and commits through its claimed fence, as a
driver does (the database's word on the lease answers at once: the database is not what is
measured).

Per store it prints

* **events/s**: input events over the run's wall time (the span probes below excluded);
* **batch**: the engine's whole micro-batch (``BatchReport.seconds``), mean and median;
* **commit**: per batch, the steps that make it visible — each output's commit (locally the
  fsync and rename of its hour folders under the fence's lock, on S3 the fence's checks and
  the put-if-absent of its record) and the state version's commit — summed (they may
  overlap: the outputs commit from concurrent lanes), mean and median;
* **checkpoint**: Spark's own offset and commit log writes per batch (``walCommit`` +
  ``commitOffsets`` of its progress reports), mean and median;
* **span**: the cost of a checked span as history grows — after each batch, the time to list
  the files of the last ten minutes of output (:func:`tidegate.lineage.committed.committed_files`,
  what the completeness check and ``tidegate output read`` start with), by a reader that has read no
  commit record yet (cold) and by one that has (warm), after the first batch and after the
  last; and at the end, the span read and counted with Spark (:func:`tidegate.spark.output.read_output`).

Then the ratio of S3 to local events/s, against the bar (S3 ≥ 0.8 of local), and the load
average during the runs. Exit 1 when the two stores' outputs differ or the bar is missed.
Not a test: numbers depend on the machine. Results: docs/benchmarks/bench_storage.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePath

import results_page
from bench_engine import phase_table
from scratch import scratch
from tidegate.lineage import commits
from tidegate.lineage.committed import committed_files
from tidegate.lineage.fence import LeaseClock, LineageFence
from tidegate.spark.pipeline.sink import files, objects
from tidegate.spark.pipeline.sink.state import StateStore

BUCKET = "bench"
BAR = 0.8
SPAN_US = 10 * 60_000_000  # the span a check reads: the last ten minutes of output


def say(text: str) -> None:
    print(f"[storage] {text}", file=sys.stderr, flush=True)


@dataclass
class Run:
    store: str
    seconds: float = 0.0
    events: int = 0
    rows: int = 0
    batch_s: list[float] = field(default_factory=list)
    commit_s: list[float] = field(default_factory=list)
    checkpoint_s: list[float] = field(default_factory=list)
    span_cold_s: list[float] = field(default_factory=list)
    span_warm_s: list[float] = field(default_factory=list)
    span_files: list[int] = field(default_factory=list)
    span_read_s: float = 0.0
    span_rows: int = 0
    load: float = 0.0
    requests: dict = field(default_factory=dict)  # S3 requests of the whole run, by kind
    reports: tuple = ()

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds


class CommitTimer:
    """Times the commit steps of each batch: each output's and the state version's."""

    def __init__(self) -> None:
        self.current: list[float] = []
        self._original = (files.publish_hours, objects._commit, StateStore.commit)

    def __enter__(self) -> CommitTimer:
        def timed(step):
            def timed_step(*args, **kwargs):
                started = time.perf_counter()
                try:
                    return step(*args, **kwargs)
                finally:
                    self.current.append(time.perf_counter() - started)

            return timed_step

        files.publish_hours, objects._commit, StateStore.commit = (timed(s) for s in self._original)
        return self

    def __exit__(self, *exc) -> None:
        files.publish_hours, objects._commit, StateStore.commit = self._original

    def take(self) -> float:
        total, self.current = sum(self.current), []
        return total


# S3A's own counters (Spark's writers and checkpoint) by the kind of request they count
S3A_REQUESTS = {
    "LIST": ("object_list_request",),
    "HEAD": ("object_metadata_request",),
    "GET": ("action_http_get_request",),
    "PUT": ("object_put_request",),
    "COPY": ("object_copy_requests",),
    "DELETE": ("object_delete_request", "object_bulk_delete_request"),
}
# the driver's own calls (pyarrow and signed requests) by the request each sends
STORE_REQUESTS = {
    "list": "LIST",
    "exists": "HEAD",
    "read_bytes": "GET",
    "read_parquet": "GET",
    "write_bytes": "PUT",
    "write_parquet": "PUT",
    "put_if_absent": "PUT",
    "delete": "DELETE",
}


def s3a_counters(spark) -> dict[str, int]:
    jvm = spark._jvm
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI(f"s3a://{BUCKET}/"), spark._jsc.hadoopConfiguration())
    counters = dict(fs.getIOStatistics().counters())
    return {kind: sum(int(counters.get(n, 0)) for n in names) for kind, names in S3A_REQUESTS.items()}


class StoreCounter:
    """Counts the driver's calls on an S3 store (one request each, or about: a parquet read
    or write may take more) by the kind of request."""

    def __init__(self, cls) -> None:
        self.cls, self.calls = cls, {}
        self._original = {name: getattr(cls, name) for name in STORE_REQUESTS}

    def __enter__(self) -> StoreCounter:
        for name, method in self._original.items():

            def counted(*args, _method=method, _kind=STORE_REQUESTS[name], **kwargs):
                self.calls[_kind] = self.calls.get(_kind, 0) + 1
                return _method(*args, **kwargs)

            setattr(self.cls, name, counted)
        return self

    def __exit__(self, *exc) -> None:
        for name, method in self._original.items():
            setattr(self.cls, name, method)


def one_run(spark, spec, event_log, root: PurePath, store, batch: int, name: str) -> Run:
    from tidegate.spark.output import read_output
    from tidegate.spark.pipeline.runner import StreamingRun

    run = Run(name)
    last_end: list[int] = []
    probing = [0.0]

    def on_batch(report, _end) -> None:
        run.batch_s.append(report.seconds)
        run.commit_s.append(timer.take())
        if report.last_output_us is not None:
            last_end.append(report.last_output_us)
        if not last_end:
            return
        started = time.perf_counter()
        commits._cached_json.cache_clear()  # a reader that has read no record yet
        found = committed_files(stream.paths.output, max(last_end) - SPAN_US, max(last_end), store)
        run.span_cold_s.append(time.perf_counter() - started)
        warm = time.perf_counter()
        committed_files(stream.paths.output, max(last_end) - SPAN_US, max(last_end), store)
        run.span_warm_s.append(time.perf_counter() - warm)
        run.span_files.append(len(found))
        probing[0] += time.perf_counter() - started

    from tidegate.storage.store import S3Store

    before = s3a_counters(spark)
    # a driver's commits pass its lineage's fence: claimed here, its database check answering at once
    clock = LeaseClock(ttl_s=3600)
    clock.renewed(time.monotonic())
    fence = LineageFence(root, 1, "bench", clock, lambda: True, store=store)
    fence.claim()
    with CommitTimer() as timer, StoreCounter(S3Store) as driver:
        stream = StreamingRun(
            spark,
            spec,
            event_log,
            root,
            extra_options={"maxEventsPerBatch": str(batch)},
            on_batch=on_batch,
            fence=fence,
            store=store,
        )
        started = time.monotonic()
        stream.start()
        try:
            stream.process_all_available()
        finally:
            stream.stop()
        run.seconds = time.monotonic() - started - probing[0]
    if stream.failure() is not None:
        raise RuntimeError(f"{name} run failed: {stream.failure()}")
    for progress in stream.query.recentProgress:
        if progress.numInputRows:
            d = progress.durationMs
            run.checkpoint_s.append((d.get("walCommit", 0) + d.get("commitOffsets", 0)) / 1000)
    after = s3a_counters(spark)
    run.requests = {kind: after[kind] - before[kind] + driver.calls.get(kind, 0) for kind in S3A_REQUESTS}
    result = stream.result()
    run.events, run.rows, run.reports = result.input_events, result.rows_emitted, result.reports
    if last_end:
        started = time.perf_counter()
        df = read_output(spark, stream.paths.output, max(last_end) - SPAN_US, max(last_end), store)
        run.span_rows = 0 if df is None else df.count()
        run.span_read_s = time.perf_counter() - started
    run.load = os.getloadavg()[0]
    return run


def ms(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.mean(values) * 1000:,.0f} / {statistics.median(values) * 1000:,.0f}"


def table(runs: list[Run]) -> list[str]:
    lines = [
        "| run | store | events/s | batch ms (mean / median) | commit ms | checkpoint ms "
        "| span list, batch 1 → last: cold ms | warm ms | span files | span read (Spark) | load (1 min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(runs, 1):
        lines.append(
            f"| {i} | {r.store} | {r.events_per_s:,.0f} | {ms(r.batch_s)} | {ms(r.commit_s)} | {ms(r.checkpoint_s)} "
            f"| {_ends(r.span_cold_s)} | {_ends(r.span_warm_s)} | {_ends(r.span_files, '{:d}')} "
            f"| {r.span_read_s * 1000:,.0f} ms, {r.span_rows:,} rows | {r.load:.1f} |"
        )
    return lines


def _ends(values: list, fmt: str = "{:.1f}") -> str:
    if not values:
        return "-"
    scale = 1000 if fmt != "{:d}" else 1
    first, last = (fmt.format(v * scale) for v in (values[0], values[-1]))
    return f"{first} → {last}"


def report(runs: list[Run], events: int, batch: int, rounds: int, loads: list[float]) -> int:
    """Print the runs, the requests per batch, the phases and the ratio; the exit code."""
    batches = len(runs[0].batch_s)
    print(
        f"{events:,} events, micro-batches of at most {batch:,} ({batches} batches), "
        f"{rounds} runs per store alternating; SeaweedFS on loopback"
    )
    print()
    for line in table(runs):
        print(line)
    print()
    rate = {name: [r.events_per_s for r in runs if r.store == name] for name in ("local", "s3")}
    pairs = [s / loc for loc, s in zip(rate["local"], rate["s3"], strict=True)]
    ratio = statistics.mean(rate["s3"]) / statistics.mean(rate["local"])
    s3_runs = [r for r in runs if r.store == "s3"]
    print(
        "S3 requests per batch (Spark's S3A counters and the driver's calls; the span probes included): "
        + ", ".join(
            f"{kind} {statistics.mean(r.requests[kind] for r in s3_runs) / batches:,.1f}" for kind in S3A_REQUESTS
        )
    )
    print()
    print(phase_table({f"{r.store} {i}": r.reports for i, r in enumerate(runs, 1)}))
    print()
    print(f"S3 / local events/s: {ratio:.2f} (per round: {', '.join(f'{p:.2f}' for p in pairs)}); bar {BAR}")
    print(f"load average (1 min) before and after each run: {', '.join(f'{v:.1f}' for v in loads)}")
    differ = {(r.events, r.rows, r.span_rows) for r in runs}
    if len(differ) != 1:
        print(f"the runs differ (events, rows, span rows): {sorted(differ)}")
        return 1
    return 0 if ratio >= BAR else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=9_000)
    ap.add_argument("--batch", type=int, default=1_500, help="max events per micro-batch")
    ap.add_argument("--rounds", type=int, default=2, help="runs on each store, alternating")
    ap.add_argument("--devices", type=int, default=60)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--work", type=Path, default=None)
    args = results_page.parse_args(ap, argv)

    from tidegate.inputs.event_log import EventLog
    from tidegate.inputs.event_log.generator import GeneratorConfig, generate
    from tidegate.jobspec import default_spec, load_spec
    from tidegate.spark.session import build_session
    from tidegate.storage.seaweedfs import LocalS3Server
    from tidegate.storage.spark import session_conf
    from tidegate.storage.store import LOCAL, S3Store
    from tidegate.storage.uri import parse_root

    spec = load_spec(default_spec())
    loads = [os.getloadavg()[0]]
    with scratch(args.work, "storage") as work:

        def log(events: int, name: str):
            event_log = work / name
            EventLog.create(event_log, partitions=args.partitions, clock="manual")
            generate(
                EventLog.open(event_log),
                GeneratorConfig(
                    devices=args.devices,
                    partitions=args.partitions,
                    events=events,
                    seed=7,
                    mode="backfill",
                    rate_per_s=10.0,
                    idle_partitions=1 if args.partitions > 2 else 0,
                ),
            )
            return event_log

        event_log, warm_event_log = log(args.events, "event_log"), log(min(args.events, 2_000), "warm-event-log")
        say(f"generated {args.events:,} events; starting SeaweedFS")
        server = LocalS3Server(work / "s3", name="bench").start()
        try:
            server.create_bucket(BUCKET)
            s3 = S3Store(server.settings())
            spark = build_session("tidegate-bench-storage", conf=session_conf({BUCKET: server.settings()}))
            stores = {
                "local": (LOCAL, lambda n: work / f"local-{n}"),
                "s3": (s3, lambda n: s3.path_of(parse_root(f"s3a://{BUCKET}/run-{n}"))),
            }
            for name, (store, root) in stores.items():
                say(f"warm-up on {name}")
                one_run(spark, spec, warm_event_log, root("warm"), store, args.batch, name)
            runs = []
            for n in range(args.rounds):
                for name, (store, root) in stores.items():
                    say(f"round {n + 1}: {name}")
                    runs.append(one_run(spark, spec, event_log, root(n), store, args.batch, name))
                    loads.append(runs[-1].load)
                    say(f"  {runs[-1].events_per_s:,.0f} events/s in {runs[-1].seconds:.1f} s")
        finally:
            server.stop()

    return report(runs, args.events, args.batch, args.rounds, loads)


if __name__ == "__main__":
    sys.exit(results_page.run(main, __file__))
