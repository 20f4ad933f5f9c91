"""``bench_fleet``'s side "Tidegate one JVM": each region's N jobs' queries in one Spark session.

It measures what the engine costs when several jobs share a driver JVM. One process per region
runs every job's streaming query (:class:`~tidegate.spark.pipeline.runner.StreamingRun`) in one
session with the master and JVM a region's driver gets (``local[2]``, quick on a small machine).
Each query is held by a release gate of ``--stretch`` from when it has caught up, as a held
driver is (decision 0016), at the drivers' trigger.

What a driver process adds is not here: its lease, its fence and its control-database records.
This side measures the design, it does not run jobs (decision 0017). The worker writes a report
every 2 s; ``bench_fleet`` measures its process group and reads the latencies from the jobs'
output as it does for drivers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

REGIONS = ("east", "west")
REPORT_EVERY_S = 2.0


def worker(region: str, out: Path, logs: list[Path], trigger: str, stretch_s: float, rate: float) -> None:
    """Every job's query in this process's one session; ``out/report.json`` every 2 s: per job,
    each batch's (wall time, batch id, seconds, job watermark µs, rows emitted, backlog). A job
    is caught up, and its gate engaged, as a driver judges it, at the configured ``rate``."""
    from tidegate.eventtime.durations import parse_duration_us
    from tidegate.inputs.log import open_log
    from tidegate.jobspec import parse_spec
    from tidegate.jvm.options import quick_driver
    from tidegate.runtime.estimates.caught_up import caught_up
    from tidegate.spark.pipeline.release_gate import ReleaseGate
    from tidegate.spark.pipeline.runner import StreamingRun
    from tidegate.spark.session import build_session

    master = "local[2]"
    spark = build_session(f"tidegate-one-jvm-{region}", master=master, quick_jvm=quick_driver(master))
    interval = f"{parse_duration_us(trigger) // 1000} milliseconds"  # as the drivers' trigger_interval()
    base = yaml.safe_load((Path(__file__).resolve().parents[1] / "jobs" / "device_fleet.yaml").read_text())
    batches: dict[str, list[list]] = {}
    left: dict[str, int | None] = {}  # what each job's last batch left unread
    lock = threading.Lock()
    runs = []
    roots = {f"fleet{i}": str(out / f"fleet{i}") for i in range(len(logs))}
    for i, log in enumerate(logs):
        name = f"fleet{i}"
        spec = parse_spec(base | {"name": name, "source": {"event_log": str(log)}})
        gate = ReleaseGate(stretch_s)
        opened = open_log(log)
        batches[name], left[name] = [], None

        def on_batch(report, end, name=name, gate=gate, opened=opened) -> None:
            backlog = sum(max(0, opened.end_offset(p) - end.offsets.get(p, 0)) for p in range(opened.partitions))
            with lock:
                batches[name].append([time.time(), report.batch_id, report.seconds, report.job_watermark_us,
                                      report.rows_emitted, backlog])  # fmt: skip
            if caught_up(backlog, left[name], rate) is not None:  # as a driver judges it: held from now on
                gate.engage()
            left[name] = backlog

        root = Path(roots[name])
        runs.append(StreamingRun(spark, spec, log, root, on_batch=on_batch, trigger_interval=interval, gate=gate))
    for run in runs:
        run.start()
    while all(run.query is not None and run.query.isActive for run in runs):
        with lock:
            text = json.dumps({"batches": batches, "roots": roots})
        (out / "report.tmp").write_text(text)
        os.replace(out / "report.tmp", out / "report.json")
        time.sleep(REPORT_EVERY_S)
    failed = [str(run.failure()) for run in runs if run.failure() is not None]
    raise SystemExit(f"a query stopped: {failed[0][:2000] if failed else 'no error reported'}")


def start(work: Path, logs: list[Path], args) -> dict[str, tuple[subprocess.Popen, Path]]:
    """One worker process (a session of its own) per region; its process and report file."""
    workers = {}
    for region in REGIONS:
        out = work / "one-jvm" / region
        out.mkdir(parents=True)
        command = [sys.executable, str(Path(__file__).resolve().parent / "bench_fleet.py"), "--one-jvm-worker", region,
                   str(out), "--logs", ",".join(map(str, logs)), "--trigger", args.trigger, "--stretch", args.stretch,
                   "--rate", str(args.rate)]  # fmt: skip
        with (out / "worker.log").open("wb") as log_file:
            proc = subprocess.Popen(command, stdout=log_file, stderr=log_file, start_new_session=True)
        workers[region] = (proc, out / "report.json")
    return workers


def read_report(report: Path) -> dict | None:
    try:
        return json.loads(report.read_text())
    except (OSError, ValueError):
        return None
