"""A local Spark standalone cluster (one master, N workers) for tests and benchmarks.

::

    with StandaloneCluster(workers=2, work_dir=tmp / "cluster") as cluster:
        spark = build_session("job", master=cluster.master_url, conf=cluster.driver_conf())

Why a helper of our own: pip's PySpark ships ``bin/spark-class`` but not
``sbin/start-master.sh``, and the daemons it would start outlive a failed test. Here the
master and the workers are children of this process, each in its own process group, so
stopping kills the group — the worker's executors and their Python workers with it — by
PID, never by name (another engineer's Spark on the same machine is left alone).

Standalone *cluster* deploy mode refuses Python applications, so drivers run in client
mode: a SparkSession in some Python process with ``master=cluster.master_url``. Because
:func:`~tidegate.spark.session.build_session` reuses an active session, run a cluster
driver in a fresh process (:mod:`tidegate.spark.tools.cluster.job`) or stop the active
session first.

Everything binds to 127.0.0.1; the master's RPC and web UI ports are picked free, its
REST submission server (fixed port 6066 by default) is off, and Spark's habit of quietly
moving to the next port when one is taken is off too, so ``master_url`` is the real one.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tidegate.errors import TidegateError
from tidegate.files import tail
from tidegate.jvm.options import java_options
from tidegate.spark.locked_conf import LOCKED_SQL_CONF
from tidegate.spark.tools.cluster.isolation import WorkerView, check_available, isolated_command
from tidegate.spark.tools.cluster.processes import Daemon, spawn, stop_groups

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_BIND_FAILURES = ("Address already in use", "BindException", "Failed to bind")
_PORT_ATTEMPTS = 3  # a free port can be taken between picking it and the JVM binding it
# for the daemons themselves: read from the file given with --properties-file
_DAEMON_PROPERTIES = {
    "spark.master.rest.enabled": "false",  # its fixed port 6066 would collide between clusters
    "spark.port.maxRetries": "0",  # fail on a taken port instead of silently binding the next
    "spark.worker.cleanup.enabled": "false",  # the work dir is the caller's to inspect
}


class ClusterError(TidegateError):
    """The local standalone cluster could not be started or stopped as asked."""


class StandaloneCluster:
    """A Spark standalone master and ``workers`` workers as child processes of this one.

    A context manager: entering starts them and waits until the master reports every
    worker ALIVE; leaving stops everything it started (SIGTERM to each process group,
    SIGKILL after ``stop_timeout_s``). Logs go to ``work_dir/logs/<name>.log``; each
    worker's executors write under ``work_dir/worker-<i>/<app id>/<executor id>/``.

    Workers (and so executors and their Python workers) run ``python`` — this
    interpreter by default, the venv with tidegate installed — with ``TZ=UTC`` and
    ``-Duser.timezone=UTC``, like every Tidegate session.

    ``cores_per_worker`` is what the worker offers Spark's scheduler (task slots), not a
    CPU limit: a 1-core executor's JVM threads and its Python worker together use more
    than one CPU when they can. ``pin_cpus`` makes the cores real: worker ``i`` and
    everything it starts run only on CPUs ``i*cores … (i+1)*cores-1`` (``taskset``);
    the master and the driver are not pinned.

    ``worker_view`` runs each worker in a mount namespace of its own
    (:mod:`~tidegate.spark.tools.cluster.isolation`): its hidden folders look empty to the
    worker, its executors and their Python workers, as another host's disk would — the
    cluster's ``work_dir`` must lie outside them.
    """

    def __init__(
        self,
        workers: int = 2,
        cores_per_worker: int = 1,
        memory: str = "1g",
        work_dir: Path | str | None = None,
        *,
        python: str = sys.executable,
        pin_cpus: bool = False,
        worker_view: WorkerView | None = None,
        start_timeout_s: float = 90.0,
        stop_timeout_s: float = 15.0,
    ) -> None:
        if workers < 1 or cores_per_worker < 1:
            raise ClusterError(
                f"a cluster of {workers} worker(s) with {cores_per_worker} core(s) each was asked for",
                "give at least one worker with at least one core",
            )
        if work_dir is None:
            raise ClusterError("no work_dir given", "pass a directory for logs and executor files, e.g. tmp_path")
        self.workers = workers
        self.cores_per_worker = cores_per_worker
        self.memory = memory
        self.work_dir = Path(work_dir).resolve()
        self.python = python
        self.pin_cpus = pin_cpus
        self.worker_view = worker_view or WorkerView()
        for hidden in self.worker_view.hidden:
            if self.work_dir.is_relative_to(hidden):
                raise ClusterError(
                    f"the cluster's work_dir {self.work_dir} lies in {hidden}, which workers cannot see",
                    "give the cluster a work_dir outside the folders hidden from its workers",
                )
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.master_port: int | None = None
        self.webui_port: int | None = None
        self._daemons: list[Daemon] = []

    # -- addresses ---------------------------------------------------------------------
    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:<port>``: the ``master`` of a client-mode driver."""
        if self.master_port is None:
            raise ClusterError("the cluster is not started", "use it inside `with StandaloneCluster(...) as cluster:`")
        return f"spark://{HOST}:{self.master_port}"

    @property
    def webui_url(self) -> str:
        if self.webui_port is None:
            raise ClusterError("the cluster is not started", "use it inside `with StandaloneCluster(...) as cluster:`")
        return f"http://{HOST}:{self.webui_port}"

    @property
    def pids(self) -> list[int]:
        """PIDs of the daemons started (each also leads its own process group)."""
        return [d.pid for d in self._daemons]

    @property
    def total_cores(self) -> int:
        return self.workers * self.cores_per_worker

    def driver_conf(self, *, quick_jvms: bool = False) -> dict[str, str]:
        """Settings for a client-mode driver on this cluster (pass as ``build_session(conf=...)``).

        The driver binds to 127.0.0.1 like the daemons; one executor per worker takes
        all its cores and memory; executors get the same Python and time zone as the
        workers (the driver's ``PYSPARK_PYTHON`` decides the Python workers' interpreter,
        so the driver process must have it set too — build_session does). ``quick_jvms``
        (tests over a few thousand events): the driver and executor JVMs start with
        :data:`~tidegate.jvm.options.QUICK_JVM`; leave it off when measuring throughput.
        """
        java = java_options(quick=quick_jvms)
        return {
            "spark.driver.host": HOST,
            "spark.driver.bindAddress": HOST,
            "spark.executor.cores": str(self.cores_per_worker),
            "spark.executor.memory": self.memory,
            "spark.cores.max": str(self.total_cores),
            "spark.executorEnv.PYSPARK_PYTHON": self.python,
            "spark.executorEnv.TZ": "UTC",
            "spark.executor.extraJavaOptions": java,
            "spark.driver.extraJavaOptions": java,
        } | LOCKED_SQL_CONF

    def state(self, timeout_s: float = 5.0) -> dict:
        """The master's own JSON (``/json/``): workers, aliveworkers, activeapps, completedapps, status."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=timeout_s) as response:
            return json.loads(response.read().decode())

    def app_ids(self) -> dict[str, str]:
        """Application name -> id, active and completed, from one answer of the master (between
        two answers a stopping application can move from active to completed and be in neither)."""
        state = self.state()
        return {app["name"]: app["id"] for app in state["completedapps"] + state["activeapps"]}

    def tasks_run(self, app_id: str, worker: int | None = None) -> int:
        """Tasks the executors of ``app_id`` started, on one worker or on all, from their own logs
        (executors log at INFO, Spark's default profile)."""
        workers = "*" if worker is None else str(worker)
        logs = self.work_dir.glob(f"worker-{workers}/{app_id}/*/stderr")
        return sum(log.read_text(errors="replace").count("Running task") for log in logs)

    # -- lifecycle ---------------------------------------------------------------------
    def __enter__(self) -> StandaloneCluster:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self, *, wait: bool = True) -> None:
        """Start the master, then the workers; return once all workers are ALIVE — or,
        with ``wait=False``, once the master is (``master_url`` is then valid and
        a driver may start while the workers register; :meth:`wait_for_workers` waits)."""
        if self._daemons:
            raise ClusterError("the cluster is already started", "stop it before starting it again")
        spark_class = _spark_class()
        java = _java()
        if self.worker_view:
            check_available()
        (self.work_dir / "logs").mkdir(parents=True, exist_ok=True)
        properties = self.work_dir / "daemon.properties"
        properties.write_text("".join(f"{k} {v}\n" for k, v in _DAEMON_PROPERTIES.items()))
        env = self._daemon_env(java)
        atexit.register(self.stop)  # a driver that dies between start and stop leaves no JVM behind
        try:
            self._start_master(spark_class, properties, env)
            for i in range(self.workers):
                worker_dir = self.work_dir / f"worker-{i}"
                worker_dir.mkdir(exist_ok=True)
                argv = self._pinned(i) + [spark_class, WORKER_CLASS, self.master_url, "--host", HOST, "--port", "0",
                        "--webui-port", "0", "--cores", str(self.cores_per_worker), "--memory", self.memory,
                        "--work-dir", str(worker_dir), "--properties-file", str(properties)]  # fmt: skip
                if self.worker_view:
                    argv = isolated_command(argv, self.worker_view, worker_dir / "view")
                self._spawn(f"worker-{i}", argv, env | {"SPARK_LOCAL_DIRS": str(worker_dir / "local")})
            if wait:
                self.wait_for_workers()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every daemon this object started: SIGTERM to each process group, then
        SIGKILL to whatever is left after ``stop_timeout_s``. Safe to call twice."""
        daemons, self._daemons = self._daemons, []
        atexit.unregister(self.stop)
        self.master_port = self.webui_port = None
        self._terminate(daemons)

    def _terminate(self, daemons: list[Daemon]) -> None:
        left = stop_groups(daemons, self.stop_timeout_s)
        if left:
            raise ClusterError(
                f"processes of {', '.join(left)} survived SIGKILL",
                "look for them with `ps -eo pid,pgid,cmd | grep deploy` and report it",
            )

    # -- starting ----------------------------------------------------------------------
    def _daemon_env(self, java: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "PYSPARK_PYTHON": self.python,  # executors inherit the worker's environment
                "TZ": "UTC",
                "SPARK_LOCAL_IP": HOST,
                # the master and workers only keep books: a quick JVM suits them in any run
                "SPARK_DAEMON_JAVA_OPTS": f"{env.get('SPARK_DAEMON_JAVA_OPTS', '')} {java_options(quick=True)}".strip(),
                "SPARK_LOCAL_DIRS": str(self.work_dir / "local"),
            }
        )
        if "JAVA_HOME" not in env:
            env["JAVA_HOME"] = str(Path(java).resolve().parents[1])
        # a parent running under spark-submit must not hand its gateway to the daemons
        for key in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "SPARK_MASTER", "MASTER"):
            env.pop(key, None)
        return env

    def _start_master(self, spark_class: str, properties: Path, env: dict[str, str]) -> None:
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            self.master_port, self.webui_port = _free_ports(2)
            master = self._spawn(
                "master",
                [spark_class, MASTER_CLASS, "--host", HOST, "--port", str(self.master_port),
                 "--webui-port", str(self.webui_port), "--properties-file", str(properties)],
                env,
            )  # fmt: skip
            deadline = time.monotonic() + self.start_timeout_s
            while time.monotonic() < deadline:
                if master.proc.poll() is not None:
                    break
                if self._master_status() == "ALIVE":
                    return
                time.sleep(0.2)
            exited = master.proc.poll() is not None
            self._daemons.remove(master)
            self._terminate([master])
            log_tail = tail(master.log)
            if attempt < _PORT_ATTEMPTS and any(s in log_tail for s in _BIND_FAILURES):
                continue  # someone took a port between picking and binding: pick again
            if any(s in log_tail for s in _BIND_FAILURES):
                raise ClusterError(
                    f"the Spark master could not bind its ports ({attempt} tries); log {master.log}:\n{log_tail}",
                    "another process keeps taking the ports picked; free some ports or retry",
                )
            what = "exited" if exited else f"not ALIVE after {self.start_timeout_s:.0f} s"
            raise ClusterError(
                f"the Spark master {what}; log {master.log}:\n{log_tail}",
                "read the log above (Java 17 installed? enough memory?); raise start_timeout_s on a busy machine",
            )

    def _pinned(self, i: int) -> list[str]:
        """``taskset`` prefix putting worker ``i`` — and so its executors and their Python
        workers, which inherit the mask — on CPUs of its own, when ``pin_cpus``."""
        if not self.pin_cpus:
            return []
        cpus = sorted(os.sched_getaffinity(0))
        need = self.workers * self.cores_per_worker
        taskset = shutil.which("taskset")
        if len(cpus) < need or taskset is None:
            raise ClusterError(
                f"pin_cpus needs {need} CPUs and taskset; this process may use {len(cpus)}"
                + ("" if taskset else ", and there is no taskset on PATH"),
                "run without pin_cpus, with fewer workers or cores, or install util-linux",
            )
        mine = cpus[i * self.cores_per_worker : (i + 1) * self.cores_per_worker]
        return [taskset, "-c", ",".join(str(c) for c in mine)]

    def _master_status(self) -> str | None:
        try:
            return self.state(timeout_s=2.0).get("status")
        except (OSError, urllib.error.URLError, ValueError):
            return None  # not listening yet

    def wait_for_workers(self) -> None:
        """Return once the master reports every worker ALIVE; raise with the workers' log
        tails if one exits or ``start_timeout_s`` passes."""
        deadline = time.monotonic() + self.start_timeout_s
        alive = 0
        while time.monotonic() < deadline:
            for d in self._daemons:
                if d.proc.poll() is not None:
                    raise ClusterError(
                        f"Spark {d.name} exited with status {d.proc.returncode}; log {d.log}:\n{tail(d.log)}",
                        "read the log above; a worker needs its --memory free and the master reachable",
                    )
            try:
                workers = self.state(timeout_s=2.0).get("workers", [])
            except (OSError, urllib.error.URLError, ValueError):
                workers = []
            alive = sum(1 for w in workers if w.get("state") == "ALIVE")
            if alive >= self.workers:
                return
            time.sleep(0.2)
        logs = "\n".join(f"--- {d.log}:\n{tail(d.log)}" for d in self._daemons if d.name != "master")
        raise ClusterError(
            f"only {alive} of {self.workers} Spark workers registered with {self.master_url} "
            f"within {self.start_timeout_s:.0f} s\n{logs}",
            "read the worker logs above; on a busy machine raise start_timeout_s",
        )

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> Daemon:
        daemon = spawn(name, argv, env, self.work_dir / "logs" / f"{name}.log", self.work_dir)
        self._daemons.append(daemon)
        return daemon


# -- helpers ---------------------------------------------------------------------------
def _spark_class() -> str:
    from pyspark.find_spark_home import _find_spark_home

    path = Path(_find_spark_home()) / "bin" / "spark-class"
    if not path.exists():
        raise ClusterError(
            f"no spark-class at {path}",
            "install pyspark into this interpreter's environment (or set SPARK_HOME to a Spark distribution)",
        )
    return str(path)


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        where = f"JAVA_HOME={home} has no bin/java" if home else "no `java` on PATH and JAVA_HOME is not set"
        raise ClusterError(
            f"Java not found: {where}",
            "install Java 17 (e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME",
        )
    return java


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):  # held open together, so the n ports differ
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
