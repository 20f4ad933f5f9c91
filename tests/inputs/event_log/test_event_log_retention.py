"""Retention deletes whole old segments, never the last, and names what is gone when asked for it.

Timeline (manual clock, minutes after 12:00, one segment per append):

    segment:   [0,10)  [10,20)  [20,30)  [30,40)
    arrivals:   0–9     60–69   120–129  180–189
    clock 200, retention 100m → cutoff 100: the first two segments go (max arrival 9, 69 < 100)
"""

from __future__ import annotations

import shutil

import pytest

from conftest import MINUTE, T0, FakeClock
from tidegate.inputs.event_log import EventLog, EventLogError, RetentionError
from tidegate.inputs.event_log.segments import partition_dir_name


def at(minute: int) -> int:
    return T0 + minute * MINUTE


@pytest.fixture
def aged_log(tmp_path):
    log = EventLog.create(tmp_path / "event-log", partitions=1, clock="manual", retention="100m", segment_bytes=1024)
    for start in (0, 60, 120, 180):
        log.append(0, [None] * 10, [f"{start}-{i}-" + "x" * 80 for i in range(10)], [at(start + i) for i in range(10)])
    assert log.describe()[0].segments == 4
    log.advance_clock(at(200))
    return log


def test_retention_deletes_segments_older_than_the_limit(aged_log):
    deleted = aged_log.apply_retention()
    assert [p.name for p in deleted] == ["00000000000000000000.seg", "00000000000000000010.seg"]
    assert not any(p.exists() for p in deleted)
    assert aged_log.start_offset(0) == 20 and aged_log.end_offset(0) == 40
    assert aged_log.read(0, 20, 40).column("offset").to_pylist() == list(range(20, 40))
    info = aged_log.describe()[0]
    assert (info.start_offset, info.segments, info.first_arrival_us) == (20, 2, at(120))
    assert aged_log.apply_retention() == []  # nothing more is old enough


def test_reading_before_the_start_names_the_missing_offsets_and_arrivals(aged_log):
    aged_log.apply_retention()
    with pytest.raises(RetentionError) as err:
        aged_log.read(0, 5, 25)
    msg = str(err.value)
    assert "offsets 5–19 were deleted by retention" in msg
    assert "from 2026-03-01T12:00:00Z to 2026-03-01T13:09:00Z" in msg
    assert "offset 20" in msg and "--accept-partial" in msg
    assert err.value.missing_offsets == (5, 20) and err.value.first_available_offset == 20
    with pytest.raises(RetentionError):
        aged_log.check_retained(0, 19)
    aged_log.check_retained(0, 20)


def test_seeking_into_the_deleted_span_names_it(aged_log):
    aged_log.apply_retention()
    # every arrival up to 13:09 may have been deleted; from 13:09 + 1 µs on, all is retained
    with pytest.raises(RetentionError) as err:
        aged_log.offset_for_arrival(0, at(30))
    msg = str(err.value)
    assert "arrived from 2026-03-01T12:30:00Z through 2026-03-01T13:09:00Z" in msg
    assert "offsets before 20" in msg and "--accept-partial" in msg
    with pytest.raises(RetentionError):
        aged_log.offset_for_arrival(0, at(69))  # exactly the last deleted arrival
    assert aged_log.offset_for_arrival(0, at(69) + 1) == 20
    assert aged_log.offset_for_arrival(0, at(125)) == 25


def test_retention_never_deletes_the_last_segment(aged_log):
    aged_log.advance_clock(at(10_000))  # everything is far older than the limit
    aged_log.apply_retention()
    info = aged_log.describe()[0]
    assert (info.start_offset, info.end_offset, info.segments) == (30, 40, 1)
    assert info.last_arrival_us == at(189)
    # the partition's arrival clock survives, so imports still cannot go back before it
    aged_log.append(0, [None], ["next"])
    assert aged_log.end_offset(0) == 41


def test_retention_by_size_keeps_the_newest_segments_within_the_limit(tmp_path):
    log = EventLog.create(
        tmp_path / "event-log", partitions=1, clock="manual", retention_bytes=2500, segment_bytes=1024
    )
    for start in range(0, 50, 10):
        log.append(0, [None] * 10, ["y" * 80] * 10, [at(start)] * 10)
    sizes = [p.stat().st_size for p in sorted((log.root / partition_dir_name(0)).glob("*.seg"))]
    log.apply_retention()
    info = log.describe()[0]
    kept = sum(sizes[-info.segments :])
    assert kept <= 2500 < kept + sizes[-info.segments - 1]
    assert info.start_offset == 50 - 10 * info.segments


def test_a_retention_run_interrupted_after_recording_its_state_is_finished_by_the_next(aged_log, tmp_path):
    pdir = aged_log.root / partition_dir_name(0)
    first = pdir / "00000000000000000000.seg"
    shutil.copy(first, tmp_path / "saved.seg")
    aged_log.apply_retention()
    shutil.copy(tmp_path / "saved.seg", first)  # as if the crash came before the unlink
    reader = EventLog.open(aged_log.root)
    assert reader.start_offset(0) == 20  # the leftover is not served
    with pytest.raises(RetentionError):
        reader.read(0, 0, 10)
    assert reader.apply_retention() == [first]
    assert not first.exists()


def test_retention_settings_can_be_changed_and_are_read_from_disk(aged_log):
    aged_log.set_retention(None, None)
    other = EventLog.open(aged_log.root)
    assert other.apply_retention() == []
    other.set_retention("10m", None)
    assert len(aged_log.apply_retention()) == 3  # reads the new setting: all but the last


# --- a poisoned arrival clock -------------------------------------------------------
#
#   two partitions, six segments each, all arrived within the last hour (wall clock);
#   one import to partition 1 arriving decades ahead; retention 30d.
#   before: the clock followed that arrival, so every segment but each partition's last
#   was "older than 30d" and deleted — partition 0's too.

YEAR = 365 * 24 * 60 * MINUTE


def _six_segments_each(log: EventLog, clock) -> None:
    for i in range(6):
        for p in range(2):
            log.append(p, [None] * 10, [f"{p}-{i}-" + "x" * 80] * 10)
        clock.advance(MINUTE)
    assert [i.segments for i in log.describe()] == [6, 6]


def test_an_arrival_decades_ahead_is_refused_and_retention_deletes_nothing_recent(tmp_path):
    clock = FakeClock()
    log = EventLog.create(tmp_path / "event-log", partitions=2, retention="30d", segment_bytes=1024, now_us=clock)
    _six_segments_each(log, clock)
    with pytest.raises(EventLogError, match="ahead of the broker clock"):
        log.append(1, [None], ["poison"], arrival_times=[T0 + 30 * YEAR])
    assert log.apply_retention() == []
    assert [i.segments for i in log.describe()] == [6, 6]


def test_retention_follows_the_event_logs_clock_never_the_largest_arrival(tmp_path):
    clock = FakeClock()
    log = EventLog.create(
        tmp_path / "event-log", partitions=2, retention="30d", segment_bytes=1024, now_us=clock, max_arrival_ahead=None
    )
    _six_segments_each(log, clock)
    log.append(1, [None], ["accepted: the bound is off"], arrival_times=[T0 + 30 * YEAR])
    assert log.apply_retention() == []
    assert [i.segments for i in log.describe()] == [6, 7]
    clock.advance(31 * 24 * 60 * MINUTE)  # the wall clock itself passes the limit: now they go
    deleted = log.apply_retention()
    assert len(deleted) == 5 + 6 and [i.segments for i in log.describe()] == [1, 1]
