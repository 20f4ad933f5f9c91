"""The fault tools the drills and the chaos bench use: a freeze is only done once the process has stopped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tidegate.processes import Recorded
from tidegate.runtime.procedures.faults import freeze, kill_group, thaw, wait_stopped


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_frozen_busy_process_is_waited_for_until_it_has_stopped():
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    process = Recorded.of(busy.pid)
    try:
        for _ in range(20):  # a process on the other core obeys SIGSTOP a moment after kill returns
            freeze(process)
            wait_stopped(process)
            assert _state(busy.pid) == "T"
            thaw(process)
    finally:
        kill_group(process)
        busy.wait()
    wait_stopped(process)  # a process that is gone is not waited for


def test_no_fault_reaches_a_process_that_took_over_the_recorded_pid():
    """The PID is there, but its process started after the one recorded: it is another's now."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        now = Recorded.of(other.pid)
        assert now.started_at is not None
        reused = Recorded(other.pid, now.started_at - 60.0)  # the recorded process started a minute earlier
        kill_group(reused, wait_s=0)
        freeze(reused)
        wait_stopped(reused)
        # neither stopped (T, t) nor killed (Z, X); a child still starting on a busy machine may be
        # in R, S or D (waiting on the disk) — each a process that got no fault
        assert _state(other.pid) not in ("T", "t", "Z", "X") and other.poll() is None
    finally:
        other.kill()
        other.wait()
