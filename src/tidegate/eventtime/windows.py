"""Windows over system time: which windows an event belongs to, and when a window is final.

**Edges** (semantics §3). By default a tumbling or hopping window includes its end and
excludes its start, as in Azure Stream Analytics: the 12:00–13:00 window is ``(12:00,
13:00]`` and holds an event at exactly 13:00, not one at 12:00 (that one is in 11:00–12:00).
``edges: start_inclusive`` (:data:`START_INCLUSIVE`) gives Spark's ``[start, end)``
instead. Times are whole µs, so ``(a, b]`` is ``[a + 1 µs, b + 1 µs)``: an end-inclusive
window is found as the start-inclusive one holding ``S − 1 µs`` (:func:`edge_shift_us`).

Intervals (µs since epoch), with ``(`` and ``]`` swapped for ``[`` and ``)`` under
``start_inclusive``:

* tumbling ``size``, ``offset``: ``(N·size + offset, (N+1)·size + offset]``
* hopping ``size``, ``hop``, ``offset``: ``(N·hop + offset, N·hop + offset + size]``
* ``offset`` shifts the boundaries, as Stream Analytics' ``Offset`` does; it may be negative
  (``-1ms`` as there) and lies strictly between ``−period`` and ``period`` (period: size,
  or hop), offsets one period apart giving the same windows.
* session ``gap``, ``max_duration``, ``cut``: a key's events sorted by system time; the next
  event joins the session while it is at most ``gap`` after the previous one (Stream
  Analytics: "within the timeout") and no check point cuts it. Check points are the multiples
  of ``max_duration`` since the epoch, edged like a tumbling window's ends, so an event exactly
  on one stays in a session cut there; by default (``cut: over_max_duration``) a session is
  cut at a check point once it has lasted ``max_duration``, as Stream Analytics does — up to
  2 × max —, with ``cut: every_check_point`` at every check point (see sessions.py). A
  session is ``[first, min(last + gap, next cut)]``: it holds its first event (the one that
  opened it) and its end. Under ``start_inclusive`` (Spark's sessions) an event exactly
  ``gap`` after the previous one opens a new session, an event exactly on a check point
  opens the interval after it, and a session is ``[first, min(last + gap, …))``.
* sliding ``size``: the window changes only when an event enters or leaves it, so there
  is one candidate per event time ``t`` (entry) and per ``t + size`` (exit); the window
  ending at ``e`` is ``(e − size, e]`` — closed on the right, as in Stream Analytics,
  so that it holds the event that made it. Empty candidates are not output. Always
  end-inclusive (no ``edges`` option).

**When a window is final.** The watermark ``W`` means the engine has seen every event with
``S < W``, and every event kept from then on has ``S ≥ W`` (see policy.py). A window that
includes its end ``T`` takes any event with ``S ≤ T``: while ``W ≤ T`` an event at exactly
``S = T ≥ W`` can still be kept and belongs to it, so it is final only once ``W > T``, that
is ``W ≥ T + 1 µs`` — its ``close_at`` is ``end + 1 µs``. A ``[start, end)`` window takes
only ``S < end``, all seen once ``W ≥ end``: its ``close_at`` is its end. Either way nothing
can join a window after its ``close_at``, and its output timestamp is its end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_duration
from tidegate.eventtime.sessions import OVER_MAX_DURATION, check_cut, cut_sessions, hold_until_us, longest_session_us

MAX_WINDOW_US = 7 * 86_400 * 1_000_000  # the largest window span a job may use

END_INCLUSIVE = "end_inclusive"  # (start, end]: Stream Analytics' edges, the default
START_INCLUSIVE = "start_inclusive"  # [start, end): Spark's
EDGES = (END_INCLUSIVE, START_INCLUSIVE)


def check_edges(edges: str, where: str = "window.edges") -> None:
    if edges not in EDGES:
        raise ConfigError(
            f"{where} is {edges!r}",
            f"use {END_INCLUSIVE} (Stream Analytics: (start, end], the default)"
            f" or {START_INCLUSIVE} (Spark: [start, end))",
        )


def edge_shift_us(edges: str) -> int:
    """1 µs for end-inclusive edges, else 0: an interval ``(a, b]`` of whole µs is ``[a, b)``
    moved by it — events are placed by ``S − shift``, and the interval is final ``shift``
    after its end (see the module docstring)."""
    return 1 if edges == END_INCLUSIVE else 0


def _check_offset(offset_us: int, period_us: int, period: str) -> None:
    if not -period_us < offset_us < period_us:
        raise ConfigError(
            f"window.offset is {format_duration(offset_us)}, not strictly between -{period} and {period}"
            f" ({format_duration(period_us)})",
            "e.g. offset: 15m, or -1ms as Stream Analytics writes Offset(millisecond, -1)",
        )


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
    edges: str = END_INCLUSIVE
    kind: str = "tumbling"

    def __post_init__(self) -> None:
        _check_span("size", self.size_us)
        _check_offset(self.offset_us, self.size_us, "window.size")
        check_edges(self.edges)

    @property
    def span_us(self) -> int:
        return self.size_us


@dataclass(frozen=True)
class HoppingWindow:
    size_us: int
    hop_us: int
    offset_us: int = 0
    edges: str = END_INCLUSIVE
    kind: str = "hopping"

    def __post_init__(self) -> None:
        _check_span("size", self.size_us)
        _check_span("hop", self.hop_us)
        if self.hop_us > self.size_us:
            raise ConfigError(
                "window.hop is larger than window.size, so some events would fall in no window",
                "make hop at most size (hop == size is a tumbling window)",
            )
        _check_offset(self.offset_us, self.hop_us, "window.hop")
        check_edges(self.edges)

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
    def edges(self) -> str:
        return END_INCLUSIVE  # (e − size, e], always

    @property
    def span_us(self) -> int:
        return self.size_us


@dataclass(frozen=True)
class SessionWindow:
    gap_us: int
    max_duration_us: int
    edges: str = END_INCLUSIVE
    cut: str = OVER_MAX_DURATION  # where check points cut a session (sessions.py)
    kind: str = "session"

    def __post_init__(self) -> None:
        _check_span("gap", self.gap_us)
        _check_span("max_duration", self.max_duration_us)
        if self.gap_us > self.max_duration_us:
            raise ConfigError("window.gap is larger than window.max_duration", "make gap at most max_duration")
        check_edges(self.edges)
        check_cut(self.cut)

    @property
    def longest_us(self) -> int:
        """The longest a session lasts (end − start): max duration, or 2 × max when it is cut
        only once it has lasted max duration."""
        return longest_session_us(self.cut, self.max_duration_us)

    @property
    def span_us(self) -> int:
        """How far back a replay reads so that the sessions ending after its first output
        time are the stream's: ``max_duration`` when every check point cuts; else the burst's
        start must be read too, up to 2 × max before the cut that opened the first session
        ending after it, read from ``gap`` earlier (sessions.py)."""
        if self.longest_us == self.max_duration_us:
            return self.max_duration_us
        return self.longest_us + self.gap_us


Window = TumblingWindow | HoppingWindow | SlidingWindow | SessionWindow


def close_delay_us(window: Window) -> int:
    """How long after its end a window becomes final: 1 µs when it includes its end."""
    return edge_shift_us(window.edges)


def next_close_us(window: TumblingWindow | HoppingWindow, frontier_us: int) -> int:
    """The first ``close_at`` after ``frontier_us`` of a tumbling or hopping window: the next
    time a watermark past ``frontier_us`` makes a window final, whether or not one holds events.
    (A sliding or session window has no such grid: its ends follow the events.)"""
    if isinstance(window, TumblingWindow):
        step, base = window.size_us, window.offset_us
    else:
        step, base = window.hop_us, (window.offset_us + window.size_us) % window.hop_us
    shift = edge_shift_us(window.edges)
    end = (frontier_us - shift - base) // step * step + base + step  # the first end e with e + shift > frontier
    return end + shift


@dataclass(frozen=True)
class Assignment:
    """(event, window) memberships: ``event_index`` points into the input arrays."""

    event_index: np.ndarray
    start_us: np.ndarray
    end_us: np.ndarray
    close_at_us: np.ndarray

    def __len__(self) -> int:
        return len(self.event_index)

    def select(self, mask: np.ndarray) -> Assignment:
        return Assignment(self.event_index[mask], self.start_us[mask], self.end_us[mask], self.close_at_us[mask])


def assign(
    window: Window,
    system_us: np.ndarray,
    key_codes: np.ndarray | None = None,
    session_from_us: np.ndarray | None = None,
) -> Assignment:
    """Every window each event belongs to. ``key_codes`` groups events by key; windows of
    different keys are independent (sliding and session windows depend on neighbours).
    ``session_from_us``: for sessions, per event the first event of its burst as a stream
    knew it (:attr:`Step.session_from_us`)."""
    system_us = np.asarray(system_us, dtype=np.int64)
    if key_codes is None:
        key_codes = np.zeros(len(system_us), dtype=np.int64)
    if isinstance(window, TumblingWindow):
        shift = edge_shift_us(window.edges)
        start = _floor_to(system_us - shift, window.size_us, window.offset_us)
        idx = np.arange(len(system_us))
        return Assignment(idx, start, start + window.size_us, start + window.size_us + shift)
    if isinstance(window, HoppingWindow):
        return _assign_hopping(window, system_us)
    if isinstance(window, SlidingWindow):
        return _assign_sliding(window, system_us, np.asarray(key_codes))
    if isinstance(window, SessionWindow):
        return _assign_sessions(window, system_us, np.asarray(key_codes), session_from_us)[0]
    raise TypeError(f"not a window: {window!r}")


def retire_at_us(window: Window, system_us: np.ndarray, assignment: Assignment) -> np.ndarray:
    """Per event: the watermark at which it can leave the buffer (no open window needs it;
    a session's event, also no event that may yet continue its burst: sessions.py)."""
    system_us = np.asarray(system_us, dtype=np.int64)
    if isinstance(window, SlidingWindow):
        # the event also opens the exit candidate (t, t + size], final at t + size + 1 µs
        return system_us + window.size_us + 1
    out = np.full(len(system_us), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(out, assignment.event_index, assignment.close_at_us)
    if isinstance(window, SessionWindow):
        return hold_until_us(window.cut, system_us, out, window.gap_us, edge_shift_us(window.edges))
    return out


def _floor_to(t: np.ndarray, step: int, offset: int) -> np.ndarray:
    return (t - offset) // step * step + offset


def _assign_hopping(window: HoppingWindow, s: np.ndarray) -> Assignment:
    hop, size, off = window.hop_us, window.size_us, window.offset_us
    shift = edge_shift_us(window.edges)
    s = s - shift  # (a, b] holds s as [a, b) holds s − 1 µs
    k_hi = (s - off) // hop  # last window starting at or before s
    k_lo = (s - off - size) // hop + 1  # first window still covering s
    counts = k_hi - k_lo + 1
    idx = np.repeat(np.arange(len(s)), counts)
    within = np.arange(len(idx)) - np.repeat(np.cumsum(counts) - counts, counts)
    start = (np.repeat(k_lo, counts) + within) * hop + off
    return Assignment(idx, start, start + size, start + size + shift)


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


def _assign_sessions(
    window: SessionWindow, s: np.ndarray, key_codes: np.ndarray, session_from_us: np.ndarray | None
) -> tuple[Assignment, np.ndarray]:
    """Sessions per key (cut where sessions.py says), and per event the first event of its
    burst. A session is ``[first event, min(last event + gap, next cut)]`` (``…)``)."""
    if len(s) == 0:
        return _empty(), np.zeros(0, dtype=np.int64)
    shift = edge_shift_us(window.edges)
    order = _sorted_by_key_then_time(key_codes, s)
    known = s if session_from_us is None else np.asarray(session_from_us, dtype=np.int64)
    cut = cut_sessions(s[order], key_codes[order], window.gap_us, window.max_duration_us, shift, window.cut,
                       known[order])  # fmt: skip
    start = np.empty(len(s), dtype=np.int64)
    end = np.empty(len(s), dtype=np.int64)
    burst_from = np.empty(len(s), dtype=np.int64)
    start[order], end[order], burst_from[order] = cut.start_us, cut.end_us, cut.burst_from_us
    return Assignment(np.arange(len(s)), start, end, end + shift), burst_from


def _runs(sorted_codes: np.ndarray) -> list[slice]:
    if len(sorted_codes) == 0:
        return []
    cuts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1], True])
    return [slice(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


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
    # sessions: per input event, the first event of its burst, to keep with it (sessions.py)
    session_from_us: np.ndarray | None = None


def step(
    window: Window,
    system_us: np.ndarray,
    prev_frontier_us: np.ndarray | int,
    frontier_us: np.ndarray | int,
    key_codes: np.ndarray | None = None,
    emit_after_us: np.ndarray | int | None = None,
    session_from_us: np.ndarray | None = None,
) -> Step:
    """Advance the window stage from ``prev_frontier`` to ``frontier`` (per event or scalar).

    ``system_us`` holds the buffered events plus the new kept ones. Emits the memberships
    of windows whose ``close_at`` lies in ``(prev_frontier, frontier]`` — each window once —
    except windows ending at or before ``emit_after_us`` (output before a restart; per event
    or scalar, like the frontiers);
    keeps the events that a window still open at ``frontier`` needs. For sessions,
    ``session_from_us`` is what the previous step gave back with the buffered events (a new
    event's own time), and the step gives it back for every event (:attr:`Step.session_from_us`).
    """
    system_us = np.asarray(system_us, dtype=np.int64)
    n = len(system_us)
    prev = np.broadcast_to(np.asarray(prev_frontier_us, dtype=np.int64), (n,))
    now = np.broadcast_to(np.asarray(frontier_us, dtype=np.int64), (n,))
    burst_from = None
    if isinstance(window, SessionWindow):
        codes = np.zeros(n, dtype=np.int64) if key_codes is None else np.asarray(key_codes)
        members, burst_from = _assign_sessions(window, system_us, codes, session_from_us)
    else:
        members = assign(window, system_us, key_codes)
    close = members.close_at_us
    emit = (close > prev[members.event_index]) & (close <= now[members.event_index])
    if emit_after_us is not None:
        cut = np.broadcast_to(np.asarray(emit_after_us, dtype=np.int64), (n,))
        emit &= members.end_us > cut[members.event_index]
    keep = retire_at_us(window, system_us, members) > now
    return Step(members.select(emit), keep, burst_from)
