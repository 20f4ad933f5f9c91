"""The fault tools the drills and the chaos bench use: a freeze is only done once the process has stopped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tidegate.runtime.procedures.faults import freeze, kill_group, thaw, wait_stopped


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_frozen_busy_process_is_waited_for_until_it_has_stopped():
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        for _ in range(20):  # a process on the other core obeys SIGSTOP a moment after kill returns
            freeze(busy.pid)
            wait_stopped(busy.pid)
            assert _state(busy.pid) == "T"
            thaw(busy.pid)
    finally:
        kill_group(busy.pid)
        busy.wait()
    wait_stopped(busy.pid)  # a process that is gone is not waited for
