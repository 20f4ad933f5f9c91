"""Child processes each in a process group of their own, stopped by group — by PID, never by name.

A Spark daemon or a cluster driver starts children of its own (executors, their Python
workers); signalling its process group stops them with it, and leaves alone any Spark on
the same machine that this process did not start. Linux: group members are read from /proc.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid


def spawn(name: str, argv: list[str], env: dict[str, str], log: Path, cwd: Path) -> Daemon:
    """Start ``argv`` in a session and process group of its own, output to ``log``."""
    with open(log, "wb") as out:  # a retried start writes a fresh log
        # its own session and process group: stop_groups() signals the group, so the
        # process's children (executors, Python workers) go with it; Ctrl-C in a terminal
        # does not reach it first
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
            cwd=cwd, start_new_session=True,
        )  # fmt: skip
    return Daemon(name, proc, log)


def stop_groups(daemons: list[Daemon], timeout_s: float) -> list[str]:
    """SIGTERM the group of each of ``daemons``, SIGKILL whatever is left after
    ``timeout_s``, reap them; the names of the groups that survived even SIGKILL."""
    for d in daemons:
        signal_group(d.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for d in daemons:
        try:
            d.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    # the daemon may be gone while its children (same group) are still shutting down
    while time.monotonic() < deadline and any(group_alive(d.pid) for d in daemons):
        time.sleep(0.1)
    for d in daemons:
        if d.proc.poll() is None or group_alive(d.pid):
            signal_group(d.pid, signal.SIGKILL)
    for d in daemons:
        d.proc.wait()
    # SIGKILL is not refusable: only a moment for the kernel to finish the job
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and any(group_alive(d.pid) for d in daemons):
        time.sleep(0.05)
    return [d.name for d in daemons if group_alive(d.pid)]


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def group_members(pgid: int) -> list[int]:
    """PIDs of the processes of group ``pgid`` still running (zombies waiting to be reaped
    do not count). Linux: read from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        # "pid (comm) state ppid pgrp ...": comm may hold spaces, so split after the last ')'
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def group_alive(pgid: int) -> bool:
    return bool(group_members(pgid))
