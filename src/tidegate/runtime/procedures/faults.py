"""Faults injected into drivers on this host: what drills and the chaos benchmark do to them.

A driver runs in its own process group (its Python process and Spark's JVM), so every
fault here hits the group: a kill -9 of the host's share of the job, or a freeze of it
as a stalled machine would (GC pause, SIGSTOP, a frozen VM). Each takes the process as
recorded (:class:`~tidegate.processes.Recorded`): a PID that is another process's
by now is never signalled.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from tidegate.errors import TidegateError
from tidegate.lineage.commits import pending_batches, pending_state_versions
from tidegate.lineage.layout import JobPaths, is_staging
from tidegate.processes import Recorded


def kill_group(process: Recorded, wait_s: float = 15.0) -> None:
    """kill -9 the process group of ``process`` and wait until it is gone."""
    process.signal_group(signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while process.alive() and time.monotonic() < deadline:
        time.sleep(0.05)


def freeze(process: Recorded) -> None:
    process.signal_group(signal.SIGSTOP)


def thaw(process: Recorded) -> None:
    process.signal_group(signal.SIGCONT)


def wait_stopped(process: Recorded, timeout_s: float = 5.0) -> None:
    """Wait until ``process`` is stopped: a SIGSTOP is delivered, not obeyed, when kill returns,
    and a process running on the other core goes on for a moment."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not process.alive():
            return  # gone: nothing more to wait for
        try:
            state = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, IndexError):
            return  # gone, or no /proc to ask: nothing more to wait for
        if state in ("T", "t", "Z", "X"):
            return
        time.sleep(0.001)
    raise TidegateError(
        f"process {process.pid} did not stop within {timeout_s:.0f} s of SIGSTOP",
        "is it being traced, or in uninterruptible sleep (state D)?",
    )


def freeze_holding_no_lock(process: Recorded, paths: JobPaths, db_lock_free: Callable[[], bool] | None) -> bool:
    """Freeze the driver unless that would leave a lock of this host held: then let it go on
    and say False. A frozen VM elsewhere holds neither the lineage's fence lock nor the
    write lock of a SQLite control database (one lock for the whole file, on one host)."""
    freeze(process)
    wait_stopped(process)  # until then it runs on, and may take the fence just after we looked
    if _fence_free(paths) and (db_lock_free is None or db_lock_free()):
        return True
    thaw(process)
    time.sleep(0.05)
    return False


def freeze_mid_write(
    process: Recorded, paths: JobPaths, timeout_s: float = 120.0, db_lock_free: Callable[[], bool] | None = None
) -> None:
    """Freeze the driver while a batch is written but not yet committed — staged and not
    renamed into place on a local root, its files there without a record on an object store:
    the moment a stale driver would commit on waking, were it not fenced. A freeze that caught
    it holding a lock (:func:`freeze_holding_no_lock`) is let go and tried again."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _mid_write(paths):
            if freeze_holding_no_lock(process, paths, db_lock_free):
                return
            continue
        if not process.alive():
            break
        time.sleep(0.002 if not paths.on_object_store else 0.02)  # a listing on a store is a request
    raise TidegateError(
        f"driver {process.pid} wrote no batch under {paths.uri(paths.root)} within {timeout_s:.0f} s",
        "give it input to process (the log must hold events past its position)",
    )


def _mid_write(paths: JobPaths) -> bool:
    """True when a batch's output or state version is written but not yet committed."""
    if paths.on_object_store:
        return bool(pending_batches(paths.store, paths.output) or pending_state_versions(paths.store, paths.state))
    for folder in (paths.output, paths.state):
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            continue
        if any(is_staging(n) for n in names):
            return True
    return False


def _fence_free(paths: JobPaths) -> bool:
    """True when no process holds the lineage's fence lock (``tidegate.lineage.fence``); always
    on an object store, whose fence is epoch objects, not a lock."""
    if paths.on_object_store:
        return True
    try:
        fd = os.open(paths.fence, os.O_RDWR)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # releases the lock taken just now
