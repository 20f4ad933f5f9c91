"""Window assignment and the window step: each window emitted once, equal to the batch answer.

Timelines use minutes. Windows include their end and exclude their start, ``(a, b]``, as in
Stream Analytics, unless ``edges=START_INCLUSIVE`` asks for ``[a, b)``.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import yaml

from support import TRANSCRIPTS
from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.eventtime.sessions import EVERY_CHECK_POINT
from tidegate.eventtime.windows import (
    START_INCLUSIVE,
    HoppingWindow,
    SessionWindow,
    SlidingWindow,
    TumblingWindow,
    assign,
    next_close_us,
    step,
)
from tidegate.jobspec.parse_query import parse_window

M = 60_000_000  # one minute in µs


def windows_of(window, minutes, keys=None):
    s = np.array(minutes, dtype=np.int64) * M
    a = assign(window, s, None if keys is None else np.array(keys))
    return sorted(
        (int(i), int(st // M), int(en // M)) for i, st, en in zip(a.event_index, a.start_us, a.end_us, strict=True)
    )


@pytest.mark.parametrize(
    "window, minutes, expected",
    [
        # 0    5    10         events at 0, 4, 5, 6 → (-5,0] (0,5] (0,5] (5,10]: 5 is in the window it ends
        (TumblingWindow(5 * M), [0, 4, 5, 6], [(0, -5, 0), (1, 0, 5), (2, 0, 5), (3, 5, 10)]),
        # [start, end): 0 opens [0,5), 5 opens [5,10)
        (TumblingWindow(5 * M, edges=START_INCLUSIVE), [0, 4, 5], [(0, 0, 5), (1, 0, 5), (2, 5, 10)]),
        # offset 1: (1,6] — 1 belongs to (-4, 1], 6 to (1, 6]
        (TumblingWindow(5 * M, 1 * M), [1, 2, 6], [(0, -4, 1), (1, 1, 6), (2, 1, 6)]),
        # offset -1 (Stream Analytics' Offset(minute, -1)): (-1,4], (4,9]: the same windows as offset 4
        (TumblingWindow(5 * M, -1 * M), [4, 5], [(0, -1, 4), (1, 4, 9)]),
        (TumblingWindow(5 * M, 4 * M), [4, 5], [(0, -1, 4), (1, 4, 9)]),
        # hopping 10/5: t=7 is in (0,10] and (5,15]
        (HoppingWindow(10 * M, 5 * M), [7], [(0, 0, 10), (0, 5, 15)]),
        # hopping 10/5: t=5 is in (-5,5] and (0,10], not (5,15]
        (HoppingWindow(10 * M, 5 * M), [5], [(0, -5, 5), (0, 0, 10)]),
        # [start, end): t=5 is in [0,10) and [5,15), not [-5,5)
        (HoppingWindow(10 * M, 5 * M, edges=START_INCLUSIVE), [5], [(0, 0, 10), (0, 5, 15)]),
        # hopping 10/5 offset 2: t=7 is in (-3,7] and (2,12]
        (HoppingWindow(10 * M, 5 * M, 2 * M), [7], [(0, -3, 7), (0, 2, 12)]),
    ],
)
def test_fixed_windows_follow_the_interval_formulas(window, minutes, expected):
    assert windows_of(window, minutes) == expected


def test_sessions_cut_on_gap_and_at_every_multiple_of_max_duration():
    # cut: every_check_point (the rule before Stream Analytics' became the default; its
    # rows by default: tests/eventtime/test_sessions.py). gap 3, max 10; check points at 0,
    # 10, 20 (since the epoch), each the end of the interval before it; an event exactly gap
    # after the previous one joins its session:
    #   1 2 ┊ 6 8 10 ‖ 11 14 15 16 ‖ 20 ┊ 24
    #   [1,5] [6,10]     [11,19]     [20,20] [24,27]
    w = SessionWindow(3 * M, 10 * M, cut=EVERY_CHECK_POINT)
    got = windows_of(w, [1, 2, 6, 8, 10, 11, 14, 15, 16, 20, 24])
    sessions = sorted({(s, e) for _, s, e in got})
    assert sessions == [(1, 5), (6, 10), (11, 19), (20, 20), (24, 27)]


def test_start_inclusive_sessions_are_sparks():
    # an event exactly gap after the previous one opens a new session; a check point opens an interval:
    #   1 2 ┊ 5 ┊ 8 ‖ 10 11
    #   [1,5) [5,8) [8,10) [10,14)
    w = SessionWindow(3 * M, 10 * M, START_INCLUSIVE, EVERY_CHECK_POINT)
    got = windows_of(w, [1, 2, 5, 8, 10, 11])
    assert sorted({(s, e) for _, s, e in got}) == [(1, 5), (5, 8), (8, 10), (10, 14)]


def test_a_session_cut_at_every_check_point_does_not_depend_on_events_before_the_last_one():
    # the same events after 10, with or without a long run of events before: same sessions
    w = SessionWindow(3 * M, 10 * M, cut=EVERY_CHECK_POINT)
    tail = [11, 12, 14, 16, 18]
    alone = sorted({(s, e) for _, s, e in windows_of(w, tail)})
    with_history = sorted({(s, e) for _, s, e in windows_of(w, [1, 3, 5, 7, 9, 10] + tail)} - {(1, 10)})
    assert alone == with_history == [(11, 20)]


def test_sessions_are_per_key():
    w = SessionWindow(3 * M, 60 * M)
    # key 0: 1 3 → [1,6];  key 1: 2 4 → [2,7]  (apart, they would have merged as 1 2 3 4)
    got = windows_of(w, [1, 2, 3, 4], keys=[0, 1, 0, 1])
    assert got == [(0, 1, 6), (1, 2, 7), (2, 1, 6), (3, 2, 7)]


def test_sliding_windows_change_only_when_an_event_enters_or_leaves():
    # size 5, events at 0 and 2: (−5,0]{0} (−3,2]{0,2} (0,5]{2} ; exit (2,7] is empty
    w = SlidingWindow(5 * M)
    got = windows_of(w, [0, 2])
    ends = Counter(e for _, _, e in got)
    assert ends == {0: 1, 2: 2, 5: 1}


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: TumblingWindow(8 * 86_400 * 1_000_000), "size"),
        (lambda: HoppingWindow(5 * M, 10 * M), "hop"),
        (lambda: SessionWindow(10 * M, 5 * M), "gap"),
        (lambda: TumblingWindow(0), "size"),
        (lambda: TumblingWindow(5 * M, 5 * M), "offset"),
        (lambda: TumblingWindow(5 * M, -5 * M), "offset"),
        (lambda: HoppingWindow(10 * M, 5 * M, 5 * M), "offset"),
        (lambda: TumblingWindow(5 * M, edges="closed"), "edges"),
    ],
)
def test_bad_windows_are_refused_naming_the_field(make, field):
    with pytest.raises(ConfigError, match=field):
        make()


WINDOWS = [
    TumblingWindow(5 * M),
    TumblingWindow(5 * M, edges=START_INCLUSIVE),
    TumblingWindow(5 * M, -1 * M),
    HoppingWindow(6 * M, 2 * M, 1 * M),
    HoppingWindow(6 * M, 2 * M, 1 * M, START_INCLUSIVE),
    SlidingWindow(4 * M),
    SessionWindow(2 * M, 9 * M),
    SessionWindow(2 * M, 9 * M, START_INCLUSIVE),
    SessionWindow(2 * M, 9 * M, cut=EVERY_CHECK_POINT),
    SessionWindow(2 * M, 9 * M, START_INCLUSIVE, EVERY_CHECK_POINT),
]


def test_a_window_that_includes_its_end_is_final_only_once_the_watermark_passes_it():
    # W: every event with S < W was seen. At W = 5 an event at exactly 5 can still come and
    # belongs to (0, 5]: not final; at W = 5 min + 1 µs it is. [0, 5) is final at W = 5.
    s = np.array([1 * M, 3 * M])
    end_in = TumblingWindow(5 * M)
    assert len(step(end_in, s, 0, 5 * M).emit) == 0
    assert len(step(end_in, s, 5 * M, 5 * M + 1).emit) == 2
    assert len(step(TumblingWindow(5 * M, edges=START_INCLUSIVE), s, 0, 5 * M).emit) == 2


@pytest.mark.parametrize(
    "window",
    [*(w for w in WINDOWS if w.kind in ("tumbling", "hopping")), HoppingWindow(5 * M, 2 * M, -1 * M)],
    ids=lambda w: f"{w.kind}-{w.size_us // M}-{w.edges}-{w.offset_us // M}",
)
@pytest.mark.parametrize("seed", range(4))
def test_the_next_close_is_the_first_window_a_later_watermark_makes_final(window, seed):
    """Every window an event in the next two periods belongs to closes at the next close or
    later, and one closes exactly then — whatever the frontier, on a boundary or not."""
    rng = np.random.default_rng(seed)
    for frontier in [*rng.integers(0, 40 * M, 20), 10 * M, 10 * M + 1, 10 * M - 1, 0]:
        s = np.arange(frontier - 20 * M, frontier + 20 * M, M // 4)
        later = assign(window, s, np.zeros(len(s), dtype=np.int64)).close_at_us
        later = later[later > frontier]
        assert next_close_us(window, int(frontier)) == later.min()


def batch_answer(window, s, keys, final_frontier):
    a = assign(window, s, keys)
    closed = a.close_at_us <= final_frontier
    return Counter(
        (int(keys[i]), int(st), int(en), int(s[i]))
        for i, st, en in zip(a.event_index[closed], a.start_us[closed], a.end_us[closed], strict=True)
    )


@pytest.mark.parametrize(
    "window", WINDOWS, ids=lambda w: f"{w.kind}-{w.edges}-{getattr(w, 'offset_us', 0) // M}{getattr(w, 'cut', '')}"
)
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("grid", [1, M], ids=["us", "minute"])
def test_streaming_steps_emit_every_final_window_once_as_the_batch_would(window, seed, grid):
    """Events arrive in random batches, each at or after the current frontier (the policy
    guarantees it); the frontier advances at random. The union of emissions equals the batch
    assignment restricted to final windows, with no membership twice. On the minute grid,
    events and frontiers fall exactly on window edges and check points again and again.
    Session steps hand back where each kept event's burst began, and get it with it next."""
    rng = np.random.default_rng(seed)
    n = 400
    s = np.sort(rng.integers(0, 120 * M // grid, n) * grid).astype(np.int64)
    keys = rng.integers(0, 3, n)
    frontier = -(1 << 62)
    buffer_s = np.zeros(0, dtype=np.int64)
    buffer_k = np.zeros(0, dtype=np.int64)
    buffer_from = np.zeros(0, dtype=np.int64)
    emitted: Counter = Counter()
    i = 0
    while i < n:
        j = min(n, i + int(rng.integers(1, 40)))
        new_frontier = max(frontier, int(s[j - 1]) - int(rng.integers(0, 10 * M // grid)) * grid)
        # events must be at or after the old frontier: shift stragglers like the policy would
        batch_s = np.maximum(s[i:j], frontier)
        s[i:j] = batch_s
        all_s = np.concatenate([buffer_s, batch_s])
        all_k = np.concatenate([buffer_k, keys[i:j]])
        all_from = np.concatenate([buffer_from, batch_s])  # a new event knows only itself
        st = step(window, all_s, frontier, new_frontier, all_k, session_from_us=all_from)
        for e, ws, we in zip(st.emit.event_index, st.emit.start_us, st.emit.end_us, strict=True):
            emitted[(int(all_k[e]), int(ws), int(we), int(all_s[e]))] += 1
        buffer_s, buffer_k = all_s[st.keep], all_k[st.keep]
        buffer_from = (all_s if st.session_from_us is None else st.session_from_us)[st.keep]
        frontier, i = new_frontier, j
    assert sum(emitted.values()) > 0
    assert emitted == batch_answer(window, s, keys, frontier)


EDGES_GOLDEN = yaml.safe_load((TRANSCRIPTS / "window_edges_golden.yaml").read_text())


@pytest.mark.parametrize("case", EDGES_GOLDEN["windows"], ids=lambda c: c["name"])
def test_events_exactly_on_a_boundary_land_in_the_window_the_transcript_says(case):
    day = EDGES_GOLDEN["date"]
    s = np.array([parse_time_us(f"{day}T{t}:00Z") for t in EDGES_GOLDEN["events"]])
    a = assign(parse_window(case["window"]), s)
    counts = Counter(
        (format_time_us(int(st))[11:16], format_time_us(int(en))[11:16])
        for st, en in zip(a.start_us, a.end_us, strict=True)
    )
    assert sorted([st, en, n] for (st, en), n in counts.items()) == case["expect"]
