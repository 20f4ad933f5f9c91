"""Window assignment and the window step: each window emitted once, equal to the batch answer.

Timelines use minutes; ``[a, b)`` windows unless said otherwise.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tidegate.errors import ConfigError
from tidegate.eventtime.windows import (
    HoppingWindow,
    SessionWindow,
    SlidingWindow,
    TumblingWindow,
    assign,
    step,
)

M = 60_000_000  # one minute in µs


def windows_of(window, minutes, keys=None):
    s = np.array(minutes, dtype=np.int64) * M
    a = assign(window, s, None if keys is None else np.array(keys))
    return sorted((int(i), int(st // M), int(en // M)) for i, st, en in zip(a.event_index, a.start_us, a.end_us))


@pytest.mark.parametrize(
    "window, minutes, expected",
    [
        # 0    5    10         events at 0, 4.99.., 5 → [0,5) [0,5) [5,10)
        (TumblingWindow(5 * M), [0, 4, 5], [(0, 0, 5), (1, 0, 5), (2, 5, 10)]),
        # offset 1: [1,6) — 0 belongs to [-4, 1)
        (TumblingWindow(5 * M, 1 * M), [0, 1, 6], [(0, -4, 1), (1, 1, 6), (2, 6, 11)]),
        # hopping 10/5: t=7 is in [0,10) and [5,15)
        (HoppingWindow(10 * M, 5 * M), [7], [(0, 0, 10), (0, 5, 15)]),
        # hopping 10/5: t=5 is in [0,10) and [5,15), not [-5,5)
        (HoppingWindow(10 * M, 5 * M), [5], [(0, 0, 10), (0, 5, 15)]),
    ],
)
def test_fixed_windows_follow_the_interval_formulas(window, minutes, expected):
    assert windows_of(window, minutes) == expected


def test_sessions_cut_on_gap_and_at_every_multiple_of_max_duration():
    # gap 3, max 10; check points at 0, 10, 20 (since the epoch):
    #   0 1 2 ┊ 6 8 ‖ 10 12 14 15 16 ‖ 20 21
    #   [0,5)   [6,10) [10,19)          [20,24)
    w = SessionWindow(3 * M, 10 * M)
    got = windows_of(w, [0, 1, 2, 6, 8, 10, 12, 14, 15, 16, 20, 21])
    sessions = sorted({(s, e) for _, s, e in got})
    assert sessions == [(0, 5), (6, 10), (10, 19), (20, 24)]


def test_a_session_cut_does_not_depend_on_events_before_the_last_check_point():
    # the same events after 10, with or without a long run of events before: same sessions
    w = SessionWindow(3 * M, 10 * M)
    tail = [10, 12, 14, 16, 18]
    alone = sorted({(s, e) for _, s, e in windows_of(w, tail)})
    with_history = sorted({(s, e) for _, s, e in windows_of(w, [1, 3, 5, 7, 9] + tail)} - {(1, 10)})
    assert alone == with_history == [(10, 20)]


def test_sessions_are_per_key():
    w = SessionWindow(3 * M, 60 * M)
    # key 0: 0 2 → [0,5);  key 1: 1 3 → [1,6)  (apart, they would have merged as 0 1 2 3)
    got = windows_of(w, [0, 1, 2, 3], keys=[0, 1, 0, 1])
    assert got == [(0, 0, 5), (1, 1, 6), (2, 0, 5), (3, 1, 6)]


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
    ],
)
def test_bad_windows_are_refused_naming_the_field(make, field):
    with pytest.raises(ConfigError, match=field):
        make()


WINDOWS = [
    TumblingWindow(5 * M),
    HoppingWindow(6 * M, 2 * M, 1 * M),
    SlidingWindow(4 * M),
    SessionWindow(2 * M, 9 * M),
]


def batch_answer(window, s, keys, final_frontier):
    a = assign(window, s, keys)
    closed = a.close_at_us <= final_frontier
    return Counter(
        (int(keys[i]), int(st), int(en), int(s[i])) for i, st, en in
        zip(a.event_index[closed], a.start_us[closed], a.end_us[closed])
    )


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: w.kind)
@pytest.mark.parametrize("seed", range(6))
def test_streaming_steps_emit_every_final_window_once_as_the_batch_would(window, seed):
    """Events arrive in random batches, each at or after the current frontier (the policy
    guarantees it); the frontier advances at random. The union of emissions equals the batch
    assignment restricted to final windows, with no membership twice."""
    rng = np.random.default_rng(seed)
    n = 400
    s = np.sort(rng.integers(0, 120 * M, n)).astype(np.int64)
    keys = rng.integers(0, 3, n)
    frontier = -(1 << 62)
    buffer_s = np.zeros(0, dtype=np.int64)
    buffer_k = np.zeros(0, dtype=np.int64)
    emitted: Counter = Counter()
    i = 0
    while i < n:
        j = min(n, i + int(rng.integers(1, 40)))
        new_frontier = max(frontier, int(s[j - 1]) - int(rng.integers(0, 10 * M)))
        # events must be at or after the old frontier: shift stragglers like the policy would
        batch_s = np.maximum(s[i:j], frontier)
        s[i:j] = batch_s
        all_s = np.concatenate([buffer_s, batch_s])
        all_k = np.concatenate([buffer_k, keys[i:j]])
        st = step(window, all_s, frontier, new_frontier, all_k)
        for e, ws, we in zip(st.emit.event_index, st.emit.start_us, st.emit.end_us):
            emitted[(int(all_k[e]), int(ws), int(we), int(all_s[e]))] += 1
        buffer_s, buffer_k = all_s[st.keep], all_k[st.keep]
        frontier, i = new_frontier, j
    assert sum(emitted.values()) > 0
    assert emitted == batch_answer(window, s, keys, frontier)
