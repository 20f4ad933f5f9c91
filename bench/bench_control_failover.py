"""Benchmark: how long the control database is unwritable when its primary's region is lost,
and what the witness and synchronous replication cost.

    .venv/bin/python bench/bench_control_failover.py [--runs 3] [--writes 400] [--work DIR]

Starts the replicated control database on this machine (:class:`tidegate.control.ha.cluster.
LocalCluster`: east and west with PostgreSQL under Patroni, a witness with etcd only; the
quick Patroni timings, ``ttl`` 20 s, the shortest Patroni runs) and measures:

* **failover**: a writer records rows through the multi-host URL, 20 ms apart; the primary's
  whole region is killed (SIGKILL to its PostgreSQL, Patroni and etcd member); the time from
  the kill to the first write sent after every process was gone and acknowledged (by the other region, promoted
  by the quorum of the other region and the witness). The lost region is then started
  again and waited for as the new primary's synchronous standby; the next run kills that one.
* **witness**: its etcd member's resident memory and CPU over the whole benchmark.
* **synchronous replication**: single-row committed INSERTs on the primary, alternated one by
  one between a session that waits for the standby (``synchronous_commit = on``, what the
  platform runs) and one that does not (``local``, asynchronous replication); the median
  latency of each and their ratio.

Exit 1 when a failover took longer than the bar (``ttl`` + 10 s) or lost an acknowledged row.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

import psycopg
from sqlalchemy import select

import results_page
from scratch import scratch
from tidegate.control import schema as S
from tidegate.control.db import ControlDB
from tidegate.control.ha.cluster import LocalCluster

TICK_S = 0.02


def say(text: str) -> None:
    print(f"[control-failover] {text}", file=sys.stderr, flush=True)


def failover_once(cluster: LocalCluster, run: int) -> tuple[str, float, int, int]:
    """Kill the primary's region under a writer: (region lost, seconds to the first write
    acknowledged after it, rows acknowledged, of them missing on the new primary)."""
    lost = cluster.wait_for_primary()
    db = ControlDB(cluster.url())
    acked: list[tuple[int, float, float]] = []
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            sent = time.monotonic()
            try:
                db.record_operation("bench-write", "ok", detail=f"{run}:{n}")
                acked.append((n, sent, time.monotonic()))
            except Exception:  # in the promotion window: not acknowledged
                pass
            time.sleep(TICK_S)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    while len(acked) < 25:
        time.sleep(0.05)
    killed_at = time.monotonic()
    cluster.kill_site(lost)
    gone_at = time.monotonic()  # a write sent before this may have reached the region before it died
    while not any(sent >= gone_at for _n, sent, _r in acked) and time.monotonic() < killed_at + 120:
        time.sleep(0.05)
    time.sleep(0.5)
    stop.set()
    writer.join(120)
    after = [returned for _n, sent, returned in acked if sent >= gone_at]
    failover_s = min(after) - killed_at if after else float("inf")
    with db.engine.connect() as c:
        details = c.execute(select(S.operations.c.detail).where(S.operations.c.action == "bench-write"))
        present = {r.detail for r in details}
    missing = sum(1 for n, _s, _r in acked if f"{run}:{n}" not in present)
    db.dispose()
    say(f"run {run}: lost {lost}, first acknowledged write after {failover_s:.2f} s; bringing {lost} back")
    cluster.start_site(lost)
    cluster.wait_for_sync_standby(lost, 120)
    return lost, failover_s, len(acked), missing


def commit_latencies(cluster: LocalCluster, writes: int) -> dict[str, list[float]]:
    """Committed single-row INSERTs alternated between a synchronous and a local session."""
    url = cluster.site_url(cluster.wait_for_primary()).replace("postgresql+psycopg://", "postgresql://")
    times: dict[str, list[float]] = {"on": [], "local": []}
    sessions = {mode: psycopg.connect(url, autocommit=True) for mode in times}
    try:
        for mode, con in sessions.items():
            con.execute(f"SET synchronous_commit = {mode}")
            con.execute("CREATE TABLE IF NOT EXISTS bench_commit (mode text, n int, at double precision)")
        for n in range(writes):
            for mode, con in sessions.items():
                started = time.perf_counter()
                con.execute("INSERT INTO bench_commit VALUES (%s, %s, %s)", (mode, n, time.time()))
                times[mode].append(time.perf_counter() - started)
    finally:
        for con in sessions.values():
            con.close()
    return times


def process_cost(pid: int) -> tuple[float, float]:
    """(resident MB, CPU seconds so far) of a process, from /proc."""
    rss_kb = next(int(line.split()[1]) for line in open(f"/proc/{pid}/status") if line.startswith("VmRSS:"))
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime + stime
    return rss_kb / 1024, ticks / 100  # USER_HZ is 100 on Linux


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="failovers, alternating the region lost")
    ap.add_argument("--writes", type=int, default=400, help="INSERTs per replication mode")
    ap.add_argument("--work", type=Path, help="keep the cluster's folders here")
    args = results_page.parse_args(ap, argv)
    with scratch(args.work, "control-failover") as work:
        cluster = LocalCluster(work)
        try:
            started = time.monotonic()
            say("starting east, west and the witness")
            cluster.start()
            witness = cluster.etcd_pid("witness")
            _rss, cpu_at_start = process_cost(witness)
            say(f"{args.writes} INSERTs per replication mode")
            latencies = commit_latencies(cluster, args.writes)
            runs = [failover_once(cluster, run) for run in range(1, args.runs + 1)]
            rss_mb, cpu_at_end = process_cost(witness)
            wall_s = time.monotonic() - started
        finally:
            cluster.stop()
    bar_s = cluster.timings.ttl_s + 10
    print(
        f"cluster: east + west (PostgreSQL 15 under Patroni), witness (etcd only); Patroni ttl "
        f"{cluster.timings.ttl_s} s, loop_wait {cluster.timings.loop_wait_s} s, "
        f"retry_timeout {cluster.timings.retry_timeout_s} s; writer every {TICK_S * 1000:.0f} ms"
    )
    print(f"{'run':>3} {'region lost':>11} {'kill → first acked write s':>27} {'acked':>6} {'missing':>8}")
    for i, (lost, failover_s, acked, missing) in enumerate(runs, 1):
        print(f"{i:>3} {lost:>11} {failover_s:>27.2f} {acked:>6} {missing:>8}")
    times = [failover_s for _lost, failover_s, _a, _m in runs]
    print(f"failover: median {statistics.median(times):.2f} s, max {max(times):.2f} s, bar {bar_s} s")
    print(
        f"witness etcd: {rss_mb:.0f} MB resident, {cpu_at_end - cpu_at_start:.1f} CPU s over {wall_s:.0f} s "
        f"({100 * (cpu_at_end - cpu_at_start) / wall_s:.1f} % of one core)"
    )
    sync, local = (statistics.median(latencies[m]) * 1000 for m in ("on", "local"))
    p99 = {m: sorted(v)[int(len(v) * 0.99) - 1] * 1000 for m, v in latencies.items()}
    print(
        f"commit latency, {args.writes} each: synchronous {sync:.2f} ms (p99 {p99['on']:.2f}), "
        f"asynchronous {local:.2f} ms (p99 {p99['local']:.2f}); ratio sync/async={sync / local:.2f}"
    )
    lost_rows = sum(m for *_x, m in runs)
    return 0 if max(times) <= bar_s and lost_rows == 0 else 1


if __name__ == "__main__":
    sys.exit(results_page.run(main, __file__))
