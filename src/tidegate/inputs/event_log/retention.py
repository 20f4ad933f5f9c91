"""Retention: deleting whole old segments, and naming what was deleted when asked for it.

Only whole segments go, oldest first, and never a partition's last segment (it holds
the partition's last arrival, which the broker clock and idle watermarks need). A
partition's ``retention.json`` is rewritten *before* any file is unlinked, so a crash
half way leaves files the next run removes, never a claim to data that is gone.
"""

from __future__ import annotations

import os
from pathlib import Path

from tidegate.eventtime.durations import format_time_us
from tidegate.files import flocked, fsync_dir
from tidegate.inputs.event_log.errors import RetentionError
from tidegate.inputs.event_log.segments import SEGMENT_SUFFIX, PartitionIndex, RetentionState, Segment

_PARTIAL_HINT = "or pass --accept-partial to run with results marked partial for that span"


def segments_to_delete(
    segments: list[Segment], sizes: list[int], retention_us: int | None, retention_bytes: int | None, now_us: int
) -> int:
    """How many of the oldest segments retention removes (never the last one)."""
    count = 0
    if retention_us is not None:
        cutoff = now_us - retention_us
        while count < len(segments) - 1 and (
            not segments[count].frames or segments[count].frames[-1].max_arrival < cutoff
        ):
            count += 1
    if retention_bytes is not None:
        total = sum(sizes[count:])
        while count < len(segments) - 1 and total > retention_bytes:
            total -= sizes[count]
            count += 1
    return count


def apply_retention(
    index: PartitionIndex, *, retention_us: int | None, retention_bytes: int | None, now_us: int
) -> list[Path]:
    """Delete what retention allows from one partition; the deleted segment paths."""
    with flocked(index.lock_path, exclusive=True), index.lock:  # flock first, always (see log.snapshot)
        index.refresh()
        segments = index.segments
        sizes = [os.stat(s.path).st_size for s in segments]
        count = segments_to_delete(segments, sizes, retention_us, retention_bytes, now_us)
        old = index.retention
        if count:
            gone = [f for s in segments[:count] for f in s.frames]
            through = [
                a for a in (old.deleted_through_arrival, gone[-1].max_arrival if gone else None) if a is not None
            ]
            first = old.deleted_from_arrival
            if first is None and gone:
                first = gone[0].min_arrival
            RetentionState(
                start_offset=segments[count].base_offset,
                deleted_through_arrival=max(through, default=None),
                deleted_from_arrival=first,
            ).save(index.retention_path)
        start = segments[count].base_offset if segments else old.start_offset
        # also sweeps files a crashed earlier run left behind
        doomed = sorted(
            index.directory / n
            for n in os.listdir(index.directory)
            if n.endswith(SEGMENT_SUFFIX) and int(n[: -len(SEGMENT_SUFFIX)]) < start
        )
        for path in doomed:
            path.unlink(missing_ok=True)
        if doomed:
            fsync_dir(index.directory)
        index.refresh()
        return doomed


def check_offset_retained(index: PartitionIndex, offset: int) -> None:
    """Raise RetentionError if ``offset`` is before the first retained one. Caller refreshed."""
    start = index.start_offset()
    if offset >= start:
        return
    state = index.retention
    raise RetentionError(
        f"partition {index.partition}: offsets {offset}–{start - 1} were deleted by retention"
        f"{_arrival_span(state.deleted_from_arrival, state.deleted_through_arrival)};"
        f" asked to read from offset {offset}",
        f"start at offset {start} or later{_after(state.deleted_through_arrival)}, {_PARTIAL_HINT}",
        partition=index.partition,
        missing_offsets=(offset, start),
        missing_arrivals=(state.deleted_from_arrival, state.deleted_through_arrival),
        first_available_offset=start,
    )


def check_arrival_retained(index: PartitionIndex, t_us: int) -> None:
    """Raise RetentionError if events arriving at ``t_us`` or later may have been deleted.

    Every deleted event arrived at or before ``deleted_through_arrival`` and every
    retained one at or after it, so a seek to any ``t`` up to that time would silently
    skip deleted events.
    """
    state = index.retention
    through = state.deleted_through_arrival
    if through is None or t_us > through:
        return
    start = index.start_offset()
    lo = t_us if state.deleted_from_arrival is None else max(t_us, state.deleted_from_arrival)
    raise RetentionError(
        f"partition {index.partition}: the log no longer holds events that arrived from "
        f"{format_time_us(lo)} through {format_time_us(through)} (offsets before {start} were deleted by "
        f"retention); asked for arrivals from {format_time_us(t_us)}",
        f"start at {format_time_us(through + 1)} or later (offset {start}), {_PARTIAL_HINT}",
        partition=index.partition,
        missing_offsets=(0, start),
        missing_arrivals=(lo, through),
        first_available_offset=start,
    )


def _arrival_span(lo: int | None, hi: int | None) -> str:
    if hi is None:
        return ""
    if lo is None:
        return f" (they arrived up to {format_time_us(hi)})"
    return f" (they arrived from {format_time_us(lo)} to {format_time_us(hi)})"


def _after(through: int | None) -> str:
    return "" if through is None else f" (arrivals after {format_time_us(through)})"
