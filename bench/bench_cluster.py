"""Benchmark: one Tidegate job on a local Spark standalone cluster with 1 worker vs 2 workers.

    .venv/bin/python bench/bench_cluster.py [--events 400000] [--batch 100000] [--partitions 4]
                                            [--repeat 1] [--conf spark.sql.shuffle.partitions=4]

The same events (generated once) and the same job (``jobs/device_fleet.yaml``, audit on)
run on a fresh cluster of 1 and of 2 workers, 1 core each, with a client-mode driver in a
process of its own (``tidegate.spark.tools.cluster.job``). Each driver waits for its executors,
runs the job once over a small warm-up log (JVM JIT, executors' Python workers and
imports), then over the benchmark log until caught up; events/s is that run's input over
its wall time. Prints events/s of both, the ratio 2 workers / 1 worker (bar >= 1.5, aim
>= 1.8), and where the CPU went: the driver's process tree and the executors', measured
from /proc, against the machine's cores and load average — on a 2-core machine the
driver competes with the executors for the same cores.

With ``--repeat N`` the sizes alternate (1,2 then 2,1, …) so drift in the machine's load
hits both alike; medians are reported. CPU seconds per event hardly depend on what else
runs on the machine, so the "CPU bound on ratio" line is the steadier number: the ratio
if the 2-worker run kept every core busy at its measured CPU cost per event, against the
1-worker run at the most cores it was seen to use (the driver and an executor's JVM
threads and Python worker together use more than one). ``--pin``
puts worker i on CPU i (``taskset``): Spark's "1 core" is a task slot, and an unpinned
1-core executor (JVM threads + its Python worker) uses more than one CPU when it can.
Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import results_page
from scratch import scratch
from tidegate.inputs.event_log import EventLog
from tidegate.inputs.event_log.generator import GeneratorConfig, generate
from tidegate.lineage.layout import METRICS_PREFIX, JobPaths
from tidegate.spark.tools.cluster.job import ClusterJobResult, run_cluster_job
from tidegate.spark.tools.cluster.standalone import StandaloneCluster

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "jobs" / "device_fleet.yaml"


def say(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def fill(event_log: Path, events: int, partitions: int, devices: int, seed: int) -> None:
    log = EventLog.create(event_log, partitions=partitions, clock="manual")
    config = GeneratorConfig(devices=devices, partitions=partitions, events=events, seed=seed, mode="backfill",
                             rate_per_s=200.0)  # fmt: skip
    summary = generate(log, config, progress=True)
    say(f"generated {summary}")


def phases(root: Path) -> dict[str, float]:
    """Seconds per engine phase, summed over the run's batches (from its metrics files)."""
    total: dict[str, float] = {}
    for f in JobPaths(root).metrics.glob(f"date=*/{METRICS_PREFIX}*.json"):
        for name, s in json.loads(f.read_text()).get("phase_seconds", {}).items():
            total[name] = total.get(name, 0.0) + s
    return total


def run_once(workers: int, args, event_log: Path, warmup: Path, work: Path, conf: dict[str, str]) -> ClusterJobResult:
    say(f"{workers} worker(s): starting the cluster")
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    with StandaloneCluster(workers=workers, cores_per_worker=1, memory=args.memory, work_dir=work / "cluster",
                           pin_cpus=args.pin) as cluster:  # fmt: skip
        say(f"{workers} worker(s): {cluster.master_url} up in {time.monotonic() - started:.1f} s; running the job")
        result = run_cluster_job(
            cluster.master_url, SPEC, event_log, work / "run", conf=cluster.driver_conf() | conf, executors=workers,
            extra_options={"maxEventsPerBatch": str(args.batch)}, warmup_event_log=warmup, timeout_s=args.timeout,
        )  # fmt: skip
    load_after = os.getloadavg()[0]
    cpu = ""
    if result.cpu_s is not None:
        c = result.cpu_s
        cpu = (f"; CPU driver {result.driver_cpu_s:.1f} s (python {c['driver_python']:.1f}, jvm {c['driver_jvm']:.1f}, "
               f"workers {c['driver_workers']:.1f}), executors {result.executor_cpu_s:.1f} s "
               f"(jvms {c['executor_jvms']:.1f}, python workers {c['executor_workers']:.1f}) "
               f"= {(result.driver_cpu_s + result.executor_cpu_s) / result.seconds:.2f} cores busy")  # fmt: skip
    say(
        f"{workers} worker(s): {result.input_events:,} events in {result.seconds:.1f} s "
        f"({result.input_events / result.seconds:,.0f} events/s, {result.batches} batches, "
        f"batch s {', '.join(f'{s:.1f}' for s in result.batch_seconds)}){cpu}; "
        f"load average {load_before:.1f} -> {load_after:.1f}"
    )
    if result.cpu_s is not None:
        say(f"{workers} worker(s): executor JVM threads (CPU s, live threads) "
            + ", ".join(f"{k.removeprefix('executor_jvm_')} {v:.1f}" for k, v in result.cpu_s.items()
                        if k.startswith("executor_jvm_")))  # fmt: skip
    say(f"{workers} worker(s): engine phases (s, all batches) "
        + ", ".join(f"{k} {v:.1f}" for k, v in sorted(phases(work / "run").items())))  # fmt: skip
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=400_000)
    ap.add_argument("--batch", type=int, default=100_000, help="maxEventsPerBatch")
    ap.add_argument("--partitions", type=int, default=4, help="log partitions (one source task each)")
    ap.add_argument("--devices", type=int, default=200)
    ap.add_argument("--warmup-events", type=int, default=100_000, help="untimed run first: JIT, Python workers")
    ap.add_argument("--memory", default="2g", help="per worker, and so per executor")
    ap.add_argument(
        "--pin",
        action="store_true",
        help="pin worker i (and its executor) to CPU i, so '1 core' is one CPU, not a task slot",
    )
    ap.add_argument("--repeat", type=int, default=1, help="runs per cluster size, alternating the order")
    ap.add_argument("--conf", action="append", default=[], help="driver Spark setting key=value (repeatable)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per driver run")
    ap.add_argument("--work", type=Path, help="scratch directory (default: a temporary one, removed after)")
    args = results_page.parse_args(ap, argv)
    conf = dict(item.split("=", 1) for item in args.conf)

    with scratch(args.work, "cluster") as work:
        event_log, warmup = work / "event-log", work / "warmup-event-log"
        say(f"machine: {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
        fill(event_log, args.events, args.partitions, args.devices, seed=5)
        fill(warmup, args.warmup_events, args.partitions, args.devices, seed=6)
        results: dict[int, list[ClusterJobResult]] = {1: [], 2: []}
        for i in range(args.repeat):
            for workers in (1, 2) if i % 2 == 0 else (2, 1):
                run_dir = work / f"w{workers}-{i}"
                results[workers].append(run_once(workers, args, event_log, warmup, run_dir, conf))
                shutil.rmtree(run_dir, ignore_errors=True)

        rate = {w: statistics.median(r.input_events / r.seconds for r in rs) for w, rs in results.items()}
        rows = {w: {r.rows_emitted for r in rs} for w, rs in results.items()}
        print()
        print(f"events                 {args.events:,} in {args.partitions} log partitions, micro-batches of at most "
              f"{args.batch:,}; job {SPEC.name}; {os.cpu_count()} cores on this machine")  # fmt: skip
        cores = len(os.sched_getaffinity(0))
        cost: dict[int, float] = {}  # CPU seconds per event, driver + executors
        busiest: dict[int, float] = {}  # the most cores a run of this size kept busy
        for w in (1, 2):
            runs = ", ".join(f"{r.input_events / r.seconds:,.0f}" for r in results[w])
            print(f"{w} worker{'s' if w > 1 else ' '} x 1 core     {rate[w]:>10,.0f} events/s  (runs: {runs})")
            measured = [r for r in results[w] if r.driver_cpu_s is not None]
            if measured:
                d = statistics.median(r.driver_cpu_s / r.input_events for r in measured)
                e = statistics.median(r.executor_cpu_s / r.input_events for r in measured)
                busiest[w] = max((r.driver_cpu_s + r.executor_cpu_s) / r.seconds for r in measured)
                cost[w] = d + e
                print(f"    CPU per 100k events: driver {d * 1e5:.1f} s, executors {e * 1e5:.1f} s; "
                      f"at most {busiest[w]:.2f} of {cores} cores busy")  # fmt: skip
        print(f"ratio 2/1 workers      {rate[2] / rate[1]:>10.2f}   (bar 1.5, aim 1.8)")
        if cost.keys() == {1, 2}:
            # CPU seconds per event do not depend on the machine's load: if the 2-worker run
            # kept every core busy and the 1-worker run kept as many busy as it ever did here,
            # this is the ratio; the machine has no more to give
            bound = (cores / busiest[1]) * (cost[1] / cost[2])
            print(f"CPU bound on ratio     {bound:>10.2f}   = ({cores} cores / {busiest[1]:.2f} busy with 1 worker) x "
                  f"(CPU per event 1 worker / 2 workers = {cost[1] / cost[2]:.2f})")  # fmt: skip
        if len(rows[1] | rows[2]) != 1:
            print(f"WARNING: window rows differ between runs: {sorted(rows[1] | rows[2])}")
        return 0


if __name__ == "__main__":
    sys.exit(results_page.run(main, __file__))
