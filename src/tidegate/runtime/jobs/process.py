"""Processes that outlive their caller: detached drivers and supervisors, found again by what was recorded of them.

A driver is started in its own session (``setsid``), with its output in a log file, so it
survives the CLI command or Airflow task that started it. A PID alone is not an identity
(the kernel reuses them): each launch records the process with its start time
(:class:`tidegate.processes.Recorded`, which alone answers whether it still runs and signals
it), and :func:`driver` and :func:`lease_holder` read that record back from a run or lease row.

The controller launches drivers and, for jobs it must keep running, the region's
supervisor (:func:`ensure_supervisor`); the supervisor runs the controller's starts. Both
launch through here, so neither imports the other.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidegate.processes import Recorded, recorded, track_child

if TYPE_CHECKING:
    from tidegate.control.db import ControlDB
    from tidegate.runtime.jobs.config import PlatformConfig

HOST = socket.gethostname()


def run_marker(run_id: int) -> str:
    """What the command line of run ``run_id``'s driver holds (the check of a row without a start time)."""
    return f"--run-id {run_id} "


def driver(run: Any) -> Recorded | None:
    """The driver process a run row records (``id``, ``pid``, ``pid_started_at``), wherever it
    runs: ask :meth:`Recorded.alive` only where ``run.host`` is this host. None before a launch."""
    return recorded(run.pid, getattr(run, "pid_started_at", None), run_marker(run.id))


def driver_here(run: Any) -> Recorded | None:
    """The driver of ``run`` when it runs on this host and is still the recorded process: the
    process to wait on or to kill; None otherwise."""
    found = driver(run) if run.host == HOST else None
    return found if found is not None and found.alive() else None


def driver_alive(run: Any) -> bool:
    """True when the driver recorded on ``run`` runs on this host."""
    return driver_here(run) is not None


def lease_holder(lease: Any) -> Recorded | None:
    """The process a lease row records as its holder (``name``, ``holder``, ``pid``,
    ``pid_started_at``): a supervisor, or a run's driver; ask it only on ``lease.host``."""
    marker = SUPERVISOR_MARKER if lease.name.startswith("supervisor:") else None
    if lease.holder.startswith("run-") and lease.holder[4:].isdigit():
        marker = run_marker(int(lease.holder[4:]))
    return recorded(lease.pid, getattr(lease, "pid_started_at", None), marker)


def job_lease(job: str, region: str) -> str:
    return f"job:{job}:{region}"


def rehearsal_lease(job: str, region: str) -> str:
    return f"rehearsal:{job}:{region}"


def supervisor_lease(region: str) -> str:
    return f"supervisor:{region}"


SUPERVISOR_MARKER = "supervise"  # what a supervisor's command line holds


def spawn_detached(
    args: Sequence[str],
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    marker: str | None = None,
) -> Recorded:
    """Start ``args`` in a new session with stdout and stderr appended to ``log_path``; the
    process started (``marker``: what its command line holds, see :class:`Recorded`)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    environment = dict(os.environ if env is None else env)
    # Spark's Python workers must run the interpreter that has Tidegate installed
    environment.setdefault("PYSPARK_PYTHON", sys.executable)
    environment.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            list(args),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=environment,
            cwd=str(cwd) if cwd else None,
            close_fds=True,
        )
    started = Recorded.of(proc.pid, marker)  # before any reap: an exited child is a zombie till then
    track_child(proc)
    return started


def ensure_supervisor(db: ControlDB, config: PlatformConfig, region: str) -> Recorded | None:
    """Start a detached supervisor for ``region`` unless one is alive; the process, or None."""
    if db.lease_live(supervisor_lease(region)) is not None:
        return None
    work = config.region(region).work
    assert work is not None, "Region.__post_init__ sets work"
    log = work / "supervisor.log"
    args = [sys.executable, "-m", "tidegate.cli", "region", "supervise", "--region", region, "--exit-when-idle", "60"]
    return spawn_detached(args, log, env=config.driver_environment(), marker=SUPERVISOR_MARKER)
