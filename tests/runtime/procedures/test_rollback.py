"""Rolling a failed upgrade back while the supervisor is still restarting the failed version."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from tidegate.runtime.jobs.controller import ControllerError
from tidegate.runtime.procedures.rollback import failed_output_from, roll_back


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
        return NS(
            alive=self.running is not None,
            version=self.running or 2,
            state="running" if self.running else "failed",
            caught_up=self.running == 1,
            detail="",
        )

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


# -- a version whose output failed its check ----------------------------------------------


@pytest.fixture
def db(tmp_path):
    from support import Clock
    from tidegate.control.db import ControlDB
    from tidegate.runtime.jobs.config import load_config

    clock = Clock()
    db = ControlDB(load_config(env={"TIDEGATE_HOME": str(tmp_path)}).control_db, now=clock)
    db.clock = clock
    yield db
    db.dispose()


def add_lineage(db, lineage: str, version: int, output_from_us: int | None, windowed: bool = True) -> None:
    db.clock.advance(10)
    db.create_lineage(
        id=lineage,
        job="job",
        region="east",
        fingerprint=f"{version}" * 64,
        version=version,
        root=f"/r/{lineage}",
        output_from_us=output_from_us,
        windowed=windowed,
    )


def test_a_failed_versions_output_is_discarded_from_where_it_took_over_from_the_version_before(db):
    # v1 ──(100)── v1 ──(200)── v2 ──(300)── v2 (a restart of v2 in a fresh lineage)
    for lineage, version, begins in (("a", 1, None), ("b", 1, 100), ("c", 2, 200), ("d", 2, 300)):
        add_lineage(db, lineage, version, begins)
    assert failed_output_from(db, "job", "east", 2) == (("c", "d"), 200)


def test_a_failed_version_that_hands_over_by_input_position_continues_where_the_output_is_final(db):
    add_lineage(db, "a", 1, None, windowed=False)
    add_lineage(db, "b", 2, None, windowed=False)
    assert failed_output_from(db, "job", "east", 2) == ((), None)


def test_a_rollback_after_a_failed_check_replays_the_previous_version_from_where_it_stopped():
    region = Region(restarts_pending=0)
    region.db.lineages = lambda job, r: [
        NS(id="l1", version=1, output_from_us=None, windowed=True),
        NS(id="l2", version=2, output_from_us=5_000_000, windowed=True),
    ]
    region.running = 2
    region.db.active_region = lambda job: NS(region="west")  # consumers read the partner: they stay there
    started = []
    real_start = region.start
    region.start = lambda job, r, **kw: started.append(kw) or real_start(job, r, **kw)
    done = roll_back(region, "job", "east", previous_version=1, why="version 2 failed its check", discard_output=True)
    assert (started[-1]["mode"], started[-1]["at"]) == ("custom", 5_000_000)
    assert (done.resumed_from_us, done.discarded_lineages, done.consumers_read) == (5_000_000, ("l2",), "west")
    assert done.to_dict()["discarded_lineages"] == ["l2"]
