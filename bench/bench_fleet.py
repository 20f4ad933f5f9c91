"""Benchmark: what jobs cost to keep live — N jobs × 2 regions at a modest rate, against plain Spark.

    .venv/bin/python bench/bench_fleet.py [--jobs 1,2,3] [--rate 100] [--trigger 1s] [--stretch 30s]
        [--measure 60] [--latency-target 5] [--json FILE]

For each N in ``--jobs``, in the same run and one side after the other on the same logs:

(a) Tidegate: N jobs — the demo's device fleet query, 1-minute tumbling windows per device —
    each reading an embedded event log of its own that a generator feeds at ``--rate`` events/s
    in real time, deployed and started in east and west: 2N drivers, each its own JVM, at the
    trigger ``--trigger`` (``TIDEGATE_TRIGGER_INTERVAL``), a batch every trigger.
(a') "Tidegate held", with ``--stretch`` only: the same with ``TIDEGATE_TRIGGER_STRETCH`` set
    to it, so a caught-up driver reads when a window can close (decision 0016).
(a'') "Tidegate one JVM", with ``--stretch`` only: each region's N jobs' queries held the same
    way in one Spark session, one process per region (bench/fleet_one_jvm.py). It measures
    the engine's cost when jobs share a driver JVM; a driver's lease, fence and records are not
    there (decision 0017).
(b) Plain Structured Streaming as users run it: one query per application, 2N applications
    (a Python process with its own Spark session and JVM, ``local[2]`` like a region's default
    master), the same logs read through the same reader, the same parsing, ``withWatermark`` +
    ``window`` + ``groupBy`` + Parquet in append mode, at the same processing-time trigger.

Once every duplicate has caught up and run ``--settle`` s, each one's process group is
measured over ``--measure`` s: the CPU it used (in cores), its resident memory, the emission
latency, and whether it keeps up — its backlog at the end within three triggers' (and a
stretch's) worth of events and a trigger in the last 5 s (and stretch).

The emission latency of a Tidegate row is measured from when it could be released: for each
batch that wrote window rows, the batch's duration plus how far its job watermark had passed the
earliest of those windows' ends when it read its input — the time the rows waited for a trigger
(and, held, for the gate). The fleet job's substreams all follow the arrival term (each device
is missing from some partition), so the job watermark is every unit's. Plain Spark's is the one
``bench_engine`` reports: from the start of the trigger whose events close a window to the end of
the trigger that writes its row, one trigger later (from its progress reports), for every
trigger that read events; it leaves out the wait before that trigger, up to one trigger.
A side holds N when every duplicate keeps up with its p95 emission latency within
``--latency-target`` s; a side that did not hold N is not run at a larger one. N goes up
until no side holds it, or until the machine's
available memory would not hold the next N (judged from the last N's resident memory), and the
largest N each side held is the figure.

Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import drill_traffic  # noqa: E402
import fleet_one_jvm  # noqa: E402
import results_page  # noqa: E402
from platform_support import Platform  # noqa: E402
from scratch import scratch  # noqa: E402
from tidegate.eventtime.durations import parse_duration_us  # noqa: E402
from tidegate.runtime.estimates.contention import group_usage  # noqa: E402

REGIONS = ("east", "west")
HELD = "Tidegate held"  # Tidegate with TIDEGATE_TRIGGER_STRETCH (decision 0016)
ONE_JVM = "Tidegate one JVM"  # held, each region's jobs in one session (decision 0017)
SIDES = (HELD, ONE_JVM, "Tidegate", "plain Spark")
STRETCHED = (HELD, ONE_JVM)  # the sides run only with --stretch
CATCH_UP_S = 600.0  # for every duplicate of a side to catch up before it is measured
GENERATOR_MB = 200.0  # a log's real-time generator, resident
MEMORY_MARGIN = 1.2  # the next N starts only where this much of what it needs is available


def available_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    raise SystemExit("bench_fleet: /proc/meminfo has no MemAvailable")


def say(text: str) -> None:
    print(f"[fleet] {text}", file=sys.stderr, flush=True)


@dataclass
class Duplicate:
    side: str
    job: str
    region: str
    cpu_cores: float = 0.0
    rss_mb: float = 0.0
    latencies_s: list[float] = field(default_factory=list)
    backlog: int | None = None
    last_trigger_age_s: float | None = None
    keeps_up: bool = False

    @property
    def p95_s(self) -> float | None:
        return percentile(self.latencies_s, 95)


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def measure(pgids: dict[str, int], seconds: float) -> dict[str, tuple[float, float]]:
    """Each named process group's cores (CPU seconds over ``seconds`` of wall time) and its
    mean resident MB, sampled every second."""
    before, started = group_usage(list(pgids.values())), time.monotonic()
    rss: dict[int, list[int]] = {g: [] for g in pgids.values()}
    while time.monotonic() - started < seconds:
        time.sleep(1.0)
        for g, (_, resident) in group_usage(list(pgids.values())).items():
            rss[g].append(resident)
    after, wall = group_usage(list(pgids.values())), time.monotonic() - started
    return {
        name: ((after[g][0] - before[g][0]) / wall, statistics.mean(rss[g] or [0]) / 2**20) for name, g in pgids.items()
    }


# -- (a) Tidegate ------------------------------------------------------------------------------
def tidegate_side(work: Path, logs: list[Path], args, side: str) -> list[Duplicate]:
    """``side`` is "Tidegate" (a batch every trigger) or "Tidegate held" (``--stretch``)."""
    stretch = args.stretch if side == HELD else "0s"
    # drivers take their settings from the launching process's environment
    settings = {"TIDEGATE_TRIGGER_INTERVAL": args.trigger, "TIDEGATE_TRIGGER_STRETCH": stretch}
    before = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    root = work / side.lower().replace(" ", "-")
    root.mkdir()
    p = Platform(root, logs[0], env={"TIDEGATE_LOG_DIRS": str(work)})
    c = p.controller
    try:
        jobs = []
        for i, log in enumerate(logs):
            spec = yaml.safe_load((REPO / "jobs" / "device_fleet.yaml").read_text())
            spec |= {"name": f"fleet{i}", "source": {"event_log": str(log)}}
            path = p.root / f"fleet{i}.yaml"
            path.write_text(yaml.safe_dump(spec, sort_keys=False))
            c.deploy(path)
            for region in REGIONS:
                c.start(f"fleet{i}", region, mode="now")
            jobs.append(f"fleet{i}")
        deadline = time.monotonic() + CATCH_UP_S
        try:
            for job in jobs:
                for region in REGIONS:
                    p.wait_caught_up(job, region, timeout_s=max(1.0, deadline - time.monotonic()))
            say(f"{side}: {2 * len(jobs)} drivers caught up; waiting for their first rows, then {args.settle:g} s")
        except Exception as late:  # noqa: BLE001 — measured all the same: N is not held
            say(f"{side}: not every driver caught up in {CATCH_UP_S:.0f} s ({late}); measuring as they are")
        runs = {(job, region): c.status_of(job, region).run_id for job in jobs for region in REGIONS}
        # a row is released once the watermark passes its window, minutes after a start: the
        # measure begins once every duplicate wrote rows, so that it holds their emissions
        while any(c.db.run(run).first_output_at is None for run in runs.values()) and time.monotonic() < deadline:
            time.sleep(1.0)
        time.sleep(args.settle)
        pgids = {f"{job}@{region}": c.db.run(run).pid for (job, region), run in runs.items()}
        since = time.time()
        used = measure(pgids, args.measure)
        now, trigger_s = time.time(), parse_duration_us(args.trigger, field="--trigger") / 1e6
        found = []
        for (job, region), run in runs.items():
            batches = c.db.batch_metrics(job, region, run_id=run, since=since)
            d = Duplicate(side, job, region, *used[f"{job}@{region}"])
            lineage = c.db.lineage(c.db.run(run).lineage)
            d.latencies_s = release_latencies(batches, earliest_ends(Path(lineage.root) / "output"))
            last = batches[-1] if batches else None
            d.backlog = None if last is None else last.backlog_events
            d.last_trigger_age_s = None if last is None else round(now - last.processed_at, 1)
            d.keeps_up = keeps_up(d, args.rate, trigger_s, parse_duration_us(stretch, field="--stretch") / 1e6)
            found.append(d)
        return found
    finally:
        p.stop_everything()
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def earliest_ends(output: Path) -> dict[int, int]:
    """Per batch, the earliest window end (µs) among the rows it wrote to ``output``."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    if not any(output.rglob("*.parquet")):
        return {}
    table = ds.dataset(str(output), format="parquet", partitioning="hive").to_table(columns=["batch_id", "window_end"])
    grouped = table.group_by("batch_id").aggregate([("window_end", "min")])
    per_second = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[grouped["window_end_min"].type.unit]
    ends = [v * 1_000_000 // per_second for v in pc.cast(grouped["window_end_min"], "int64").to_pylist()]
    return dict(zip(grouped["batch_id"].to_pylist(), ends, strict=True))


def release_latencies(batches, earliest_end_us: dict[int, int]) -> list[float]:
    """Per batch that wrote window rows: its duration plus how far its job watermark had passed
    the earliest of their ends (closed 1 µs after it) when it read its input."""
    found = []
    for b in batches:
        end = earliest_end_us.get(b.batch_id)
        if end is None or b.batch_seconds is None or b.job_watermark_us is None:
            continue
        found.append(b.batch_seconds + max(0.0, (b.job_watermark_us - (end + 1)) / 1e6))
    return found


def keeps_up(d: Duplicate, rate: float, trigger_s: float, stretch_s: float = 0.0) -> bool:
    """Its backlog within three triggers' and a stretch's worth of input, and a batch lately."""
    return (
        d.backlog is not None
        and d.backlog <= rate * (3 * trigger_s + stretch_s)
        and d.last_trigger_age_s is not None
        and d.last_trigger_age_s <= 5 + trigger_s + stretch_s
    )


# -- (a'') every job of a region in one session ------------------------------------------------
def one_jvm_side(work: Path, logs: list[Path], args) -> list[Duplicate]:
    """Each region's jobs in one worker process: its cores and resident memory shared out
    evenly over its N duplicates, each job's latencies and backlog its own."""
    workers = fleet_one_jvm.start(work, logs, args)
    trigger_s = parse_duration_us(args.trigger, field="--trigger") / 1e6
    stretch_s = parse_duration_us(args.stretch, field="--stretch") / 1e6
    try:
        deadline = time.monotonic() + CATCH_UP_S
        while not all(_emitted(fleet_one_jvm.read_report(report)) for _, report in workers.values()):
            if any(proc.poll() is not None for proc, _ in workers.values()):
                raise SystemExit(f"{ONE_JVM}: a worker exited (see {work / 'one-jvm'}/*/worker.log)")
            if time.monotonic() > deadline:  # measured all the same: N is not held
                say(f"{ONE_JVM}: not every job wrote rows in {CATCH_UP_S:.0f} s; measuring as they are")
                break
            time.sleep(2)
        else:
            say(f"{ONE_JVM}: every job of both regions wrote rows; settling {args.settle:g} s")
        time.sleep(args.settle)
        since = time.time()
        used = measure({region: proc.pid for region, (proc, _) in workers.items()}, args.measure)
        time.sleep(fleet_one_jvm.REPORT_EVERY_S + 1)  # a last report
        now, found = time.time(), []
        for region, (_, report) in workers.items():
            got = fleet_one_jvm.read_report(report) or {"batches": {}, "roots": {}}
            cores, resident = used[region]
            for job, rows in got["batches"].items():
                d = Duplicate(ONE_JVM, job, region, cores / len(logs), resident / len(logs))
                measured = [_Batch(*row) for row in rows if row[0] >= since]
                d.latencies_s = release_latencies(measured, earliest_ends(Path(got["roots"][job]) / "output"))
                if rows:
                    d.backlog, d.last_trigger_age_s = rows[-1][5], round(now - rows[-1][0], 1)
                d.keeps_up = keeps_up(d, args.rate, trigger_s, stretch_s)
                found.append(d)
        return found
    finally:
        for proc, _ in workers.values():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(30)


@dataclass(frozen=True)
class _Batch:
    """A worker's row for one batch, read as :func:`release_latencies` reads a driver's metrics."""

    processed_at: float
    batch_id: int
    batch_seconds: float
    job_watermark_us: int | None
    rows_emitted: int
    backlog_events: int


def _emitted(report: dict | None) -> bool:
    """Every job in the worker's report has written rows."""
    return report is not None and all(any(row[4] for row in rows) for rows in report["batches"].values())


# -- (b) plain Structured Streaming ------------------------------------------------------------
def plain_side(work: Path, logs: list[Path], args) -> list[Duplicate]:
    workers: dict[str, tuple[subprocess.Popen, Path]] = {}
    try:
        for i, log in enumerate(logs):
            for region in REGIONS:
                name = f"fleet{i}@{region}"
                out = work / "plain" / name
                out.mkdir(parents=True)
                command = [sys.executable, __file__, "--plain-worker", str(log), str(out), "--trigger", args.trigger]
                with (out / "worker.log").open("wb") as log_file:
                    proc = subprocess.Popen(command, stdout=log_file, stderr=log_file, start_new_session=True)
                workers[name] = (proc, out / "report.json")
        trigger_s = parse_duration_us(args.trigger, field="--trigger") / 1e6
        deadline = time.monotonic() + CATCH_UP_S
        while not all(_caught_up(report, args.rate, trigger_s) for _, report in workers.values()):
            if time.monotonic() > deadline:  # measured all the same: they do not keep up, so N is not held
                say(f"plain Spark: not every application caught up in {CATCH_UP_S:.0f} s; measuring as they are")
                break
            if any(proc.poll() is not None for proc, _ in workers.values()):
                raise SystemExit(f"plain Spark: an application exited (see {work / 'plain'}/*/worker.log)")
            time.sleep(2)
        else:
            say(f"plain Spark: {len(workers)} applications caught up; settling {args.settle:g} s")
        time.sleep(args.settle)
        since = time.time()
        used = measure({name: proc.pid for name, (proc, _) in workers.items()}, args.measure)
        time.sleep(2 * trigger_s + 1)  # a last report
        found = []
        for name, (_, report) in workers.items():
            job, region = name.split("@")
            got = json.loads(report.read_text())
            d = Duplicate("plain Spark", job, region, *used[name])
            d.latencies_s = [lat for start, lat in got["latencies"] if start >= since]
            d.backlog = got["backlog"]
            d.last_trigger_age_s = round(time.time() - got["last_trigger_end"], 1)
            d.keeps_up = keeps_up(d, args.rate, trigger_s)
            found.append(d)
        return found
    finally:
        for proc, _ in workers.values():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(30)


def _caught_up(report: Path, rate: float, trigger_s: float) -> bool:
    try:
        got = json.loads(report.read_text())
    except (OSError, ValueError):
        return False
    return got["backlog"] <= 3 * rate * trigger_s and got["triggers"] >= 3


def plain_worker(log: Path, out: Path, trigger: str) -> None:
    """One plain Structured Streaming application: the query, and every 2 s a report of its
    emission latencies, its backlog and its last trigger's end (report.json)."""
    from pyspark.sql import functions as F

    from bench_engine import emission_latencies
    from tidegate.inputs.event_log import EventLog
    from tidegate.lineage.offsets import parse_offset
    from tidegate.spark.pipeline.read import read_log_stream
    from tidegate.spark.session import build_session

    spark = build_session(f"plain-{out.name}", master="local[2]")
    schema = "deviceId string, eventTime string, temperature double"
    parsed = (
        read_log_stream(spark, {"event_log": str(log)})
        .select(F.from_json("payload", schema).alias("j"))
        .select("j.deviceId", F.col("j.eventTime").try_cast("timestamp").alias("event_time"), "j.temperature")
    )
    windows = (
        parsed.where(F.col("event_time").isNotNull())
        .withWatermark("event_time", "2 minutes")
        .groupBy(F.window("event_time", "1 minute"), "deviceId")
        .agg(F.count("*").alias("readings"), F.sum("temperature").alias("total"))
    )
    query = (
        windows.writeStream.format("parquet")
        .outputMode("append")
        .trigger(processingTime=f"{parse_duration_us(trigger) // 1000} milliseconds")  # Spark's form of 1s
        .option("path", str(out / "output"))
        .option("checkpointLocation", str(out / "checkpoint"))
        .start()
    )
    event_log = EventLog.open(log)
    seen: dict[int, tuple[float, float]] = {}  # batch → (trigger start, emission latency)
    while query.isActive:
        time.sleep(2)
        progress = list(query.recentProgress)
        latencies = emission_latencies(query, later=1)
        starts = [p for p in sorted(progress, key=lambda p: p.batchId) if p.numInputRows]
        for p, latency in zip(starts, latencies, strict=False):
            seen[p.batchId] = (_epoch(p.timestamp), latency)
        last = max(progress, key=lambda p: p.batchId) if progress else None
        read = parse_offset(last.sources[0].endOffset).offsets if last is not None else {}
        backlog = sum(max(0, event_log.end_offset(n) - read.get(n, 0)) for n in range(event_log.partitions))
        end = _epoch(last.timestamp) + last.durationMs.get("triggerExecution", 0) / 1000 if last else 0.0
        report = {"latencies": sorted(seen.values()), "backlog": backlog, "last_trigger_end": end,
                  "triggers": len(progress)}  # fmt: skip
        (out / "report.tmp").write_text(json.dumps(report))
        os.replace(out / "report.tmp", out / "report.json")


def _epoch(timestamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


# -- the run -----------------------------------------------------------------------------------
def holds(duplicates: list[Duplicate], target_s: float) -> bool:
    return bool(duplicates) and all(d.keeps_up and d.p95_s is not None and d.p95_s <= target_s for d in duplicates)


def report(rounds: list[dict], args) -> None:
    print(
        f"N jobs × 2 regions at {args.rate:g} events/s each, trigger {args.trigger}, Tidegate's stretch "
        f"{getattr(args, 'stretch', '0s')}; measured {args.measure:g} s "
        f"after {args.settle:g} s caught up; a side holds N when every duplicate keeps up with its p95 emission "
        f"latency ≤ {args.latency_target:g} s"
    )
    print("| N | side | cores per duplicate (mean, max) | cores in all | RSS MB per duplicate | emission latency "
          "p50 / p95 s (worst duplicate) | keep up | holds |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for r in rounds:
        for side in SIDES:
            ds = [Duplicate(**d) for d in r["duplicates"] if d["side"] == side]
            if not ds:
                continue
            cores = [d.cpu_cores for d in ds]
            worst = max(ds, key=lambda d: d.p95_s or 0.0)
            print(
                f"| {r['n']} | {side} | {statistics.mean(cores):.2f}, {max(cores):.2f} | {sum(cores):.2f} | "
                f"{statistics.mean(d.rss_mb for d in ds):.0f} | {_s(percentile(worst.latencies_s, 50))} / "
                f"{_s(worst.p95_s)} | "
                f"{sum(d.keeps_up for d in ds)} of {len(ds)} | {'yes' if r['holds'][side] else 'no'} |"
            )
    for r in rounds:
        if "memory_mb" in r:
            need, have = r["memory_mb"]["need"], r["memory_mb"]["available"]
            print(f"N = {r['n']} not run: it would need about {need / 1024:.1f} GiB, {have / 1024:.1f} GiB available")
    for side in SIDES:
        if any(side in r["holds"] for r in rounds):
            held = [r["n"] for r in rounds if r["holds"].get(side)]
            print(f"largest N held, {side}: {max(held) if held else 0}")


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", default="1,2,3", help="the Ns to try, ascending (comma-separated)")
    ap.add_argument("--rate", type=float, default=100.0, help="events per second into each job's log")
    ap.add_argument("--trigger", default="1s", help="the trigger interval of both sides")
    ap.add_argument("--stretch", default="0s", help="Tidegate's TIDEGATE_TRIGGER_STRETCH (0s: a batch every trigger)")
    ap.add_argument("--settle", type=float, default=20.0, help="seconds after caught up before measuring")
    ap.add_argument("--measure", type=float, default=60.0, help="seconds measured")
    ap.add_argument("--latency-target", type=float, default=5.0, help="p95 emission latency bar, seconds")
    ap.add_argument(
        "--sides", help=f"which of {', '.join(SIDES)} to run (default: all; the held ones only with --stretch)"
    )
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--work", type=Path, help="keep the run's folders here")
    ap.add_argument("--from-json", type=Path, help="report (and file) a run's --json instead of running")
    args = results_page.parse_args(ap, argv)
    if args.from_json is not None:  # the same flags as the run's: the header states them
        report(json.loads(args.from_json.read_text()), args)
        return 0
    chosen = (
        args.sides.split(",")
        if args.sides
        else [s for s in SIDES if s not in STRETCHED or parse_duration_us(args.stretch)]
    )
    sides = [s.strip() for s in chosen]
    if unknown := [s for s in sides if s not in SIDES]:
        raise SystemExit(f"bench_fleet: no side {unknown[0]!r}; the sides are {', '.join(SIDES)}")
    if ONE_JVM in sides and not parse_duration_us(args.stretch):
        raise SystemExit(f"bench_fleet: {ONE_JVM!r} is held by the release gate: give it a --stretch, e.g. 30s")
    rounds: list[dict] = []
    per_job_mb: float | None = None
    for n in sorted(int(x) for x in args.jobs.split(",")):
        if per_job_mb is not None and (need := n * per_job_mb * MEMORY_MARGIN) > (have := available_mb()):
            say(f"N={n}: stopped — it would need about {need / 1024:.1f} GiB, {have / 1024:.1f} GiB is available")
            rounds.append({"n": n, "duplicates": [], "holds": {}, "memory_mb": {"need": need, "available": have}})
            break
        kept = None if args.work is None else args.work / f"n{n}"
        if kept is not None:
            kept.mkdir(parents=True)
        with scratch(kept, f"fleet-{n}") as work:
            for i in range(n):
                (work / f"log{i}").mkdir()
            (work / "platform").mkdir()
            traffics = [drill_traffic.start("event_log", work / f"log{i}", args.rate) for i in range(n)]
            try:
                logs = [t.event_log for t in traffics]
                found: list[Duplicate] = []
                for side in sides:
                    if side == "plain Spark":
                        say(f"N={n}: plain Spark, {2 * n} applications")
                        found += plain_side(work, logs, args)
                    elif side == ONE_JVM:
                        say(f"N={n}: {side}, {n} queries in each region's one session")
                        found += one_jvm_side(work, logs, args)
                    else:
                        say(f"N={n}: {side}, {2 * n} drivers")
                        found += tidegate_side(work, logs, args, side)
            finally:
                for t in traffics:
                    t.stop()
        held = {s: holds([d for d in found if d.side == s], args.latency_target) for s in sides}
        per_job_mb = max(  # both duplicates of a job, and its log's generator
            2 * statistics.mean(d.rss_mb for d in found if d.side == s) + GENERATOR_MB for s in {d.side for d in found}
        )
        rounds.append({"n": n, "duplicates": [asdict(d) for d in found], "holds": held})
        say(f"N={n}: holds {held}")
        sides = [s for s in sides if held[s]]  # a side that did not hold N does not hold more on this machine
        if not sides:
            break
    report(rounds, args)
    if args.json:
        args.json.write_text(json.dumps(rounds, indent=2))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--plain-worker":  # one application of side (b)
        worker = argparse.ArgumentParser(prog="bench_fleet.py --plain-worker")
        worker.add_argument("log", type=Path)
        worker.add_argument("out", type=Path)
        worker.add_argument("--trigger", default="1s")
        a = worker.parse_args(sys.argv[2:])
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        plain_worker(a.log, a.out, a.trigger)
    elif len(sys.argv) > 1 and sys.argv[1] == "--one-jvm-worker":  # a region of side (a'')
        worker = argparse.ArgumentParser(prog="bench_fleet.py --one-jvm-worker")
        worker.add_argument("region")
        worker.add_argument("out", type=Path)
        worker.add_argument("--logs", required=True)
        worker.add_argument("--trigger", default="1s")
        worker.add_argument("--stretch", default="30s")
        worker.add_argument("--rate", type=float, default=100.0)
        a = worker.parse_args(sys.argv[2:])
        stretch_s = parse_duration_us(a.stretch, field="--stretch") / 1e6
        fleet_one_jvm.worker(a.region, a.out, [Path(p) for p in a.logs.split(",")], a.trigger, stretch_s, a.rate)
    else:
        sys.exit(results_page.run(main, __file__))
