"""What the event log hands back: append results, snapshots and partition descriptions."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AppendResult:
    partition: int
    first_offset: int
    count: int
    first_arrival: int | None  # None when count == 0
    last_arrival: int | None


@dataclass(frozen=True)
class LogSnapshot:
    """End offsets of all partitions and the broker clock, taken together: every event
    appended after the snapshot has ``arrival_time >= clock_us``."""

    end_offsets: tuple[int, ...]
    clock_us: int


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    start_offset: int  # first retained
    end_offset: int  # next to be written
    first_arrival_us: int | None  # of the first retained event
    last_arrival_us: int | None  # of the last event ever appended
    bytes: int
    segments: int
