"""The driver's heartbeat on a clock the test moves: it renews the lease every beat, stops
the query when the operator asks or the lease is gone, rides out a database that fails
while the lease lasts, and stops itself once it cannot know it still holds the lease."""

from __future__ import annotations

import threading
from types import SimpleNamespace as NS

import pytest

from tidegate.lineage.fence import LeaseClock
from tidegate.runtime.jobs import driver as driver_module
from tidegate.runtime.jobs.driver import HEARTBEAT_S, LEASE_TTL_S, Driver


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return 1_800_000_000.0 + self.now


class ControlDB:
    """The run row and the lease, as the heartbeat sees them; ``down`` makes every call fail."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.renewals: list[float] = []
        self.heartbeats: list[float] = []
        self.holder_ok = True
        self.down = False
        self.row = NS(stop_requested_at=None, force_stop=False)
        self.finished: list[tuple] = []

    def _up(self) -> None:
        if self.down:
            raise ConnectionError("the control database does not answer")

    def renew_lease(self, lease, holder, ttl_s, pid=None, pid_started_at=None) -> bool:
        self._up()
        self.renewals.append(self.clock.now)
        return self.holder_ok

    def run(self, run_id):
        self._up()
        return self.row

    def update_run(self, run_id, **fields):
        self._up()
        if "heartbeat_at" in fields:
            self.heartbeats.append(fields["heartbeat_at"])
        if "status" in fields:
            self.finished.append((fields["status"], fields.get("status_detail")))

    def release_lease(self, lease, holder):
        self._up()


def beating(clock: Clock, db: ControlDB, script=None, beats: int = 200) -> Driver:
    """A driver reduced to its heartbeat; ``script(beat)`` runs before each pause. The
    heartbeat runs to its end (at most ``beats`` beats) in this thread."""
    d = Driver.__new__(Driver)
    d.db, d.run_id, d.lease, d.holder = db, 7, "job:x@east", "run-7"
    d.run = NS(job="x", region="east")
    d.monotonic, d.wall = clock.monotonic, clock.wall
    d.lease_clock = LeaseClock(LEASE_TTL_S, monotonic=clock.monotonic)
    d.stop_event, d.ended = threading.Event(), threading.Event()
    d.stop_reason, d.lease_lost = "", False
    count = [0]

    def pause(seconds: float) -> None:
        count[0] += 1
        if count[0] >= beats:
            d.ended.set()
        if script is not None:
            script(count[0])
        clock.now += seconds

    d._pause = pause
    d._heartbeat()
    return d


def test_every_beat_renews_the_lease_and_stamps_the_run_on_the_wall_clock():
    clock = Clock()
    db = ControlDB(clock)
    d = beating(clock, db, beats=5)
    assert db.renewals == [1_000.0 + i * HEARTBEAT_S for i in range(5)]
    assert db.heartbeats == [1_800_000_000.0 + r for r in db.renewals]
    assert not d.stop_event.is_set() and not d.lease_lost


def test_a_stop_asked_for_by_the_operator_stops_the_query_gracefully():
    clock = Clock()
    db = ControlDB(clock)

    def operator(beat: int) -> None:
        if beat == 3:
            db.row = NS(stop_requested_at=clock.wall(), force_stop=False)

    d = beating(clock, db, operator, beats=6)
    assert d.stop_event.is_set() and d.stop_reason == "stop requested by the operator"
    assert not d.lease_lost and db.finished == []  # graceful: the query finishes its batch


def test_a_forced_stop_ends_the_process_at_once_recording_why(monkeypatch):
    clock = Clock()
    db = ControlDB(clock)
    db.row = NS(stop_requested_at=clock.wall(), force_stop=True)

    def exit_now(code):
        raise SystemExit(code)

    monkeypatch.setattr(driver_module.os, "_exit", exit_now)
    with pytest.raises(SystemExit) as ended:
        beating(clock, db, beats=3)
    assert ended.value.code == 0
    assert db.finished == [("stopped", "forced stop: exited without finishing the batch in flight")]


def test_a_lease_taken_by_another_run_stops_the_query_at_the_next_beat():
    clock = Clock()
    db = ControlDB(clock)

    def successor(beat: int) -> None:
        if beat == 4:
            db.holder_ok = False

    d = beating(clock, db, successor)
    assert d.lease_lost and d.stop_event.is_set() and d.stop_reason == "lease lost"
    assert len(db.renewals) == 5  # the fifth renewal was refused; nothing after it


def test_a_database_outage_shorter_than_the_lease_is_ridden_out():
    clock = Clock()
    db = ControlDB(clock)
    outage = int(LEASE_TTL_S / HEARTBEAT_S / 2)  # half the lease's time to live

    def flaky(beat: int) -> None:
        db.down = 2 <= beat < 2 + outage

    d = beating(clock, db, flaky, beats=2 + outage + 5)
    assert not d.stop_event.is_set() and not d.lease_lost
    assert db.renewals[-1] == clock.now - HEARTBEAT_S  # renewing again after the outage


def test_a_database_outage_past_the_lease_stops_the_driver_before_a_successor_may_take_over():
    clock = Clock()
    db = ControlDB(clock)

    def gone(beat: int) -> None:
        db.down = beat >= 2

    d = beating(clock, db, gone)
    assert d.lease_lost and d.stop_event.is_set()
    assert f"within its {LEASE_TTL_S:.0f} s time to live" in d.stop_reason
    last_renewal = db.renewals[-1]
    # stopped within the lease (less its margin), so the lease had not expired for anyone else
    assert clock.now - last_renewal <= LEASE_TTL_S
