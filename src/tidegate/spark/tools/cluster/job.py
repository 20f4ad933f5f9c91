"""Run one Tidegate streaming job as a client-mode driver of a standalone cluster, in a
process of its own.

::

    python -m tidegate.spark.tools.cluster.job --master spark://127.0.0.1:7077 \\
        --spec jobs/device_fleet.yaml --event-log DIR --root OUT [--executors 2] [--conf k=v ...]

Why a separate process: :func:`~tidegate.spark.session.build_session` reuses the active
session, and a Python process holds one SparkContext, so a test or benchmark that already
has a local session cannot also be a cluster driver. The driver process waits until the
expected executors have registered (so a run measures the cluster asked for, not the
first executor to arrive), runs the job until caught up, and prints one line
``TIDEGATE-CLUSTER-RESULT {json}`` with the application id, the executors seen and the
run's counts and timings. :func:`start_cluster_job` starts it (the caller may do other
work meanwhile, e.g. the same job in local mode), :func:`run_cluster_job` also waits, and
both parse that line.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tidegate.errors import TidegateError
from tidegate.spark.tools.cluster.processes import group_members, signal_group

RESULT_PREFIX = "TIDEGATE-CLUSTER-RESULT "


@dataclass(frozen=True)
class ClusterJobResult:
    app_id: str
    master: str
    executors: int  # registered before the job started (the driver not counted)
    executor_hosts: list
    input_events: int
    batches: int
    rows_emitted: int
    seconds: float  # run_stream's own time: from query start to caught up
    batch_seconds: list  # per non-empty micro-batch
    warmup_seconds: float | None
    # CPU seconds (user + system) during the timed run, read from /proc: the driver's
    # process tree (Python, its JVM, its planning workers) and the executors' trees
    driver_cpu_s: float | None
    executor_cpu_s: float | None
    cpu_s: dict | None  # the same, the driver split into python / jvm / workers
    quarantined: int
    output: str  # log of the driver process (stdout and stderr)


class ClusterJob:
    """A cluster driver process, started by :func:`start_cluster_job`.

    A context manager: leaving it kills the driver's process group if it is still
    running (a failed test must not leave a driver holding the cluster's cores).
    """

    def __init__(self, proc: subprocess.Popen, log: Path) -> None:
        self.proc = proc
        self.log = log

    def __enter__(self) -> ClusterJob:
        return self

    def __exit__(self, *exc_info) -> None:
        self.kill()

    def kill(self) -> None:
        """SIGKILL whatever is left of the driver's process group (by its PID), and reap it."""
        if self.proc.poll() is None or group_members(self.proc.pid):
            signal_group(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait(self, timeout_s: float = 600.0) -> ClusterJobResult:
        """The driver's result once it exits; raise with the end of its output if it fails
        or runs longer than ``timeout_s`` (then it is killed)."""
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise TidegateError(
                f"the cluster driver did not finish within {timeout_s:.0f} s; its output ({self.log}) ends:\n"
                f"{self.output()[-4000:]}",
                "check that the cluster has free cores (master web UI) and raise the timeout for large inputs",
            ) from None
        finally:
            self.kill()  # the driver is done: nothing of its group may outlive it
        output = self.output()
        lines = [line for line in output.splitlines() if line.startswith(RESULT_PREFIX)]
        if self.proc.returncode != 0 or not lines:
            raise TidegateError(
                f"the cluster driver exited with status {self.proc.returncode}; its output ({self.log}) ends:\n"
                f"{output[-4000:]}",
                "read the driver output above; executor logs are under the cluster's work_dir/worker-*/",
            )
        return ClusterJobResult(**json.loads(lines[-1][len(RESULT_PREFIX) :]), output=output)


def start_cluster_job(
    master_url: str,
    spec: Path,
    event_log: Path,
    root: Path,
    *,
    conf: dict[str, str] | None = None,
    executors: int = 1,
    extra_options: dict[str, str] | None = None,
    warmup_event_log: Path | None = None,
    python: str = sys.executable,
) -> ClusterJob:
    """Start the job in a fresh driver process on ``master_url`` and return at once.

    The driver gets its own process group and writes its output to ``<root>-driver.log``
    (a file, not a pipe, so a caller busy with other work never blocks it).
    """
    root = Path(root).resolve()
    argv = [python, "-m", "tidegate.spark.tools.cluster.job", "--master", master_url, "--spec", str(spec),
            "--event-log", str(Path(event_log).resolve()), "--root", str(root),
            "--executors", str(executors)]  # fmt: skip
    for key, value in (conf or {}).items():
        argv += ["--conf", f"{key}={value}"]
    for key, value in (extra_options or {}).items():
        argv += ["--option", f"{key}={value}"]
    if warmup_event_log is not None:
        argv += ["--warmup-event-log", str(Path(warmup_event_log).resolve())]
    # SPARK_LOCAL_IP: the driver binds where the cluster does, not to the host's outside address
    env = dict(os.environ, PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python, TZ="UTC", SPARK_LOCAL_IP="127.0.0.1")
    env.pop("PYSPARK_GATEWAY_PORT", None)  # a driver of its own, not a client of the caller's JVM
    env.pop("PYSPARK_GATEWAY_SECRET", None)
    log = root.with_name(root.name + "-driver.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    return ClusterJob(proc, log)


def run_cluster_job(master_url: str, spec: Path, event_log: Path, root: Path, *, timeout_s: float = 600.0,
                    **kwargs) -> ClusterJobResult:  # fmt: skip
    """:func:`start_cluster_job` and wait for its result (killed after ``timeout_s``)."""
    with start_cluster_job(master_url, spec, event_log, root, **kwargs) as job:
        return job.wait(timeout_s)


def _executor_hosts(spark) -> list[str]:
    """host:port of each registered executor, the driver excluded (from the status tracker)."""
    jsc = spark.sparkContext._jsc.sc()
    own = jsc.env().blockManager().blockManagerId()  # the tracker lists the driver's block manager too
    driver = f"{own.host()}:{own.port()}"
    infos = jsc.statusTracker().getExecutorInfos()
    hosts = [f"{i.host()}:{i.port()}" for i in infos]
    return [h for h in hosts if h != driver]


def _wait_for_executors(spark, wanted: int, timeout_s: float) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while True:
        hosts = _executor_hosts(spark)
        if len(hosts) >= wanted:
            return hosts
        if time.monotonic() > deadline:
            raise TidegateError(
                f"only {len(hosts)} of {wanted} executors registered with {spark.sparkContext.master} "
                f"within {timeout_s:.0f} s",
                "the workers need free cores and memory for spark.executor.cores/memory; see the master web UI",
            )
        time.sleep(0.2)


def _cpu_seconds(app_id: str) -> dict[str, float] | None:
    """CPU seconds so far (user + system) by process tree: ``driver_python`` (this
    process), ``driver_jvm``, ``driver_workers`` (the driver's Python workers: data source
    planning, offsets), ``executors`` (the executors of ``app_id`` on this machine with
    their Python workers), split into ``executor_jvms`` and ``executor_workers``. Children
    already reaped count through their parent's cutime/cstime — a Python worker that exits
    during the run moves from ``*_workers`` to its JVM (so a split may even go negative);
    the totals stay right. None without /proc."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    parent, ticks, java, executors = {}, {}, set(), []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # state ppid pgrp ... utime(11) stime cutime cstime
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        ticks[pid] = sum(int(v) for v in fields[11:15])
        if cmdline and cmdline[0].endswith(b"java"):
            java.add(pid)
        if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmdline and app_id.encode() in cmdline:
            executors.append(pid)
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)

    def tree(roots: list[int]) -> set[int]:
        seen, todo = set(), list(roots)
        while todo:
            pid = todo.pop()
            if pid not in seen:
                seen.add(pid)
                todo.extend(children.get(pid, []))
        return seen

    def seconds(pids: set[int]) -> float:
        return sum(ticks.get(pid, 0) for pid in pids) / os.sysconf("SC_CLK_TCK")

    me = os.getpid()
    driver, executor = tree([me]), tree(executors)
    threads = _jvm_thread_seconds(executor & java)
    return {
        "driver_python": seconds({me}),
        "driver_jvm": seconds(driver & java),
        "driver_workers": seconds(driver - java - {me}),
        "executors": seconds(executor),
        "executor_jvms": seconds(executor & java),
        "executor_workers": seconds(executor - java),
        **{f"executor_jvm_{kind}": v for kind, v in threads.items()},
    }


_THREAD_KINDS = (("jit", ("C1 CompilerThre", "C2 CompilerThre")), ("gc", ("GC Thread", "G1 ")),
                 ("tasks", ("Executor task l",)))  # fmt: skip


def _jvm_thread_seconds(pids: set[int]) -> dict[str, float]:
    """CPU seconds of the live threads of JVMs ``pids`` by what they do, from the thread
    names: JIT compilers, garbage collector, task threads, the rest (netty, block manager,
    heartbeats ...). Threads that have exited are not counted."""
    out = dict.fromkeys([kind for kind, _ in _THREAD_KINDS] + ["other"], 0.0)
    hz = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                name = (task / "comm").read_text().strip()
                stat = (task / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            used = (int(fields[11]) + int(fields[12])) / hz
            kind = next((k for k, prefixes in _THREAD_KINDS if name.startswith(prefixes)), "other")
            out[kind] += used
    return out


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise TidegateError(
                f"{what} {item!r} is not key=value", f"write e.g. {what} spark.sql.shuffle.partitions=4"
            )
        out[key] = value
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--master", required=True, help="spark://host:port of the standalone master")
    ap.add_argument("--spec", required=True, type=Path)
    ap.add_argument("--event-log", required=True, type=Path)
    ap.add_argument("--root", required=True, type=Path, help="the run's directory (checkpoint, output, ...)")
    ap.add_argument("--executors", type=int, default=1, help="wait for this many executors before starting")
    ap.add_argument("--conf", action="append", default=[], help="Spark setting key=value (repeatable)")
    ap.add_argument("--option", action="append", default=[], help="source option key=value (repeatable)")
    ap.add_argument("--warmup-event-log", type=Path, help="run the job over this event log first, untimed")
    ap.add_argument("--executor-wait", type=float, default=120.0, help="seconds to wait for executors")
    args = ap.parse_args(argv)

    from tidegate.jobspec import load_spec
    from tidegate.spark.pipeline.runner import run_stream
    from tidegate.spark.session import build_session

    conf = _pairs(args.conf, "--conf")
    options = _pairs(args.option, "--option")
    spark = build_session(f"tidegate-cluster-{args.spec.stem}", master=args.master, conf=conf)
    try:
        hosts = _wait_for_executors(spark, args.executors, args.executor_wait)
        spec = load_spec(args.spec)
        warmup_s = None
        if args.warmup_event_log is not None:
            started = time.monotonic()
            run_stream(spark, spec, args.warmup_event_log, args.root.with_name(args.root.name + "-warmup"),
                       extra_options=options)  # fmt: skip
            warmup_s = time.monotonic() - started
        app_id = spark.sparkContext.applicationId
        cpu_before = _cpu_seconds(app_id)
        result = run_stream(spark, spec, args.event_log, args.root, extra_options=options, progress=True)
        cpu_after = _cpu_seconds(app_id)
        # both None without /proc
        cpu = None if cpu_before is None or cpu_after is None else {k: cpu_after[k] - cpu_before[k] for k in cpu_after}
        record = {
            "app_id": app_id,
            "master": spark.sparkContext.master,
            "executors": len(hosts),
            "executor_hosts": hosts,
            "input_events": result.input_events,
            "batches": result.batches,
            "rows_emitted": result.rows_emitted,
            "seconds": result.seconds,
            "batch_seconds": [r.seconds for r in result.reports if r.input_events],
            "warmup_seconds": warmup_s,
            "cpu_s": cpu,
            "driver_cpu_s": None if cpu is None else cpu["driver_python"] + cpu["driver_jvm"] + cpu["driver_workers"],
            "executor_cpu_s": None if cpu is None else cpu["executors"],
            "quarantined": result.quarantined,
        }
        print(RESULT_PREFIX + json.dumps(record), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except TidegateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
