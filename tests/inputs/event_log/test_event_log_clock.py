"""The broker clock: arrival stamping, snapshots, the manual clock, and imported arrival times."""

from __future__ import annotations

import fcntl
import itertools
import os
import random
import threading

import pyarrow as pa
import pytest

from conftest import MINUTE, SECOND, T0, payloads
from tidegate.inputs.event_log import ArrivalAheadError, ArrivalOrderError, EventLog, EventLogError


def arrivals(log: EventLog, p: int) -> list[int]:
    return log.read(p, 0, log.end_offset(p)).column("arrival_time").cast(pa.int64()).to_pylist()


# --- wall clock ---------------------------------------------------------------------


def test_wall_clock_stamps_now_and_never_goes_back_when_the_clock_does(wall_log, clock):
    wall_log.append(0, [None], ["a"])  # T0
    clock.advance(5 * SECOND)
    wall_log.append(0, [None], ["b"])  # T0+5s
    clock.advance(-60 * SECOND)  # the host clock steps back (NTP)
    wall_log.append(0, [None], ["c"])
    assert arrivals(wall_log, 0) == [T0, T0 + 5 * SECOND, T0 + 5 * SECOND]


def test_wall_clock_now_is_at_least_the_latest_arrival_of_any_partition(wall_log, clock):
    wall_log.append(1, [None], ["a"])
    clock.advance(-MINUTE)
    assert wall_log.clock_now_us() == T0
    clock.advance(2 * MINUTE)
    assert wall_log.clock_now_us() == T0 + MINUTE


def test_snapshot_clock_bounds_every_later_arrival_even_if_the_wall_clock_steps_back(wall_log, clock):
    # partition 0 imports arrivals ahead of the wall clock; the snapshot clock follows them
    wall_log.append(0, [None], ["ahead"], arrival_times=[T0 + 4 * MINUTE])
    snap = wall_log.snapshot()
    assert snap.end_offsets == (1, 0, 0) and snap.clock_us == T0 + 4 * MINUTE
    clock.advance(-MINUTE)
    wall_log.append(1, [None], ["later"])  # partition 1 never saw that arrival itself
    assert arrivals(wall_log, 1) == [T0 + 4 * MINUTE]
    # nor may an import slip in before what a consumer was told
    with pytest.raises(ArrivalOrderError, match="already handed to consumers"):
        wall_log.append(2, [None], ["late import"], arrival_times=[T0])


def test_snapshot_waits_for_an_append_in_progress(wall_log):
    lock_path = wall_log.root / "p-00001" / "lock"
    fd = os.open(lock_path, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a writer holds it during an append
    done = threading.Event()
    thread = threading.Thread(target=lambda: (wall_log.snapshot(), done.set()))
    thread.start()
    try:
        assert not done.wait(0.3)  # blocked: it must not count half an append
    finally:
        os.close(fd)
    assert done.wait(5)
    thread.join()


# --- manual clock -------------------------------------------------------------------


def test_manual_clock_moves_only_forward_and_stamps_appends(manual_log):
    assert manual_log.clock_now_us() == T0
    manual_log.append(0, [None], ["a"])
    manual_log.advance_clock(T0 + MINUTE)
    manual_log.advance_clock(T0 + MINUTE)  # same time: fine
    manual_log.append(0, [None], ["b"])
    assert arrivals(manual_log, 0) == [T0, T0 + MINUTE]
    with pytest.raises(
        EventLogError, match="cannot move the clock .* back from 2026-03-01T12:01:00Z to 2026-03-01T12:00:00Z"
    ):
        manual_log.advance_clock(T0)
    assert manual_log.clock_now_us() == T0 + MINUTE
    assert EventLog.open(manual_log.root).clock_now_us() == T0 + MINUTE  # stored, not in memory


def test_manual_clock_ignores_the_wall_clock(tmp_path, clock):
    log = EventLog.create(tmp_path / "event-log", partitions=1, clock="manual", now_us=clock)
    log.advance_clock(T0)
    clock.advance(3600 * SECOND)
    assert log.clock_now_us() == T0
    assert log.snapshot().clock_us == T0


def test_wall_clock_cannot_be_advanced_by_hand(wall_log):
    with pytest.raises(EventLogError, match="wall clock.*--clock manual"):
        wall_log.advance_clock(T0 + MINUTE)


# --- imported arrival times ---------------------------------------------------------


def test_supplied_arrival_times_must_not_go_back_within_the_call(manual_log):
    with pytest.raises(ArrivalOrderError) as err:
        manual_log.append(1, [None] * 3, payloads(3), arrival_times=[T0 + 2, T0 + 5, T0 + 4])
    msg = str(err.value)
    assert "partition 1" in msg and "arrival_times[2]" in msg and "arrival_times[1]" in msg
    assert "nothing was written" in msg
    assert manual_log.end_offset(1) == 0 and manual_log.describe()[1].bytes == 0


def test_supplied_arrival_times_must_not_precede_the_partitions_last_arrival(manual_log):
    manual_log.append(0, [None], ["a"], arrival_times=[T0 + MINUTE])
    size = manual_log.describe()[0].bytes
    with pytest.raises(ArrivalOrderError) as err:
        manual_log.append(0, [None] * 2, ["b", "c"], arrival_times=[T0 + 30 * SECOND, T0 + 2 * MINUTE])
    msg = str(err.value)
    assert "partition 0" in msg and "arrival_times[0] = 2026-03-01T12:00:30Z" in msg
    assert "last arrival 2026-03-01T12:01:00Z (offset 0)" in msg
    assert manual_log.end_offset(0) == 1 and manual_log.describe()[0].bytes == size


def test_supplied_arrival_times_must_not_precede_the_manual_clock(manual_log):
    with pytest.raises(ArrivalOrderError, match="manual clock 2026-03-01T12:00:00Z"):
        manual_log.append(0, [None], ["a"], arrival_times=[T0 - 1])
    r = manual_log.append(0, [None] * 2, ["a", "b"], arrival_times=[T0, T0 + 1])  # equal is fine
    assert (r.first_arrival, r.last_arrival) == (T0, T0 + 1)


def test_supplied_arrival_times_may_precede_the_wall_clock_for_backfill(wall_log, clock):
    r = wall_log.append(0, [None], ["old"], arrival_times=[T0 - 3600 * SECOND])
    assert r.first_arrival == T0 - 3600 * SECOND
    wall_log.append(0, [None], ["now"])
    assert arrivals(wall_log, 0) == [T0 - 3600 * SECOND, T0]


def test_snapshots_taken_among_concurrent_appends_bound_all_later_arrivals(tmp_path):
    # a jittery wall clock (steps back by up to 2 ms at random) and threads appending to
    # every partition while another thread takes snapshots
    rng = random.Random(5)
    ticks = itertools.count()
    log = EventLog.create(
        tmp_path / "event-log", partitions=3, now_us=lambda: T0 + 100 * next(ticks) - rng.randint(0, 2000)
    )
    snapshots = []

    def append(p: int) -> None:
        for i in range(60):
            log.append(p, [None], [f"{p}-{i}"], fsync=False)

    def snap() -> None:
        for _ in range(40):
            snapshots.append(log.snapshot())

    threads = [threading.Thread(target=append, args=(p,)) for p in range(3)] + [threading.Thread(target=snap)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "deadlock between appends and snapshots"
    for p in range(3):
        stamped = arrivals(log, p)
        assert stamped == sorted(stamped)
        for snap_ in snapshots:
            later = stamped[snap_.end_offsets[p] :]
            assert all(a >= snap_.clock_us for a in later)
    clocks = [s.clock_us for s in snapshots]
    assert clocks == sorted(clocks)  # the clock consumers see never goes back


# --- arrival times ahead of the broker clock ----------------------------------------

YEAR = 365 * 24 * 3600 * SECOND


def test_an_arrival_time_beyond_the_clock_plus_its_bound_is_refused(wall_log, clock):
    with pytest.raises(ArrivalAheadError) as err:
        wall_log.append(1, [None] * 2, ["a", "b"], arrival_times=[T0, T0 + 30 * YEAR])
    msg = str(err.value)
    assert "partition 1" in msg and "arrival_times[1] = 2056-" in msg
    assert "more than 5m ahead of the broker clock 2026-03-01T12:00:00Z" in msg and "nothing was written" in msg
    assert "max_arrival_ahead" in msg
    assert wall_log.end_offset(1) == 0 and wall_log.clock_now_us() == T0
    wall_log.append(1, [None], ["within the bound"], arrival_times=[T0 + 5 * MINUTE])
    assert arrivals(wall_log, 1) == [T0 + 5 * MINUTE]


def test_the_bound_is_the_wall_clock_so_accepted_arrivals_cannot_ratchet_it(wall_log, clock):
    # each accepted arrival moves the clock consumers see; the bound must not move with it
    wall_log.append(0, [None], ["a"], arrival_times=[T0 + 4 * MINUTE])
    wall_log.snapshot()  # the floor follows that arrival
    with pytest.raises(ArrivalAheadError):
        wall_log.append(0, [None], ["b"], arrival_times=[T0 + 8 * MINUTE])
    clock.advance(4 * MINUTE)
    wall_log.append(0, [None], ["b"], arrival_times=[T0 + 8 * MINUTE])


def test_the_bound_is_an_event_log_setting(tmp_path, clock):
    log = EventLog.create(tmp_path / "event-log", partitions=1, now_us=clock, max_arrival_ahead="1h")
    assert EventLog.open(tmp_path / "event-log").config.max_arrival_ahead_us == 3600 * SECOND
    log.append(0, [None], ["a"], arrival_times=[T0 + 59 * MINUTE])
    with pytest.raises(ArrivalAheadError, match="more than 1h ahead"):
        log.append(0, [None], ["b"], arrival_times=[T0 + 61 * MINUTE])
    with pytest.raises(EventLogError, match="max_arrival_ahead"):
        EventLog.create(tmp_path / "other", partitions=1, max_arrival_ahead="0s")


def test_a_manual_clock_takes_imports_ahead_of_it_because_it_is_advanced_after_them(manual_log):
    # backfill appends recorded arrivals first and moves the manual clock to them afterwards
    manual_log.append(0, [None], ["a"], arrival_times=[T0 + 30 * YEAR])
    assert manual_log.clock_now_us() == T0


# --- a damaged clock file -----------------------------------------------------------


@pytest.mark.parametrize("stored", ["9" * 40, str(2**63), "-5"])
def test_a_clock_file_beyond_any_stampable_time_is_a_clear_error_not_an_overflow(manual_log, stored):
    (manual_log.root / "clock").write_text(stored + "\n")
    for use in (
        manual_log.clock_now_us,
        manual_log.snapshot,
        lambda: manual_log.append(0, [None], ["a"]),
        lambda: EventLog.open(manual_log.root).clock_now_us(),
    ):
        with pytest.raises(EventLogError) as refused:
            use()
        assert "not a time the log can stamp" in refused.value.problem
        assert "µs since epoch" in refused.value.fix and "recreate the event log" in refused.value.fix
    assert manual_log.end_offset(0) == 0  # nothing was appended


def test_a_manual_clock_cannot_be_advanced_past_the_year_9999(manual_log):
    with pytest.raises(EventLogError, match="not between 1970 and the year 9999"):
        manual_log.advance_clock(10**30)
    assert manual_log.clock_now_us() == T0
