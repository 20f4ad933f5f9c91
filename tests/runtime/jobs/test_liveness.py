"""Whether a run's driver is alive: the one rule the controller's status and the page share."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from tidegate.runtime.jobs.liveness import LIVE, RunState, judge_run, local_process_alive

NOW = 10_000.0  # the fake clock: wall clock and lease clock agree unless a row says otherwise


def run(status="running", *, id=7, heartbeat_ago=3.0, host="driver-host", pid=4242, started=True, detail=None):
    return NS(
        id=id,
        status=status,
        status_detail=detail,
        heartbeat_at=None if heartbeat_ago is None else NOW - heartbeat_ago,
        host=host,
        pid=pid,
        started_at=NOW - 600 if started else None,
    )


def lease(holder="run-7", expires_in=10.0):
    return NS(holder=holder, expires_at=NOW + expires_in)


@pytest.mark.parametrize(
    "row, lease_row, process, state, why",
    [
        # recorded live, lease held and unexpired, process unknown (another host): the lease is the evidence
        (run(), lease(), None, "running", None),
        (run("starting"), lease(), None, "starting", None),
        (run("stopping"), lease(), None, "stopping", None),
        # … and its process runs here
        (run(), lease(), True, "running", None),
        # the process on this host is gone, though the lease has not expired yet: lost at once
        (run(), lease(), False, "lost", "its process 4242 on driver-host is gone"),
        # the lease expired on the lease clock: lost, whatever the process table says
        (run(), lease(expires_in=-12.0), None, "lost", "its lease expired 12 s ago"),
        (run(), lease(expires_in=0.0), True, "lost", "its lease expired 0 s ago"),  # [acquired, expires_at)
        # another run holds the job's lease: this one's driver lost it
        (run(), lease(holder="run-8"), None, "lost", "its lease is held by run-8"),
        # no lease at all (released, or never taken)
        (run(), None, None, "lost", "its lease is gone"),
        # recorded ended: what the row says, lease or not
        (run("stopped", detail="stopped by the operator"), None, None, "stopped", None),
        (run("failed", detail="boom"), lease(), False, "failed", None),
        (run("lost", detail="fenced"), None, None, "lost", None),  # already recorded: nothing new to record
        (run("refused"), lease(holder="run-6"), None, "refused", None),
    ],
)
def test_a_runs_state(row, lease_row, process, state, why):
    verdict = judge_run(row, lease_row, now=NOW, process_alive=process)
    assert verdict.state == state and isinstance(verdict.state, RunState)
    assert verdict.why == why
    assert verdict.newly_lost is (why is not None)
    assert verdict.alive is (state in ("starting", "running", "stopping"))
    if why is None:
        assert verdict.detail == row.status_detail
    else:
        assert verdict.detail == f"the driver stopped without saying so: {why}; last heartbeat 3 s ago"


def test_lease_expiry_is_judged_on_the_lease_clock_and_the_heartbeat_on_the_wall_clock():
    row, held = run(heartbeat_ago=40.0), lease(expires_in=5.0)
    # the database's clock runs 20 s ahead of this host's: by the clock leases expire on, it has lapsed
    verdict = judge_run(row, held, now=NOW, lease_now=NOW + 20.0)
    assert verdict.state == "lost" and verdict.why == "its lease expired 15 s ago"
    assert verdict.detail.endswith("last heartbeat 40 s ago")
    assert judge_run(row, held, now=NOW, lease_now=NOW + 4.0).state == "running"


def test_a_run_just_recorded_by_a_start_that_has_not_taken_its_lease_yet_is_starting_not_lost():
    # a start records the run, then takes the lease that names it: a status read in between
    # (an operator's, the page's, a test's poll) must not record the new run lost
    fresh = NS(**vars(run("starting", heartbeat_ago=None, started=False)), requested_at=NOW - 0.05)
    assert judge_run(fresh, None, now=NOW).state == "starting"
    assert judge_run(fresh, lease(holder="run-6"), now=NOW).state == "starting"  # the killed run's, lapsing
    # a start that died between the two leaves a run nobody will start: lost once the grace is over
    stale = NS(**{**vars(fresh), "requested_at": NOW - 31.0})
    assert judge_run(stale, None, now=NOW).why == "its lease is gone"
    # only a start is given the grace
    running = NS(**vars(run(heartbeat_ago=None)), requested_at=NOW - 0.05)
    assert judge_run(running, None, now=NOW).state == "lost"


def test_a_run_that_never_beat_says_so():
    assert judge_run(run(heartbeat_ago=None), None, now=NOW).detail.endswith("last heartbeat never")


def test_states_are_strings_so_existing_comparisons_and_formatting_keep_working():
    assert RunState.RUNNING == "running" and "lost" in (RunState.LOST,)
    assert f"{RunState.LOST:<6}|" == "lost  |" and str(RunState.FAILED) == "failed"
    assert set(LIVE) == {"starting", "running", "stopping"}


@pytest.mark.parametrize(
    "row, host, alive, expected",
    [
        (run(), "driver-host", True, True),  # its driver here, running
        (run(), "driver-host", False, False),  # its driver here, gone
        (run(), "elsewhere", False, None),  # another host: this host cannot tell
        (run(started=False), "driver-host", False, None),  # not claimed yet: the PID may be a launcher's
        (run(pid=None), "driver-host", False, None),  # launched by a supervisor, not yet
        (run("stopped"), "driver-host", False, None),  # ended runs need no process check
    ],
)
def test_whether_this_host_can_tell_the_process_is_there(row, host, alive, expected):
    asked = []

    def driver_alive(run):
        asked.append(run)
        return alive

    assert local_process_alive(row, host, driver_alive) is expected
    # the run's recorded process is asked about (process.driver_alive: its PID and start time)
    assert asked == ([row] if expected is not None else [])
