"""Where session windows are cut: by the gap, and at the check points of ``max_duration``.

Check points are the multiples of ``max_duration`` since the epoch (00:00, 00:30, 01:00 …
for ``30m``), edged like a tumbling window's ends: check-point interval ``j`` is
``(j·max, (j+1)·max]`` (``[j·max, (j+1)·max)`` under ``start_inclusive``), so an event exactly
on a check point belongs to the interval it ends and stays in a session cut there.

A **burst** is a key's run of events each at most ``gap`` after the previous one (less than
``gap`` under ``start_inclusive``). A burst is one session unless a check point cuts it:

* ``cut: over_max_duration`` (:data:`OVER_MAX_DURATION`, the default) — Azure Stream
  Analytics: a session is checked at every check point and closed there once it has lasted
  its maximum duration, "and a new window is opened at the same point". A burst whose first
  event lies in interval ``j`` is first cut at the end of interval ``j + 1`` — the first check
  point at least ``max_duration`` after that event, so a session lasts up to 2 × max — and, as
  the window opened there has lasted ``max_duration`` at the next check point, at every check
  point after that while the burst goes on. This is the rule of ``SessionWindowPipe`` in
  Trill, the engine Stream Analytics runs on (the window opened at a cut ends at the next
  check point). A first event exactly on a check point belongs to the interval that check
  point ends, so its session is cut one ``max_duration`` later, having lasted exactly that
  long; under ``start_inclusive`` it opens the interval and lasts 2 × max.
* ``cut: every_check_point`` (:data:`EVERY_CHECK_POINT`) — Tidegate's rule through 0.7: every
  check point a burst crosses cuts it, so no session is longer than ``max_duration`` and a cut
  never depends on events before the last check point.

With either rule, cuts fall at check points ``j·max`` for every ``j`` at or after the burst's
**first cut** ``first_cut(b)`` (``b``: the burst's first event): ``interval(b) + 2`` or
``interval(b) + 1``. A session is ``[first event, min(last event + gap, next cut)]`` (``…)``
under ``start_inclusive``), the next cut after its last event ``p`` being check point
``max(interval(p) + 1, first_cut(b))``.

**A stream remembers where bursts began.** Under ``over_max_duration`` a cut depends on the
burst's first event, which may have left the stream's buffer long before. So a step takes and
gives back, per event, the first event of its burst as far as it knows (``session_from_us``;
a new event knows only itself): the burst's start is the earliest of them. Events stay
buffered at least until ``gap`` after them (:func:`hold_until_us`), so an event that continues
a burst always finds one of the burst's events, and with it the burst's start.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidegate.errors import ConfigError

OVER_MAX_DURATION = "over_max_duration"  # Stream Analytics: cut once a session has lasted max_duration
EVERY_CHECK_POINT = "every_check_point"  # every check point a session crosses cuts it
CUTS = (OVER_MAX_DURATION, EVERY_CHECK_POINT)


def check_cut(cut: str, where: str = "window.cut") -> None:
    if cut not in CUTS:
        raise ConfigError(
            f"{where} is {cut!r}",
            f"use {OVER_MAX_DURATION} (Stream Analytics: cut at a check point once the session has lasted"
            f" max_duration, the default) or {EVERY_CHECK_POINT} (cut at every check point)",
        )


def first_cut_delay(cut: str) -> int:
    """How many check-point intervals after the one holding a burst's first event its first
    cut falls at the end of: 2 (``over_max_duration``), or 1 (``every_check_point``)."""
    return 2 if cut == OVER_MAX_DURATION else 1


def longest_session_us(cut: str, max_duration_us: int) -> int:
    """The longest a session can last (end − start): 2 × max under ``over_max_duration``."""
    return first_cut_delay(cut) * max_duration_us


@dataclass(frozen=True)
class Sessions:
    """Per event, in the order of the ``times`` given: its session's start and end, and the
    first event of its burst (what a stream hands back to the next step)."""

    start_us: np.ndarray
    end_us: np.ndarray
    burst_from_us: np.ndarray


def cut_sessions(
    times: np.ndarray,
    codes: np.ndarray,
    gap_us: int,
    max_duration_us: int,
    shift_us: int,
    cut: str,
    known_from_us: np.ndarray,
) -> Sessions:
    """Sessions of events sorted by (key code, time). ``shift_us``: 1 µs when windows include
    their end (an event exactly ``gap`` after the previous one joins it; a check point closes
    the interval it ends), else 0. ``known_from_us``: per event, the first event of its burst
    as far as the caller knows (at most the event's own time)."""
    n = len(times)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Sessions(empty, empty, empty)
    interval = (times - shift_us) // max_duration_us
    apart = np.diff(times) >= gap_us + shift_us  # more than gap apart when the end is in, gap or more when not
    new_burst = np.r_[True, (codes[1:] != codes[:-1]) | apart]
    burst_id = np.cumsum(new_burst) - 1
    burst_firsts = np.flatnonzero(new_burst)
    burst_from = np.minimum(times[burst_firsts], np.minimum.reduceat(np.minimum(known_from_us, times), burst_firsts))
    first_cut = (burst_from - shift_us) // max_duration_us + first_cut_delay(cut)
    cut_before = (interval[1:] != interval[:-1]) & (interval[1:] >= first_cut[burst_id[1:]])
    new_session = new_burst | np.r_[False, cut_before]
    session_id = np.cumsum(new_session) - 1
    firsts = np.flatnonzero(new_session)
    lasts = np.r_[firsts[1:] - 1, n - 1]
    next_cut = np.maximum(interval[lasts] + 1, first_cut[burst_id[lasts]]) * max_duration_us
    session_end = np.minimum(times[lasts] + gap_us, next_cut)
    return Sessions(times[firsts][session_id], session_end[session_id], burst_from[burst_id])


def hold_until_us(cut: str, times: np.ndarray, close_at_us: np.ndarray, gap_us: int, shift_us: int) -> np.ndarray:
    """Per event, the watermark at which a stream may let it go: once its session is final
    (``close_at``) — and, under ``over_max_duration``, once no later event can continue its
    burst (``gap`` after it, as a window's end), so that one that does finds where it began."""
    if cut == EVERY_CHECK_POINT:
        return close_at_us
    return np.maximum(close_at_us, times + gap_us + shift_us)
