"""Where sessions are cut: by the gap, and at check points as Stream Analytics cuts them —
once a session has lasted its maximum duration — or, asked for, at every check point.

Timelines use minutes; check points of a 10-minute maximum at 0, 10, 20 …, each ending the
interval before it (``‖``: a cut, ``┊``: a check point the session goes on through).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from support import SESSIONS_GOLDEN, session_times_us
from tidegate.eventtime.durations import format_time_us
from tidegate.eventtime.sessions import EVERY_CHECK_POINT
from tidegate.eventtime.windows import START_INCLUSIVE, SessionWindow, assign, step
from tidegate.jobspec.parse_query import parse_window

M = 60_000_000  # one minute in µs


def sessions_of(window, minutes, keys=None):
    a = assign(window, np.array(minutes, dtype=np.int64) * M, None if keys is None else np.array(keys))
    return sorted(Counter((int(s // M), int(e // M)) for s, e in zip(a.start_us, a.end_us, strict=True)).items())


def test_a_session_goes_on_through_the_first_check_point_and_is_cut_at_the_next():
    # gap 3, max 10: 6 8 10 11 14 15 16 ┊ 20 is one burst until 16; at 10 it has lasted 4, at 20
    # it would have lasted 14 — but it timed out at 19. The old rule cut it at 10.
    #   1 2 · 6 8 10 ┊ 11 14 15 16 · 20 · 24
    #   [1,5] [6,19]                 [20,23] [24,27]
    minutes = [1, 2, 6, 8, 10, 11, 14, 15, 16, 20, 24]
    assert sessions_of(SessionWindow(3 * M, 10 * M), minutes) == [
        ((1, 5), 2), ((6, 19), 7), ((20, 23), 1), ((24, 27), 1)
    ]  # fmt: skip
    assert sessions_of(SessionWindow(3 * M, 10 * M, cut=EVERY_CHECK_POINT), minutes) == [
        ((1, 5), 2), ((6, 10), 3), ((11, 19), 4), ((20, 20), 1), ((24, 27), 1)
    ]  # fmt: skip


def test_after_its_first_cut_a_burst_is_cut_at_every_check_point():
    # an event every 2 minutes from 1 to 45: 1 … 10 ┊ 11 … 20 ‖ 21 … 30 ‖ 31 … 40 ‖ 41 … 45
    # the first session lasts 19 (up to 2 × max); the window opened at 20 has lasted 10 at 30
    minutes = list(range(1, 46, 2))
    assert sessions_of(SessionWindow(3 * M, 10 * M), minutes) == [
        ((1, 20), 10), ((21, 30), 5), ((31, 40), 5), ((41, 48), 3)
    ]  # fmt: skip


@pytest.mark.parametrize(
    "edges, expected",
    [
        # the first event exactly on 10 belongs to (0, 10]: cut at 20, having lasted exactly max
        (None, [((10, 20), 11), ((21, 27), 5)]),
        # under [start, end) it opens [10, 20): cut at 30, up to 2 × max
        (START_INCLUSIVE, [((10, 27), 16)]),
    ],
    ids=["end-inclusive", "start-inclusive"],
)
def test_a_session_opened_exactly_on_a_check_point(edges, expected):
    minutes = list(range(10, 26))  # every minute, 10 … 25
    window = SessionWindow(2 * M, 10 * M) if edges is None else SessionWindow(2 * M, 10 * M, edges)
    assert sessions_of(window, minutes) == expected


def test_no_session_lasts_longer_than_twice_its_maximum():
    rng = np.random.default_rng(7)
    for edges in (None, START_INCLUSIVE):
        w = SessionWindow(2 * M, 10 * M) if edges is None else SessionWindow(2 * M, 10 * M, edges)
        s = np.sort(rng.integers(0, 600 * M, 2000))
        a = assign(w, s)
        assert (a.end_us - a.start_us).max() <= w.longest_us == 20 * M
        assert (a.end_us > a.start_us).all()  # never empty: a cut is at least one interval away


def test_a_step_needs_where_a_burst_began_once_its_first_events_have_left():
    # 1 … 19 every 2, then 21 … 29: the session of 1 … 19 closed at 20 and its events left the
    # buffer; 21 continues the burst, so its session is cut at 30 — only if the step is told
    # the burst began at 1. Told nothing, 21 looks like a fresh start and runs on to 40.
    w = SessionWindow(3 * M, 10 * M)
    first = np.arange(1, 21, 2) * M
    st = step(w, first, 0, 22 * M)
    assert len(st.emit) == 10 and set(st.emit.end_us) == {20 * M}
    kept, kept_from = first[st.keep], st.session_from_us[st.keep]
    assert list(kept // M) == [19] and list(kept_from // M) == [1]  # 19 stays until 22 (gap after it)
    later = np.arange(21, 30, 2) * M
    s = np.concatenate([kept, later])
    told = step(w, s, 22 * M, 60 * M, session_from_us=np.concatenate([kept_from, later]))
    assert sorted({(int(a // M), int(b // M)) for a, b in zip(told.emit.start_us, told.emit.end_us, strict=True)}) == [
        (21, 30)
    ]
    untold = step(w, later, 22 * M, 60 * M)  # and without 19, kept for that
    assert {int(b // M) for b in untold.emit.end_us} == {32}  # 29 + gap: no cut before 40


def test_sessions_of_each_key_have_their_own_bursts():
    w = SessionWindow(3 * M, 10 * M)
    # key 0 from 1, key 1 from 9: key 0 is cut at 20, key 1 (its first event in (0, 10]) too
    minutes = [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21] + [9, 12, 15, 18, 21]
    keys = [0] * 11 + [1] * 5
    a = assign(w, np.array(minutes) * M, np.array(keys))
    got = Counter((k, int(s // M), int(e // M)) for k, s, e in zip(np.array(keys)[a.event_index], a.start_us, a.end_us,
                                                                  strict=True))  # fmt: skip
    assert got == {(0, 1, 20): 10, (0, 21, 24): 1, (1, 9, 20): 4, (1, 21, 24): 1}


@pytest.mark.parametrize("case", SESSIONS_GOLDEN["sessions"], ids=lambda c: c["name"])
def test_the_core_gives_the_golden_sessions(case):
    a = assign(parse_window(case["window"]), np.array(session_times_us(case), dtype=np.int64))
    ends = zip(a.start_us, a.end_us, strict=True)
    counts = Counter((format_time_us(int(s))[11:16], format_time_us(int(e))[11:16]) for s, e in ends)
    assert sorted([s, e, n] for (s, e), n in counts.items()) == case["expect"]
