"""Drivers and supervisors as their run and lease rows record them, launched detached with their
start time (real processes, no Spark; the record itself: tests/test_processes.py)."""

from __future__ import annotations

import signal
import sys
from types import SimpleNamespace as NS

import psutil

from tidegate.processes import Recorded
from tidegate.runtime.jobs import process
from tidegate.runtime.jobs.process import HOST, driver, driver_alive, driver_here, lease_holder

SLEEPER = "import time; time.sleep(120)"


def test_a_spawned_process_is_recorded_with_its_start_time_and_found_alive(tmp_path):
    started = process.spawn_detached([sys.executable, "-c", SLEEPER], tmp_path / "log", marker="no-such-marker")
    try:
        assert started.started_at == psutil.Process(started.pid).create_time()
        assert started.alive()  # the start time decides: the marker is for records without one
        assert started.terminate(grace_s=5) and not started.alive()
    finally:
        started.signal_group(signal.SIGKILL)  # never by its PID alone: it may be another's by now


def test_a_run_row_names_its_driver_and_only_this_host_asks_after_it(sleeper):
    started_at = Recorded.of(sleeper.pid).started_at
    row = NS(id=7, pid=sleeper.pid, pid_started_at=started_at, host=HOST)
    assert driver(row) == Recorded(sleeper.pid, started_at, "--run-id 7 ")
    assert driver_here(row) == driver(row) and driver_alive(row)
    assert driver_here(NS(id=7, pid=sleeper.pid, pid_started_at=started_at, host="elsewhere")) is None
    reused = NS(id=7, pid=sleeper.pid, pid_started_at=started_at - 30.0, host=HOST)
    assert driver_here(reused) is None and not driver_alive(reused)
    old_row = NS(id=7, pid=sleeper.pid, pid_started_at=None, host=HOST)  # before start times were recorded
    assert driver_alive(old_row) and not driver_alive(NS(id=8, pid=sleeper.pid, pid_started_at=None, host=HOST))
    assert driver(NS(id=9, pid=None, pid_started_at=None, host=HOST)) is None  # not launched yet


def test_a_lease_row_names_its_holder_with_what_its_command_line_holds():
    supervisor = NS(name="supervisor:east", holder="supervisor@h:12", pid=12, pid_started_at=None)
    run = NS(name="job:fleet:east", holder="run-7", pid=13, pid_started_at=1234.5)
    assert lease_holder(supervisor) == Recorded(12, None, "supervise")
    assert lease_holder(run) == Recorded(13, 1234.5, "--run-id 7 ")
    assert lease_holder(NS(name="job:fleet:east", holder="run-7", pid=None, pid_started_at=None)) is None
