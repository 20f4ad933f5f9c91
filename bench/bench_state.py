"""Benchmark: a long window over many keys — state and memory bounded by open windows × keys.

    .venv/bin/python bench/bench_state.py [--devices 100000] [--events 1000000] [--hours 2]

A 1-hour hopping window with a 5-minute hop (12 windows open per key) over ``--devices``
devices, counting and summing each device's readings, run twice over the same devices and
the same ``--hours`` of event time: once with ``--events`` events and once with twice as
many (twice the readings per device and window). Each run is its own process: a fresh
driver JVM, so its peak memory is its own.

Per run it prints events/s, the largest committed state version on disk (bytes, and rows
of partial aggregates: one per open (window, device)), and the peak resident memory of the
driver's JVM (executors run in it, local mode) and of its Python process. Were the events
of open windows kept, doubling the events would double the state; with partial aggregates
the state is (open windows × devices) rows either way. Not a test: the numbers are the
machine's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import results_page  # noqa: E402
from bench_engine import SPEC as ENGINE_SPEC  # noqa: E402
from scratch import scratch  # noqa: E402

HOUR_S = 3600
# the engine benchmark's job, windowed for the long run: one job watermark, a 1-hour window every 5 minutes
SPEC = {**ENGINE_SPEC, "name": "bench-state", "over": None, "window": {"kind": "hopping", "size": "1h", "hop": "5m"}}


def say(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def one_run(work: Path, devices: int, events: int, hours: float, batch: int) -> dict:
    """Generate the log, stream the job over it to the end, measure: this process's figures."""
    import resource

    from tidegate.inputs.event_log import EventLog
    from tidegate.inputs.event_log.generator import GeneratorConfig, generate
    from tidegate.jobspec import parse_spec
    from tidegate.spark.pipeline.runner import run_stream
    from tidegate.spark.session import build_session

    event_log = work / "event-log"
    log = EventLog.create(event_log, partitions=4, clock="manual")
    generate(
        log,
        GeneratorConfig(
            devices=devices,
            partitions=4,
            events=events,
            seed=7,
            mode="backfill",
            rate_per_s=events / (hours * HOUR_S),
            bursts=0,
        ),
    )
    spark = build_session("tidegate-bench-state")
    jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
    started = time.monotonic()
    result = run_stream(
        spark, parse_spec(SPEC), event_log, work / "job", extra_options={"maxEventsPerBatch": str(batch)}
    )
    seconds = time.monotonic() - started
    state_bytes, state_rows = largest_state(result.paths.state)
    return {
        "events": result.input_events,
        "batches": result.batches,
        "seconds": round(seconds, 1),
        "events_per_s": round(result.input_events / seconds),
        "rows_emitted": result.rows_emitted,
        "state_bytes": state_bytes,
        "state_rows": state_rows,
        "jvm_peak_rss_mb": round(peak_rss_kb(jvm_pid) / 1024),
        "python_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def largest_state(state_dir: Path) -> tuple[int, int]:
    """Bytes and Parquet rows of the largest committed state version (the state a batch carries on)."""
    import pyarrow.parquet as pq

    best = (0, 0)
    for version in (p for p in state_dir.iterdir() if p.is_dir() and p.name.isdigit()):
        files = [f for f in version.rglob("*") if f.is_file()]
        size = sum(f.stat().st_size for f in files)
        rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files if f.suffix == ".parquet")
        best = max(best, (size, rows))
    return best


def peak_rss_kb(pid: int) -> int:
    """The process's high-water mark of resident memory (``VmHWM``), kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/{pid}/status has no VmHWM")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=100_000)
    ap.add_argument("--events", type=int, default=1_000_000, help="events of the first run; the second has twice")
    ap.add_argument("--hours", type=float, default=2.0, help="event time both runs span")
    ap.add_argument("--batch", type=int, default=100_000, help="max events per micro-batch")
    ap.add_argument("--work", type=Path)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a run of this many events, in this process
    args = results_page.parse_args(ap, argv)
    with scratch(args.work, "state") as work:
        if args.one:
            print(json.dumps(one_run(work, args.devices, args.one, args.hours, args.batch)))
            return 0
        runs = []
        for events in (args.events, 2 * args.events):
            say(f"{events:,} events over {args.devices:,} devices and {args.hours:g} h of event time")
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    str(events),
                    "--devices",
                    str(args.devices),
                    "--hours",
                    str(args.hours),
                    "--batch",
                    str(args.batch),
                    "--work",
                    str(work / f"run-{events}"),
                ],
                capture_output=True,
                text=True,
            )
            if done.returncode:
                raise SystemExit(f"the run of {events:,} events failed:\n{done.stderr[-3000:]}")
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        report(runs, args)
        return 0


def report(runs: list[dict], args) -> None:
    print(
        f"hopping 1 h window every 5 min (12 open per device), {args.devices:,} devices, {args.hours:g} h of "
        f"event time, batches of at most {args.batch:,}"
    )
    print(
        "| events | events/s | batches | window rows | state rows | state MB | JVM peak RSS MB | Python peak RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in runs:
        print(
            f"| {r['events']:,} | {r['events_per_s']:,} | {r['batches']} | {r['rows_emitted']:,} | "
            f"{r['state_rows']:,} | {r['state_bytes'] / 1e6:.1f} | {r['jvm_peak_rss_mb']} | {r['python_peak_rss_mb']} |"
        )
    a, b = runs
    print(
        f"twice the events: state rows × {b['state_rows'] / max(a['state_rows'], 1):.2f}, state bytes × "
        f"{b['state_bytes'] / max(a['state_bytes'], 1):.2f}, "
        f"JVM peak × {b['jvm_peak_rss_mb'] / a['jvm_peak_rss_mb']:.2f} "
        f"(bounded by open windows × devices: ≈ 1; events of open windows kept: ≈ 2)"
    )


if __name__ == "__main__":
    sys.exit(results_page.run(main, __file__))
