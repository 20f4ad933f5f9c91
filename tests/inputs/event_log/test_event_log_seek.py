"""Seeking by arrival time: the first offset whose arrival is >= t, across frames and segments."""

from __future__ import annotations

import pytest

from conftest import T0
from tidegate.inputs.event_log import EventLog

#        offset:  0   1   2   3   4   5   6   7   8
ARRIVALS = [10, 10, 20, 30, 30, 30, 40, 40, 50]
FRAMES = [(0, 2), (2, 4), (4, 7), (7, 9)]  # [start, end) of each append; offset 3-5 split across frames


@pytest.fixture
def seek_log(tmp_path):
    log = EventLog.create(tmp_path / "event-log", partitions=1, clock="manual", segment_bytes=1024)
    for lo, hi in FRAMES:
        log.append(0, [None] * (hi - lo), [f"e{i}" for i in range(lo, hi)], [T0 + a for a in ARRIVALS[lo:hi]])
    assert log.describe()[0].segments > 1  # the seek must also cross segment files
    return log


@pytest.mark.parametrize(
    "t, offset",
    [
        (0, 0),  # before everything: the first offset
        (10, 0),  # equal to the first arrival: inclusive
        (11, 2),  # just after: the next larger arrival
        (20, 2),
        (21, 3),  # 30 starts mid-frame at offset 3
        (30, 3),
        (31, 6),  # 40 starts at a frame boundary … and a segment boundary
        (40, 6),
        (50, 8),  # the last event
        (51, 9),  # after the last arrival: the end offset
    ],
)
def test_offset_for_arrival_finds_the_first_event_at_or_after_t(seek_log, t, offset):
    assert seek_log.offset_for_arrival(0, T0 + t) == offset


def test_offset_for_arrival_on_an_empty_partition_is_its_end(tmp_path):
    log = EventLog.create(tmp_path / "event-log", partitions=2)
    assert log.offset_for_arrival(1, T0) == 0
