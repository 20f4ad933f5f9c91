"""Windows over system time: which windows an event belongs to, and when a window is final.

Intervals (µs since epoch):

* tumbling ``size``, ``offset``: ``[N·size + offset, (N+1)·size + offset)``
* hopping ``size``, ``hop``, ``offset``: ``[N·hop + offset, N·hop + offset + size)``
* session ``gap``, ``max_duration``: a key's events sorted by system time, cut where
  two neighbours are ``gap`` or more apart, or where an event is ``max_duration`` or
  more after its session's first event; ``[first, min(last + gap, first + max_duration))``
* sliding ``size``: the window changes only when an event enters or leaves it, so there
  is one candidate per event time ``t`` (entry) and per ``t + size`` (exit); the window
  ending at ``e`` is ``(e − size, e]`` — closed on the right, as in Stream Analytics,
  so that it holds the event that made it. Empty candidates are not output.

A window is final once the watermark reaches its ``close_at``: the end for ``[start,
end)`` windows, ``end + 1 µs`` for sliding ones. Every kept event has ``S >= W`` (see
policy.py), so nothing can join a window after that. Its output timestamp is its end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_duration

MAX_WINDOW_US = 7 * 86_400 * 1_000_000  # the largest window span a job may use


def _check_span(name: str, value_us: int) -> None:
    if value_us <= 0:
        raise ConfigError(f"window.{name} must be positive, got {format_duration(value_us)}", "e.g. 1m or 1h")
    if value_us > MAX_WINDOW_US:
        raise ConfigError(
            f"window.{name} is {format_duration(value_us)}, larger than the 7-day maximum",
            "use a window of 7d or less; aggregate longer spans downstream",
        )


@dataclass(frozen=True)
class TumblingWindow:
    size_us: int
    offset_us: int = 0
    kind: str = "tumbling"

    def __post_init__(self) -> None:
        _check_span("size", self.size_us)
        if not 0 <= self.offset_us < self.size_us:
            raise ConfigError("window.offset must be at least 0s and less than window.size", "e.g. offset: 0s")

    @property
    def span_us(self) -> int:
        return self.size_us


@dataclass(frozen=True)
class HoppingWindow:
    size_us: int
    hop_us: int
    offset_us: int = 0
    kind: str = "hopping"

    def __post_init__(self) -> None:
        _check_span("size", self.size_us)
        _check_span("hop", self.hop_us)
        if self.hop_us > self.size_us:
            raise ConfigError(
                "window.hop is larger than window.size, so some events would fall in no window",
                "make hop at most size (hop == size is a tumbling window)",
            )
        if not 0 <= self.offset_us < self.hop_us:
            raise ConfigError("window.offset must be at least 0s and less than window.hop", "e.g. offset: 0s")

    @property
    def span_us(self) -> int:
        return self.size_us


@dataclass(frozen=True)
class SlidingWindow:
    size_us: int
    kind: str = "sliding"

    def __post_init__(self) -> None:
        _check_span("size", self.size_us)

    @property
    def span_us(self) -> int:
        return self.size_us


@dataclass(frozen=True)
class SessionWindow:
    gap_us: int
    max_duration_us: int
    kind: str = "session"

    def __post_init__(self) -> None:
        _check_span("gap", self.gap_us)
        _check_span("max_duration", self.max_duration_us)
        if self.gap_us > self.max_duration_us:
            raise ConfigError("window.gap is larger than window.max_duration", "make gap at most max_duration")

    @property
    def span_us(self) -> int:
        return self.max_duration_us


Window = Union[TumblingWindow, HoppingWindow, SlidingWindow, SessionWindow]


@dataclass(frozen=True)
class Assignment:
    """(event, window) memberships: ``event_index`` points into the input arrays."""

    event_index: np.ndarray
    start_us: np.ndarray
    end_us: np.ndarray
    close_at_us: np.ndarray

    def __len__(self) -> int:
        return len(self.event_index)

    def select(self, mask: np.ndarray) -> "Assignment":
        return Assignment(self.event_index[mask], self.start_us[mask], self.end_us[mask], self.close_at_us[mask])


def assign(window: Window, system_us: np.ndarray, key_codes: np.ndarray | None = None) -> Assignment:
    """Every window each event belongs to. ``key_codes`` groups events by key; windows of
    different keys are independent (sliding and session windows depend on neighbours)."""
    system_us = np.asarray(system_us, dtype=np.int64)
    if key_codes is None:
        key_codes = np.zeros(len(system_us), dtype=np.int64)
    if isinstance(window, TumblingWindow):
        start = _floor_to(system_us, window.size_us, window.offset_us)
        idx = np.arange(len(system_us))
        return Assignment(idx, start, start + window.size_us, start + window.size_us)
    if isinstance(window, HoppingWindow):
        return _assign_hopping(window, system_us)
    if isinstance(window, SlidingWindow):
        return _assign_sliding(window, system_us, np.asarray(key_codes))
    if isinstance(window, SessionWindow):
        return _assign_sessions(window, system_us, np.asarray(key_codes))
    raise TypeError(f"not a window: {window!r}")


def retire_at_us(window: Window, system_us: np.ndarray, assignment: Assignment) -> np.ndarray:
    """Per event: the watermark at which it can leave the buffer (no open window needs it)."""
    system_us = np.asarray(system_us, dtype=np.int64)
    if isinstance(window, SlidingWindow):
        # the event also opens the exit candidate (t, t + size], final at t + size + 1 µs
        return system_us + window.size_us + 1
    out = np.full(len(system_us), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(out, assignment.event_index, assignment.close_at_us)
    return out


def _floor_to(t: np.ndarray, step: int, offset: int) -> np.ndarray:
    return (t - offset) // step * step + offset


def _assign_hopping(window: HoppingWindow, s: np.ndarray) -> Assignment:
    hop, size, off = window.hop_us, window.size_us, window.offset_us
    k_hi = (s - off) // hop  # last window starting at or before s
    k_lo = (s - off - size) // hop + 1  # first window still covering s
    counts = k_hi - k_lo + 1
    idx = np.repeat(np.arange(len(s)), counts)
    within = np.arange(len(idx)) - np.repeat(np.cumsum(counts) - counts, counts)
    start = (np.repeat(k_lo, counts) + within) * hop + off
    return Assignment(idx, start, start + size, start + size)


def _sorted_by_key_then_time(key_codes: np.ndarray, s: np.ndarray) -> np.ndarray:
    return np.lexsort((np.arange(len(s)), s, key_codes))


def _assign_sliding(window: SlidingWindow, s: np.ndarray, key_codes: np.ndarray) -> Assignment:
    size = window.size_us
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    order = _sorted_by_key_then_time(key_codes, s)
    for run in _runs(key_codes[order]):
        members = order[run]
        times = s[members]
        ends = np.unique(np.concatenate([times, times + size]))
        lo = np.searchsorted(times, ends - size, side="right")
        hi = np.searchsorted(times, ends, side="right")
        counts = hi - lo
        idx = np.repeat(lo, counts) + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
        parts.append((members[idx], np.repeat(ends, counts)))
    if not parts:
        return _empty()
    event_index = np.concatenate([p[0] for p in parts])
    end = np.concatenate([p[1] for p in parts])
    return Assignment(event_index, end - size, end, end + 1)


def _assign_sessions(window: SessionWindow, s: np.ndarray, key_codes: np.ndarray) -> Assignment:
    """Sessions per key: events closer than ``gap`` join one session; a session is also cut
    at every multiple of ``max_duration`` since the epoch (the check points Azure Stream
    Analytics uses), so where a session is cut never depends on events before the last
    check point — a replay from ``T − L`` rebuilds exactly the sessions ending after ``T``.
    A session is ``[first event, min(last event + gap, next check point))``."""
    gap, max_d = window.gap_us, window.max_duration_us
    order = _sorted_by_key_then_time(key_codes, s)
    start = np.empty(len(s), dtype=np.int64)
    end = np.empty(len(s), dtype=np.int64)
    if len(s) == 0:
        return _empty()
    times = s[order]
    codes = key_codes[order]
    bucket = times // max_d
    new_session = np.r_[True, (codes[1:] != codes[:-1]) | (np.diff(times) >= gap) | (bucket[1:] != bucket[:-1])]
    session_id = np.cumsum(new_session) - 1
    firsts = np.flatnonzero(new_session)
    lasts = np.r_[firsts[1:] - 1, len(times) - 1]
    session_start = times[firsts]
    session_end = np.minimum(times[lasts] + gap, (bucket[firsts] + 1) * max_d)
    start[order] = session_start[session_id]
    end[order] = session_end[session_id]
    return Assignment(np.arange(len(s)), start, end, end.copy())


def _runs(sorted_codes: np.ndarray) -> list[slice]:
    if len(sorted_codes) == 0:
        return []
    cuts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1], True])
    return [slice(a, b) for a, b in zip(cuts[:-1], cuts[1:])]


def _empty() -> Assignment:
    z = np.zeros(0, dtype=np.int64)
    return Assignment(z, z, z, z)


def closing(assignment: Assignment, prev_frontier_us: np.ndarray | int, frontier_us: np.ndarray | int) -> np.ndarray:
    """Mask of memberships whose window becomes final in this step:
    ``prev_frontier < close_at <= frontier`` (frontiers per membership or scalar)."""
    prev = np.asarray(prev_frontier_us)
    now = np.asarray(frontier_us)
    return (assignment.close_at_us > prev) & (assignment.close_at_us <= now)


@dataclass(frozen=True)
class Step:
    """One window step: memberships to emit now, and which events stay buffered."""

    emit: Assignment
    keep: np.ndarray  # bool per input event


def step(
    window: Window,
    system_us: np.ndarray,
    prev_frontier_us: np.ndarray | int,
    frontier_us: np.ndarray | int,
    key_codes: np.ndarray | None = None,
    emit_after_us: np.ndarray | int | None = None,
) -> Step:
    """Advance the window stage from ``prev_frontier`` to ``frontier`` (per event or scalar).

    ``system_us`` holds the buffered events plus the new kept ones. Emits the memberships
    of windows whose ``close_at`` lies in ``(prev_frontier, frontier]`` — each window once —
    except windows ending at or before ``emit_after_us`` (output before a restart; per event
    or scalar, like the frontiers);
    keeps the events that a window still open at ``frontier`` needs.
    """
    system_us = np.asarray(system_us, dtype=np.int64)
    n = len(system_us)
    prev = np.broadcast_to(np.asarray(prev_frontier_us, dtype=np.int64), (n,))
    now = np.broadcast_to(np.asarray(frontier_us, dtype=np.int64), (n,))
    members = assign(window, system_us, key_codes)
    close = members.close_at_us
    emit = (close > prev[members.event_index]) & (close <= now[members.event_index])
    if emit_after_us is not None:
        cut = np.broadcast_to(np.asarray(emit_after_us, dtype=np.int64), (n,))
        emit &= members.end_us > cut[members.event_index]
    keep = retire_at_us(window, system_us, members) > now
    return Step(members.select(emit), keep)
