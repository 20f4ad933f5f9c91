"""A recorded process is its PID and the moment it started: a PID the kernel gave to another
process is reported dead and is never signalled (real processes, no Spark)."""

from __future__ import annotations

import signal
import time

import psutil
import pytest

from tidegate.processes import GONE, Recorded


def test_a_pid_now_held_by_a_process_started_later_is_dead_and_never_signalled(sleeper):
    """spawn, kill, spawn: the recorded driver exited and its PID went to ``sleeper``, which
    started after it — the record's start time is earlier than the PID's process."""
    now = Recorded.of(sleeper.pid)
    reused = Recorded(sleeper.pid, now.started_at - 30.0, marker="--run-id 7 ")
    assert now.alive() and not reused.alive()
    assert reused.terminate(grace_s=0)  # "gone", and nothing sent
    assert not reused.signal_group(signal.SIGKILL)
    time.sleep(0.2)
    assert sleeper.poll() is None and psutil.Process(sleeper.pid).status() != psutil.STATUS_STOPPED


def test_a_process_that_exited_is_dead_and_so_is_a_record_taken_after_it_exited(sleeper):
    recorded = Recorded.of(sleeper.pid)
    sleeper.kill()
    sleeper.wait()
    assert not recorded.alive()
    assert Recorded.of(sleeper.pid).started_at == GONE and not Recorded.of(sleeper.pid).alive()


@pytest.mark.parametrize(
    "marker, alive",
    [
        ("--run-id 7 ", True),  # the command line names the run: its driver
        ("--run-id 8 ", False),  # another run's PID by now
        (None, True),  # nothing to check but the PID
    ],
)
def test_a_record_without_a_start_time_written_by_an_older_release_is_checked_by_its_command_line(
    sleeper, marker, alive
):
    assert Recorded(sleeper.pid, None, marker).alive() is alive


@pytest.mark.parametrize(
    "text, expected",
    [
        ("4242 1700000000.25", Recorded(4242, 1700000000.25, "m")),
        ("4242\n", Recorded(4242, None, "m")),  # a pid file of an older release: the PID alone
        ("", None),
        ("not a pid", None),
    ],
)
def test_a_pid_file_holds_the_pid_and_its_start_time(text, expected):
    assert Recorded.from_text(text, marker="m") == expected
    if expected is not None:
        assert Recorded.from_text(expected.to_text(), marker="m") == expected
