"""The region supervisor's tend loop, on a fake clock over a fake controller: no Spark, no process."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from tidegate import processes
from tidegate.errors import ControllerError
from tidegate.runtime.jobs import supervisor as sup
from tidegate.runtime.jobs.process import HOST
from tidegate.runtime.jobs.supervisor import BACKOFF_MAX_S, HEALTHY_AFTER_S, Supervisor

JOB = "fleet"


class Clock:
    def __init__(self, t: float = 0.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, s: float) -> None:
        self.t += s


class Launched:
    """A driver process the fake controller launched: alive while its PID is in ``alive``."""

    def __init__(self, pid: int, alive: set[int]):
        self.pid, self.live = pid, alive

    def alive(self) -> bool:
        return self.pid in self.live


class Platform:
    """The slice of the controller and its database a supervisor uses, over one job whose
    driver dies at once after each start until ``dies`` is set False."""

    def __init__(self, clock: Clock, *, desired="running", keep_running=True, launcher="local"):
        self.clock = clock
        self.dies = True
        self.deployment = NS(job=JOB, region="east", desired=desired, keep_running=keep_running)
        self.run = NS(id=1, status="lost", force_stop=False, host=HOST, pid=101, started_at=None, version=1)
        self.versions: list[int | None] = []  # the version each restart asked for
        self.contexts: list[dict] = []  # the context each restart recorded on its run
        self.alive_since: float | None = None
        self.starts: list[float] = []
        self.launched: list[int] = []
        self.alive_pids: set[int] = set()  # the launched drivers (PID 202) that still run
        self.operations: list[tuple] = []
        self.updates: list[tuple] = []
        self.launcher = launcher
        self.db = NS(
            deployments=lambda region: [self.deployment],
            latest_run=lambda job, region: self.run,
            record_operation=self._record,
            update_run=lambda run_id, **f: self.updates.append((run_id, f)),
        )

    def _record(self, action, outcome, **kwargs):
        self.operations.append((action, outcome, kwargs.get("detail")))

    # -- the controller ------------------------------------------------------------------
    def region(self, name):
        return NS(launcher=self.launcher, job_dir=lambda job: Path("/regions") / name / job)

    def launch(self, run_id, log_path):
        self.launched.append(run_id)
        return Launched(202, self.alive_pids)

    def reconcile(self, job, region):
        alive = self.alive_since is not None
        return NS(
            alive=alive,
            state="running" if alive else "lost",
            started_at=self.alive_since,
            detail=None if alive else "killed",
            run_id=self.run.id,
        )

    def start(self, job, region, *, version, mode, wait_s, context):
        assert (mode, wait_s) == ("last-stopped", 0)  # from the checkpoint; the supervisor never waits
        self.starts.append(self.clock())
        self.versions.append(version)
        self.contexts.append(context)
        self.run = NS(
            id=self.run.id + 1,
            status="starting",
            force_stop=False,
            host=HOST,
            pid=101,
            started_at=None,
            version=version,
        )
        self.alive_since = None if self.dies else self.clock()

    def crash(self) -> None:
        self.alive_since = None


def tend(platform: Platform, clock: Clock, until_s: float, every_s: float = 0.5) -> None:
    supervisor = getattr(platform, "supervisor", None)
    if supervisor is None:
        supervisor = platform.supervisor = Supervisor(platform, "east", say=lambda m: None, now=clock)
    while clock() <= until_s:
        supervisor.tick()
        clock.advance(every_s)


def test_a_dead_driver_is_restarted_with_the_version_it_ran_not_the_newest_registered():
    """After a rollback the region runs the previous version while the failed one is still the
    newest registered: a restart by the supervisor must not bring the failed one back."""
    clock = Clock()
    p = Platform(clock)
    p.run.version = 3  # the rolled-back-to version; the newest registered would be 4
    tend(p, clock, until_s=4)
    assert p.versions and set(p.versions) == {3}


def test_a_restart_names_the_run_it_relaunches_so_a_retried_start_of_that_run_adopts_it():
    clock = Clock()
    p = Platform(clock)
    tend(p, clock, until_s=4)  # run 1 is lost; 2 dies at once, then 3
    assert p.contexts[:2] == [{"auto_restart": 1, "relaunch_of": 1}, {"auto_restart": 2, "relaunch_of": 2}]


def test_a_driver_that_keeps_dying_is_restarted_after_1_2_4_up_to_60_s():
    """
    ticks every 0.5 s; every start dies at once
    t  0  1   3       7               15 …  31 …  63 …   123 …   183
       S  S   S       S               S     S     S      S       S     (S: restart)
    gap  1  2    4            8          16    32    60      60          (capped at 60 s)
    """
    clock = Clock()
    p = Platform(clock)
    tend(p, clock, until_s=200)
    assert p.starts == [0, 1, 3, 7, 15, 31, 63, 123, 183]
    assert BACKOFF_MAX_S == 60
    attempts = [d["attempt"] for action, outcome, d in p.operations if action == "auto-restart"]
    assert attempts == list(range(1, 10))
    assert all(d["previous_state"] == "lost" for _, _, d in p.operations)


def test_the_backoff_starts_again_at_1_s_once_a_driver_stayed_up_five_minutes():
    """
    t   0 1   3        (dies twice)   3: stays up ……… 303.5: healthy  400: dies  400 S  401 S
    """
    clock = Clock()
    p = Platform(clock)
    tend(p, clock, until_s=2.5)
    p.dies = False
    tend(p, clock, until_s=3 + HEALTHY_AFTER_S + 96.5)  # up from 3 s, well past five minutes
    assert p.starts == [0, 1, 3]
    p.crash()
    p.dies = True
    tend(p, clock, until_s=clock() + 2)
    assert p.starts == [0, 1, 3, 400, 401]  # 1 s again, not the 4 s the third attempt had reached


def test_a_driver_that_died_before_five_minutes_keeps_its_backoff():
    """
    t   0 1 3: stays up four minutes   243.5: dies  S   … 8 s …   S   (the wait goes on doubling: 1, 2, 4, 8)
    """
    clock = Clock()
    p = Platform(clock)
    tend(p, clock, until_s=2.5)  # restarts at 0 and 1: the next wait is 4 s
    p.dies = False
    tend(p, clock, until_s=3 + HEALTHY_AFTER_S - 60)  # up from 3 s, for four minutes
    p.crash()
    p.dies = True
    crashed_at = clock()
    tend(p, clock, until_s=crashed_at + 10)
    assert p.starts == [0, 1, 3, crashed_at, crashed_at + 8]


@pytest.mark.parametrize(
    "desired, keep_running",
    [
        ("stopped", True),  # the operator stopped it: a dead driver stays dead
        ("running", False),  # nobody asked to keep it running
    ],
)
def test_no_restart_unless_the_job_is_wanted_running_and_kept_running(desired, keep_running):
    clock = Clock()
    p = Platform(clock, desired=desired, keep_running=keep_running)
    tend(p, clock, until_s=120)
    assert p.starts == [] and p.operations == []


def test_a_forced_stop_of_a_driver_on_this_host_is_carried_out_and_nothing_restarts(monkeypatch):
    clock = Clock()
    p = Platform(clock)
    p.run = NS(id=5, status="stopping", force_stop=True, host=HOST, pid=4242, started_at=clock(), version=1)
    killed = []
    driver = NS(pid=4242, terminate=lambda grace_s=10.0: killed.append(4242) or True)
    monkeypatch.setattr(sup, "driver_here", lambda run: driver if (run.pid, run.id) == (4242, 5) else None)
    tend(p, clock, until_s=0)
    assert killed == [4242] and p.starts == []


@pytest.mark.parametrize(
    "recorded_start, now_start",
    [
        (1000.0, 2000.0),  # recorded with its start time: PID 4242 is a process that started later
        (None, 2000.0),  # a row of an older release, no start time: the command line does not name run 5
    ],
)
def test_a_forced_stop_never_kills_a_pid_that_is_no_longer_the_runs_driver(monkeypatch, recorded_start, now_start):
    """The driver is gone and its PID was reused by another process: nothing is signalled."""
    clock = Clock()
    p = Platform(clock)
    p.run = NS(
        id=5,
        status="stopping",
        force_stop=True,
        host=HOST,
        pid=4242,
        pid_started_at=recorded_start,
        started_at=clock(),
        version=1,
    )
    monkeypatch.setattr(processes, "pid_alive", lambda pid, marker=None: pid == 4242 and marker is None)
    monkeypatch.setattr(processes, "start_time", lambda pid: now_start if pid == 4242 else None)
    monkeypatch.setattr(processes.os, "killpg", lambda *a: pytest.fail(f"signalled the group of {a}"))
    monkeypatch.setattr(processes.os, "kill", lambda *a: pytest.fail(f"signalled {a}"))
    tend(p, clock, until_s=0)


def test_a_forced_stop_of_a_driver_on_another_host_is_left_to_that_hosts_supervisor(monkeypatch):
    clock = Clock()
    p = Platform(clock)
    p.alive_since = 0.0
    p.run = NS(id=5, status="running", force_stop=True, host="elsewhere", pid=4242, started_at=0.0, version=1)
    monkeypatch.setattr(processes.os, "killpg", lambda *a: pytest.fail("signalled a PID of another host"))
    monkeypatch.setattr(processes.os, "kill", lambda *a: pytest.fail("signalled a PID of another host"))
    tend(p, clock, until_s=5)
    assert p.starts == []


def test_a_restart_the_controller_refuses_is_recorded_and_retried_after_the_backoff():
    clock = Clock()
    p = Platform(clock)
    said = []

    def refuse(*args, **kwargs):
        p.starts.append(clock())
        raise ControllerError("the event log no longer holds the input", "accept partial results")

    p.start = refuse
    p.supervisor = Supervisor(p, "east", say=said.append, now=clock)
    tend(p, clock, until_s=3.5)
    assert p.starts == [0, 1, 3]
    assert [outcome for action, outcome, _ in p.operations] == ["done", "failed"] * 3
    assert "no longer holds the input" in said[-1]


def test_a_run_planned_for_the_supervisor_is_launched_while_its_start_lease_lasts():
    clock = Clock()
    p = Platform(clock, launcher="supervisor")
    p.run = NS(id=9, status="starting", force_stop=False, host=None, pid=None, started_at=None, version=1)
    p.alive_since = 0.0  # planned: its start lease is held
    tend(p, clock, until_s=0)
    assert p.launched == [9] and p.starts == []
    assert p.updates == [(9, {"log_path": "/regions/east/fleet/drivers/run-9.log"})]


def test_a_launched_run_still_claiming_is_not_launched_again():
    """A new driver takes seconds to claim its run on a busy host (Python, imports, the control
    database): the ticks meanwhile must not launch it again. Each extra process found the run
    claimed and exited, and the PID it was launched with, written over the claimer's, made the
    run look lost (compose smoke, a restart after a failover, six launches of one run)."""
    clock = Clock()
    p = Platform(clock, launcher="supervisor")
    p.run = NS(id=9, status="starting", force_stop=False, host=None, pid=None, started_at=None, version=1)
    p.alive_since = 0.0
    p.alive_pids.add(202)  # Platform.launch's PID
    tend(p, clock, until_s=3)  # seven ticks before the driver claims the run
    assert p.launched == [9]
    p.alive_pids.clear()  # it died before claiming: launched again while the start lease lasts
    tend(p, clock, until_s=3.5)
    assert p.launched == [9, 9]


def test_a_run_planned_for_the_supervisor_whose_start_lease_lapsed_is_not_launched_but_restarted():
    clock = Clock()
    p = Platform(clock, launcher="supervisor")
    p.run = NS(id=9, status="starting", force_stop=False, host=None, pid=None, started_at=None, version=1)
    p.dies = False
    tend(p, clock, until_s=0)  # reconcile found it lost (and recorded it): a new run is planned instead
    assert p.launched == [] and p.starts == [0]
