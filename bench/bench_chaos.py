"""Benchmark: does a job lose or double anything when its driver is killed and frozen mid-stream?

    .venv/bin/python bench/bench_chaos.py [--events 20000] [--kills 6] [--seed 7] [--short]

On a generated device fleet in a fresh platform (real detached drivers, real control
database, real Spark), the job runs from a first output time T while this benchmark:

* **kills** its driver with ``kill -9`` K times, each at a random moment after one or two
  more batches have committed (inside a batch or between two), and restarts it
  ``last-stopped`` — from its checkpoint — as the region's supervisor would;
* **freezes** it once (SIGSTOP of the driver and its JVM) while a batch is staged but not
  yet committed, as a stalled machine elsewhere: this host cannot kill it, so it is
  declared lost when its lease expires, a successor takes over, and the frozen one is then
  woken up beside it. Fencing must refuse every commit it tries.

Then the job catches up and stops, and its output (windows ending after T) is compared
with the batch path over the same log, key by key (window and device). Prints kills,
rows, missing, extra, duplicated and differing, and exits 1 unless the last four are 0.
``--short`` is the form CI runs (tests/bench/test_bench_chaos.py).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
from pathlib import Path

import yaml

import results_page
from scratch import scratch
from tidegate.examples import DEMO_JOB, DEMO_SPEC
from tidegate.inputs.event_log import EventLog
from tidegate.inputs.event_log.generator import GeneratorConfig, generate
from tidegate.lineage.layout import JobPaths
from tidegate.runtime.jobs.config import load_config
from tidegate.runtime.jobs.controller import Controller
from tidegate.runtime.jobs.process import driver
from tidegate.runtime.procedures.faults import freeze_mid_write, kill_group, thaw

REPO = Path(__file__).resolve().parents[1]
JOB = DEMO_JOB
LEASE_TTL_S = 4  # how long a frozen driver holds its lease: short, so the benchmark is


def say(text: str) -> None:
    print(f"[chaos] {text}", file=sys.stderr, flush=True)


def wait_for_batch(c: Controller, run_id: int, at_least: int, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = c.db.run(run_id)
        if run.last_batch_id is not None and run.last_batch_id >= at_least:
            return
        if run.status in ("failed", "lost", "stopped"):
            raise SystemExit(f"run {run_id} {run.status}: {run.status_detail}")
        time.sleep(0.05)
    raise SystemExit(f"run {run_id} did not reach batch {at_least} in {timeout_s} s")


def wait_lost(c: Controller, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while c.status_of(JOB, "east").state != "lost":
        if time.monotonic() > deadline:
            raise SystemExit(f"the frozen driver was not declared lost in {timeout_s} s")
        time.sleep(0.5)


def restart(c: Controller) -> int:
    result = c.start(JOB, "east", mode="last-stopped")
    assert result.plan.checkpoint == "reused", result.plan.reason
    return result.run_id


def torment(c: Controller, run_id: int, kills: int, rng: random.Random) -> int:
    """K kills and one freeze; the run that goes on."""
    freeze_after = rng.randint(0, kills)  # the freeze comes between two kills (or first, or last)
    for k in range(kills + 1):
        if k == freeze_after:
            run_id = freeze_and_succeed(c, run_id)
        if k == kills:
            break
        run = c.db.run(run_id)
        target = (run.last_batch_id if run.last_batch_id is not None else -1) + rng.randint(1, 2)
        wait_for_batch(c, run_id, target)
        time.sleep(rng.uniform(0.0, 1.5))  # anywhere: inside the next batch, or between two
        kill_group(driver(c.db.run(run_id)))
        say(f"kill -9 #{k + 1}: run {run_id} after batch {c.db.run(run_id).last_batch_id}")
        run_id = restart(c)
    return run_id


def freeze_and_succeed(c: Controller, run_id: int) -> int:
    run = c.db.run(run_id)
    wait_for_batch(c, run_id, (run.last_batch_id if run.last_batch_id is not None else -1) + 1)
    process = driver(run)
    freeze_mid_write(
        process, JobPaths.at(c.db.lineage(run.lineage).root, region=run.region), db_lock_free=c.db.write_lock_free
    )
    c.db.update_run(run_id, host="frozen-vm")  # elsewhere: only fencing can stop it now
    say(f"froze run {run_id} (pid {run.pid}) mid-write after batch {c.db.run(run_id).last_batch_id}")
    wait_lost(c)
    successor = restart(c)
    wait_for_batch(c, successor, (c.db.run(run_id).last_batch_id or 0) + 1)
    thaw(process)
    deadline = time.monotonic() + 120
    while process.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    stale = c.db.run(run_id)
    say(
        f"woke run {run_id}: {'exited' if not process.alive() else 'STILL RUNNING'} — {stale.status}: "
        f"{stale.status_detail}"
    )
    kill_group(process)  # nothing when it exited
    return successor


def score(spark, c: Controller, event_log: Path, t_us: int, work: Path) -> dict:
    from pyspark.sql import functions as F

    from tidegate.runtime.outputs.reader import read_region
    from tidegate.spark.output import read_output
    from tidegate.spark.pipeline.runner import run_batch
    from tidegate.spark.tools.compare import keyed_difference

    _, spec = c.spec(JOB)
    keys = ["window_start", "window_end"] + [name for name, _ in spec.group_by]
    reference = (
        read_output(spark, run_batch(spark, spec, event_log, work / "batch").paths.output)
        .drop("batch_id")
        .where(F.unix_micros("window_end") > F.lit(t_us))
    )
    return keyed_difference(reference, read_region(spark, c.db, JOB, "east"), keys)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--kills", type=int, default=6)
    ap.add_argument("--batch", type=int, default=0, help="max events per micro-batch (default: events / 30)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--short", action="store_true", help="the CI form: 3,000 events in batches of 250, 2 kills, 1 freeze"
    )
    ap.add_argument("--work", type=Path)
    args = results_page.parse_args(ap, argv)
    if args.short:  # a dozen batches: enough for two kills and a freeze between them
        args.events, args.kills, args.batch = 3_000, 2, args.batch or 250
    batch = args.batch or max(100, args.events // 30)
    rng = random.Random(args.seed)
    with scratch(args.work, "chaos") as work:
        event_log = work / "event-log"
        log = EventLog.create(event_log, partitions=3, clock="manual")
        generate(
            log,
            GeneratorConfig(
                devices=8,
                partitions=3,
                events=args.events,
                seed=args.seed,
                mode="backfill",
                rate_per_s=2.0,
                idle_partitions=1,
                late_fraction=0.03,
                early_fraction=0.01,
                malformed_fraction=0.01,
            ),
        )
        spec = yaml.safe_load((REPO / "jobs" / DEMO_SPEC).read_text())
        spec["source"] = {"event_log": str(event_log), "max_events_per_batch": batch}
        spec_path = work / "fleet.yaml"
        spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
        os.environ.update(
            {
                "TIDEGATE_HOME": str(work),
                "TIDEGATE_EVENT_LOG": str(event_log),
                "TIDEGATE_CONTROL_DB": f"sqlite:///{work}/c.db",
                "TIDEGATE_REGIONS": "east,west",
                "TIDEGATE_LEASE_TTL_S": str(LEASE_TTL_S),
            }
        )
        c = Controller(load_config(), actor="chaos")
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the drivers below are stopped too
        try:
            return run(c, args, batch, rng, log, event_log, work)
        finally:
            for started in c.db.runs(kind=None):  # no driver outlives the benchmark and its scratch folder
                if (process := driver(started)) is not None:
                    kill_group(process)  # nothing when it is gone


def run(c: Controller, args, batch: int, rng: random.Random, log: EventLog, event_log: Path, work: Path) -> int:
    """Deploy, torment, catch up, score; 0 when nothing was lost, doubled or changed."""
    c.deploy(work / "fleet.yaml")
    first = min(i.first_arrival_us for i in log.describe() if i.first_arrival_us)
    t_us = first + c.spec(JOB)[1].lookback_us
    say(f"{args.events:,} events, batches of {batch}; {args.kills} kills and 1 freeze (seed {args.seed})")
    started = time.monotonic()
    torment(c, c.start(JOB, "east", mode="custom", at=t_us).run_id, args.kills, rng)
    c.wait_for(JOB, "east", lambda s: s.state == "running" and s.caught_up, 900, "caught up")
    c.stop(JOB, "east")
    seconds = time.monotonic() - started

    from tidegate.spark.session import build_session

    spark = build_session("tidegate-bench-chaos", master="local[2]")
    result = score(spark, c, event_log, t_us, work)
    spark.stop()
    runs = len(c.db.runs(JOB, "east"))
    print(
        f"chaos: kills={args.kills} freezes=1 runs={runs} rows={result['rows']} missing={result['missing']} "
        f"extra={result['extra']} duplicated={result['duplicated']} differing={result['differing']} "
        f"seconds={seconds:.0f}"
    )
    bad = result["missing"] + result["extra"] + result["duplicated"] + result["differing"]
    return 1 if bad or not result["rows"] else 0


if __name__ == "__main__":
    sys.exit(results_page.run(main, __file__))
