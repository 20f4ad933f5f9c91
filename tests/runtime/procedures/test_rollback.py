"""Rolling a failed upgrade back while the supervisor is still restarting the failed version."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from tidegate.runtime.jobs.controller import ControllerError
from tidegate.runtime.procedures.rollback import roll_back


class Region:
    """The slice of the controller a rollback uses, over one region whose supervisor restarts
    the crashed new version ``restarts_pending`` times — until a stop makes it desired 'stopped'."""

    def __init__(self, restarts_pending: int):
        self.running: int | None = None  # the version whose driver is alive
        self.desired = "running"
        self.actor = "planned-stop"
        self.restarts_pending = restarts_pending
        self.calls: list[str] = []
        self.db = NS(active_region=lambda job: NS(region="east"), record_operation=self._record)
        self.operations: list[tuple] = []

    def _record(self, *args, **kwargs):
        self.operations.append((args, kwargs))

    def _supervisor_tick(self):
        if self.restarts_pending and self.running is None:  # it saw the crash before the stop landed
            self.restarts_pending -= 1
            self.running = 2

    def status_of(self, job, region):
        self._supervisor_tick()
        return NS(alive=self.running is not None, version=self.running or 2, state="running" if self.running
                  else "failed", caught_up=self.running == 1, detail="")

    def stop(self, job, region, **kwargs):
        self.calls.append(f"stop {self.running}")
        self.desired = "stopped"
        self.running = None

    def start(self, job, region, *, version, **kwargs):
        self._supervisor_tick()
        if self.running is not None:
            raise ControllerError(f"job {job} already runs in {region} (run 9, starting)", "stop it first")
        self.calls.append(f"start {version}")
        self.running = version
        return NS(run_id=10, plan=NS(checkpoint="fresh"))

    def wait_for(self, job, region, predicate, timeout_s, what):
        assert predicate(self.status_of(job, region)), what


@pytest.mark.parametrize("restarts", [0, 1, 2])
def test_the_previous_version_runs_even_when_the_supervisor_restarted_the_failed_one_meanwhile(restarts):
    region = Region(restarts_pending=restarts)
    done = roll_back(region, "job", "east", previous_version=1, why="version 2 crashed")
    assert region.running == 1 and done.restored_version == 1 and done.caught_up
    assert region.calls[-1] == "start 1" and region.calls.count("start 1") == 1
    assert region.desired == "stopped"  # the failed version is no longer wanted: nothing restarts it again
    assert region.operations[-1][0][:2] == ("rollback", "done")


def test_a_rollback_the_failed_version_keeps_blocking_says_so():
    region = Region(restarts_pending=100)
    with pytest.raises(ControllerError, match="already runs"):
        roll_back(region, "job", "east", previous_version=1, why="version 2 crashed")
