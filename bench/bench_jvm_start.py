"""Benchmark: what Spark's class archive saves a driver's start, side by side with a start without it.

    .venv/bin/python bench/bench_jvm_start.py [--pairs 3] [--work DIR] [--s3]

A start is what a restart pays before its first output: a new Python process builds its
session (:func:`tidegate.spark.session.build_session`: a new Spark JVM) and runs the main
job's streaming query (``jobs/device_fleet.yaml``) over a small event log until it has
caught up. After one start of each (not counted: they read the files from disk), starts
alternate — without the archive (``TIDEGATE_CLASS_ARCHIVE=off``), then with it — so both
see the same machine. Prints each start and the medians, and the bar:
with ÷ without ≤ 0.8. Exit 1 when the archive is not built (setup builds it:
``python -m tidegate.spark.class_archive``) or the bar is missed. Not in CI: one pair beside
a busy test suite measures the suite; ``tests/spark/test_class_archive_build.py`` proves a JVM maps it.

``--s3``: each start is a driver's on an S3 root — its session reaches a local SeaweedFS
store (hadoop-aws, the AWS SDK and the checkpoint file manager on its class path) and writes
and reads one small file there before its query, as a driver opens its root first.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import results_page
from scratch import scratch
from tidegate.inputs.event_log import EventLog
from tidegate.inputs.event_log.generator import GeneratorConfig, generate
from tidegate.jvm import class_archive

REPO = Path(__file__).resolve().parents[1]
BAR = 0.8
# one start: session, then the streaming query until caught up; prints its seconds
START = """
import pickle, sys, time
from pathlib import Path
t0 = time.monotonic()
from tidegate.jobspec import load_spec
from tidegate.spark.pipeline.runner import run_stream
from tidegate.spark.session import build_session
store = pickle.loads(sys.stdin.buffer.read() or pickle.dumps(None))  # (bucket, S3Settings) or None
conf = {}
if store:
    from tidegate.storage.spark import session_conf
    conf = session_conf({store[0]: store[1]})
spark = build_session("tidegate-bench-start", conf=conf)
session = time.monotonic() - t0
if store:
    uri = f"s3a://{store[0]}/start-{time.time_ns()}"
    spark.range(100).write.parquet(uri)
    assert spark.read.parquet(uri).count() == 100
result = run_stream(spark, load_spec(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
print(f"{session:.2f} {time.monotonic() - t0:.2f} {result.input_events}")
"""


def say(text: str) -> None:
    print(f"[jvm-start] {text}", file=sys.stderr, flush=True)


def start(event_log: Path, out: Path, archive: bool, store: tuple | None = None) -> tuple[float, float]:
    """(seconds to the session, seconds to caught up) of one start in a new process; ``store``
    (bucket, settings): a driver's on an S3 root (the settings go through stdin, keys and all)."""
    env = os.environ | {class_archive.ARCHIVE_ENV: "auto" if archive else "off"}
    done = subprocess.run(
        [sys.executable, "-c", START, str(REPO / "jobs" / "device_fleet.yaml"), str(event_log), str(out)],
        env=env,
        input=pickle.dumps(store) if store else b"",
        capture_output=True,
        timeout=600,
    )
    done = subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())
    if done.returncode != 0:
        raise SystemExit(f"a start failed:\n{done.stderr[-3000:]}")
    session, total, events = done.stdout.split()[-3:]
    if int(events) == 0:
        raise SystemExit("a start read no events: it proves nothing about a start with work to do")
    return float(session), float(total)


@contextmanager
def s3_store(work: Path, wanted: bool):
    """(bucket, settings) of a SeaweedFS store started in ``work`` for the run, or None."""
    if not wanted:
        yield None
        return
    from tidegate.storage.seaweedfs import LocalS3Server

    server = LocalS3Server(work / "s3", name="bench").start()
    try:
        yield server.create_bucket("tidegate-bench"), server.settings()
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3, help="starts without and with the archive, alternating")
    ap.add_argument("--work", type=Path)
    ap.add_argument("--s3", action="store_true", help="starts of a driver on an S3 root (a local SeaweedFS store)")
    args = results_page.parse_args(ap, argv)
    path = class_archive.archive_path()
    if os.environ.get(class_archive.ARCHIVE_ENV, "auto") == "off" or not class_archive.options():
        say(
            f"no class archive to measure ({path} is not built, or {class_archive.ARCHIVE_ENV}=off): "
            "run python -m tidegate.spark.class_archive"
        )
        return 1
    with scratch(args.work, "jvm-start") as work, s3_store(work, args.s3) as store:
        event_log = work / "event-log"
        log = EventLog.create(event_log, partitions=3, clock="manual")
        generate(log, GeneratorConfig(devices=8, partitions=3, events=3_000, seed=7, mode="backfill", rate_per_s=5.0))
        for archive in (False, True):  # not counted: the first starts read the jars and the archive from disk
            start(event_log, work / f"warm-up-{int(archive)}", archive, store)
        runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for pair in range(args.pairs):
            for archive in (False, True):
                runs[archive].append(start(event_log, work / f"out-{pair}-{int(archive)}", archive, store))
                say(
                    f"pair {pair + 1}, {'with' if archive else 'without'} the archive: "
                    f"session {runs[archive][-1][0]:.2f} s, caught up {runs[archive][-1][1]:.2f} s"
                )
    medians = {
        archive: (statistics.median(s for s, _ in r), statistics.median(t for _, t in r)) for archive, r in runs.items()
    }
    ratio = medians[True][1] / medians[False][1]
    print("| start | session | caught up |")
    print("|---|---|---|")
    for archive, label in ((False, "without the archive"), (True, "with the archive")):
        print(f"| {label} | {medians[archive][0]:.2f} s | {medians[archive][1]:.2f} s |")
    print(
        f"\nwith ÷ without, to caught up: {ratio:.2f} (bar ≤ {BAR}); session alone: "
        f"{medians[True][0] / medians[False][0]:.2f}; {args.pairs} pair(s), {time.strftime('%Y-%m-%d')}"
        + ("; a driver's on an S3 root (SeaweedFS on loopback)" if args.s3 else "")
    )
    return 0 if ratio <= BAR else 1


if __name__ == "__main__":
    sys.exit(results_page.run(main, __file__))
