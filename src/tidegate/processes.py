"""Processes known by what was recorded of them: a PID and the moment its process started.

A PID alone is not an identity: the kernel hands a freed PID to the next process. Tidegate
records each process it must find again — a driver, a supervisor, the check service, a Kafka
broker — as :class:`Recorded`: its PID and its start time (psutil's ``create_time``), in the
control database beside each ``pid`` and in the pid files it writes. This module is the one
place that asks whether a recorded process still runs (:meth:`Recorded.alive`) and signals it
(:meth:`Recorded.signal_group`, :meth:`Recorded.terminate`): both compare the PID's start time
now with the recorded one, so a PID given to another process is reported dead and is never
signalled. :mod:`tidegate.runtime.jobs.process` says which record is a run's driver or a lease's holder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

# how far a PID's start time may read from the recorded one and still be that process: psutil
# derives it from the boot time in whole seconds (/proc/stat btime), which a step of the wall
# clock moves; a PID handed to another process within a second of its first owner's start is
# beyond what the kernel does (it cycles through pid_max first)
START_TIME_TOLERANCE_S = 1.0
GONE = 0.0  # the start time of a record of a PID that had no process when it was taken


def start_time(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch, psutil's ``create_time``); None
    when no such process runs."""
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, ProcessLookupError):
        return None


@dataclass(frozen=True)
class Recorded:
    """A process as Tidegate records it, on this host: its PID and the moment it started.

    ``started_at`` is None for a record written before Tidegate kept start times (a run or
    lease row of an older release, a pid file holding a PID alone): then the process is the
    PID's while its command line holds ``marker`` (``--run-id 7 ``, ``supervise``) — today's
    check of those rows — or, without a marker, while the PID runs at all.
    """

    pid: int
    started_at: float | None
    marker: str | None = None

    def __str__(self) -> str:
        return f"pid {self.pid}"

    def alive(self) -> bool:
        """True while the recorded process runs on this host (not a zombie): the PID exists and
        started when it was recorded to (see the class docstring for records without a start)."""
        if self.started_at is None:
            return pid_alive(self.pid, self.marker)
        if not pid_alive(self.pid):
            return False
        now = start_time(self.pid)
        return now is not None and abs(now - self.started_at) <= START_TIME_TOLERANCE_S

    def signal_group(self, sig: int) -> bool:
        """Send ``sig`` to the recorded process's group (a driver and its Spark JVM) if the
        process still runs; False, sending nothing, when it is gone or its PID is another's."""
        if not self.alive():
            return False
        try:
            os.killpg(os.getpgid(self.pid), sig)
        except ProcessLookupError:
            return False
        except PermissionError:
            os.kill(self.pid, sig)
        return True

    def terminate(self, grace_s: float = 10.0) -> bool:
        """SIGTERM the recorded process's group, then SIGKILL after ``grace_s``; True once it
        is gone. A PID reused by another process is left alone: the record is gone."""
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            if not self.signal_group(sig):
                return True
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if not self.alive():
                    return True
                time.sleep(0.1)
        return not self.alive()

    @classmethod
    def of(cls, pid: int, marker: str | None = None) -> Recorded:
        """The process holding ``pid`` now (a child just started, a PID read this moment); when
        none does, a record no process matches (started at the epoch), never an unchecked PID."""
        started = start_time(pid)
        return cls(pid, GONE if started is None else started, marker)

    def to_text(self) -> str:
        """The record as a pid file holds it: ``<pid> <started_at>``."""
        return f"{self.pid} {self.started_at!r}" if self.started_at is not None else str(self.pid)

    @classmethod
    def from_text(cls, text: str, marker: str | None = None) -> Recorded | None:
        """A pid file's record (:meth:`to_text`; a PID alone from an older release); None when
        ``text`` holds none."""
        fields = text.split()
        try:
            pid = int(fields[0])
            started_at = float(fields[1]) if len(fields) > 1 else None
        except (IndexError, ValueError):
            return None
        return cls(pid, started_at, marker)


def recorded(pid: int | None, started_at: float | None, marker: str | None = None) -> Recorded | None:
    """The process a record names (a row's ``pid`` and ``pid_started_at``); None without a PID."""
    return Recorded(int(pid), started_at, marker) if pid else None


def this_process() -> Recorded:
    """This process, as others will find it again."""
    return Recorded.of(os.getpid())


_children: list[subprocess.Popen] = []


def track_child(proc: subprocess.Popen) -> None:
    """Keep ``proc`` (a child of this process) to be reaped once it exits, by the next launch or liveness check."""
    # a long-lived parent (a test run, a supervisor) must not collect zombies forever
    _children.append(proc)
    for child in list(_children):
        if child.poll() is not None:
            _children.remove(child)


def pid_alive(pid: int | None, marker: str | None = None) -> bool:
    """True when ``pid`` runs on this host (and its command line contains ``marker``). A PID
    alone: for a process Tidegate recorded, ask its :class:`Recorded`, which also checks when
    the PID's process started."""
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
