"""Processes that outlive their caller: detached drivers and supervisors, found again by PID.

A driver is started in its own session (``setsid``), with its output in a log file, so it
survives the CLI command or Airflow task that started it. A PID alone is not an identity
(the kernel reuses them), so liveness also checks the process's command line names the
run it is supposed to be.

The controller launches drivers and, for jobs it must keep running, the region's
supervisor (:func:`ensure_supervisor`); the supervisor runs the controller's starts. Both
launch through here, so neither imports the other.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tidegate.control.db import ControlDB
    from tidegate.runtime.jobs.config import PlatformConfig

HOST = socket.gethostname()


def job_lease(job: str, region: str) -> str:
    return f"job:{job}:{region}"


def rehearsal_lease(job: str, region: str) -> str:
    return f"rehearsal:{job}:{region}"


def supervisor_lease(region: str) -> str:
    return f"supervisor:{region}"


def spawn_detached(
    args: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> int:
    """Start ``args`` in a new session with stdout and stderr appended to ``log_path``; the PID."""
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
    _reap_later(proc)
    return proc.pid


def ensure_supervisor(db: ControlDB, config: PlatformConfig, region: str) -> int | None:
    """Start a detached supervisor for ``region`` unless one is alive; its PID, or None."""
    if db.lease_live(supervisor_lease(region)) is not None:
        return None
    work = config.region(region).work
    assert work is not None, "Region.__post_init__ sets work"
    log = work / "supervisor.log"
    args = [sys.executable, "-m", "tidegate.cli", "region", "supervise", "--region", region, "--exit-when-idle", "60"]
    return spawn_detached(args, log, env=config.driver_environment())


_children: list[subprocess.Popen] = []


def _reap_later(proc: subprocess.Popen) -> None:
    # a long-lived parent (a test run, a supervisor) must not collect zombies forever
    _children.append(proc)
    for child in list(_children):
        if child.poll() is not None:
            _children.remove(child)


def pid_alive(pid: int | None, marker: str | None = None) -> bool:
    """True when ``pid`` runs on this host (and its command line contains ``marker``)."""
    if not pid:
        return False
    for child in list(_children):  # our own children: reap so a dead one is not a zombie
        if child.pid == pid and child.poll() is not None:
            _children.remove(child)
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        if ") Z " in Path(f"/proc/{pid}/stat").read_text():  # exited, waiting to be reaped
            return False
        if marker is None:
            return True
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return False
    return marker in cmdline


def terminate(pid: int, grace_s: float = 10.0) -> bool:
    """SIGTERM the process group of ``pid``, then SIGKILL after ``grace_s``. True if it is gone."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(os.getpgid(pid), sig)
        except ProcessLookupError:
            return True
        except PermissionError:
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return True
            time.sleep(0.1)
    return not pid_alive(pid)


def driver_alive(pid: int | None, run_id: int) -> bool:
    """True when ``pid`` runs on this host and is the driver of run ``run_id``: a PID alone
    is not an identity (it may have been reused), the command line must name the run."""
    return pid_alive(pid, f"--run-id {run_id} ")
