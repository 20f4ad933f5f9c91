"""Fixtures for the event-log tests: real files under tmp_path, a clock the test moves."""

from __future__ import annotations

import json

import pytest

from tidegate.eventtime.durations import parse_time_us
from tidegate.inputs.event_log import EventLog

T0 = parse_time_us("2026-03-01T12:00:00Z")
SECOND = 1_000_000
MINUTE = 60 * SECOND


class FakeClock:
    """A wall clock the test sets; it may even step back, as real ones do."""

    def __init__(self, t_us: int = T0) -> None:
        self.t_us = t_us

    def __call__(self) -> int:
        return self.t_us

    def advance(self, us: int) -> None:
        self.t_us += us


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def wall_log(tmp_path, clock) -> EventLog:
    return EventLog.create(tmp_path / "event-log", partitions=3, clock="wall", now_us=clock)


@pytest.fixture
def manual_log(tmp_path) -> EventLog:
    log = EventLog.create(tmp_path / "event-log", partitions=2, clock="manual")
    log.advance_clock(T0)
    return log


def payloads(n: int, start: int = 0) -> list[str]:
    return [json.dumps({"n": i}) for i in range(start, start + n)]
