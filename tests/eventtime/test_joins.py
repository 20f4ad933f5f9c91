"""The temporal join in the pure core: the golden transcript as one batch and as a stream,
what state it holds, and that batching and replays from ``T − L`` never change the output.

Timeline of the golden case (BETWEEN 0 AND 15 minutes, key o1)::

    left  L1 12:00 ────────────── match range [12:00, 12:15] ──┐
    right        R1 12:05    R5 12:14                          │
    W = 12:05 → nothing: the row L1-R1 is at max(12:00, 12:05) = 12:05, not passed yet
    W = 12:15 → L1-R1 and L1-R5, once each
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from support import TRANSCRIPTS
from tidegate.errors import ConfigError
from tidegate.eventtime import joins as J
from tidegate.eventtime.durations import parse_time_us
from tidegate.eventtime.policy import NONE

GOLDEN = yaml.safe_load((TRANSCRIPTS / "join_golden.yaml").read_text())
MIN = 60_000_000
END = 2**62  # a frontier past everything: the end of the input


def at(hhmm: str) -> int:
    return parse_time_us(f"{GOLDEN['date']}T{hhmm}:00Z")


def golden_join(kind: str) -> J.TemporalJoin:
    lo, hi = GOLDEN["bound"]
    return J.TemporalJoin(lo * MIN, hi * MIN, kind)


EVENTS = {e[0]: {"side": e[1], "key": e[2], "s": at(e[3]), "pos": (e[4], i)} for i, e in enumerate(GOLDEN["events"])}


def run_ids(join: J.TemporalJoin, ids, prev=int(NONE), now=END, emit_after=None):
    """One step over the events ``ids``, per key: emitted [left, right, out] ids and held ids."""
    rows, held = [], []
    for key in sorted({EVENTS[i]["key"] for i in ids}):
        left = [i for i in ids if EVENTS[i]["key"] == key and EVENTS[i]["side"] == "left"]
        right = [i for i in ids if EVENTS[i]["key"] == key and EVENTS[i]["side"] == "right"]
        st = J.step(
            join,
            [EVENTS[i]["s"] for i in left],
            [EVENTS[i]["pos"] for i in left],
            [EVENTS[i]["s"] for i in right],
            [EVENTS[i]["pos"] for i in right],
            prev,
            now,
            emit_after,
        )
        rows += [
            (st.rows.out_us[k], left[li], None if ri < 0 else right[ri])
            for k, (li, ri) in enumerate(zip(st.rows.left, st.rows.right, strict=True))
        ]
        held += [i for i, k in zip(left, st.keep_left, strict=True) if k] + [
            i for i, k in zip(right, st.keep_right, strict=True) if k
        ]
    order = sorted(rows, key=lambda r: (r[0], EVENTS[r[1]]["pos"], EVENTS[r[2]]["pos"] if r[2] else (-1, -1)))
    return order, held


def test_one_batch_gives_the_transcripts_left_outer_rows_in_output_order():
    rows, held = run_ids(golden_join("left"), list(EVENTS))
    assert [[left, right, out] for out, left, right in rows] == [[li, ri, at(t)] for li, ri, t in GOLDEN["left_rows"]]
    assert held == []  # the end of the input: nothing left to wait for


def test_an_inner_join_gives_the_matched_rows_only():
    rows, _ = run_ids(golden_join("inner"), list(EVENTS))
    assert [[left, right] for _, left, right in rows] == [[li, ri] for li, ri, _ in GOLDEN["left_rows"] if ri]


def test_as_a_stream_each_row_is_emitted_once_when_the_watermark_passes_it_and_state_is_dropped():
    join, held, prev = golden_join("left"), [], int(NONE)
    for batch in GOLDEN["batches"]:
        now = at(batch["watermark"])
        rows, held = run_ids(join, held + batch["events"], prev, now)
        assert [[left, right] for _, left, right in rows] == batch["emits"], batch["watermark"]
        assert sorted(held) == sorted(batch["holds"]), batch["watermark"]
        prev = now


def test_an_unknown_watermark_emits_nothing_and_holds_everything():
    rows, held = run_ids(golden_join("left"), list(EVENTS), int(NONE), int(NONE))
    assert rows == [] and sorted(held) == sorted(EVENTS)


@pytest.mark.parametrize(
    "lo, hi, left_min, right_min, matched",
    [
        (0, 15, 0, 15, True),  # inclusive high end
        (0, 15, 0, 16, False),  # one minute past it
        (0, 15, 10, 9, False),  # a right event before the left one, with lo = 0
        (-5, 5, 10, 5, True),  # the right event may come first, within 5 min: inclusive low end
        (-10, -5, 10, 4, True),  # wholly before the left event: 6 min before is inside [−10, −5]
        (-10, -5, 10, 6, False),  # 4 min before is not
    ],
    ids=["hi-inclusive", "past-hi", "before-lo", "lo-inclusive", "before-left", "too-close"],
)
def test_the_bound_is_the_exact_difference_right_minus_left_both_ends_inclusive(lo, hi, left_min, right_min, matched):
    rows = J.join_rows(J.TemporalJoin(lo * MIN, hi * MIN), [left_min * MIN], [(0, 0)], [right_min * MIN], [(0, 1)])
    assert (len(rows.left) == 1) is matched


def test_an_unmatched_left_row_before_its_bound_waits_for_its_own_time_when_the_bound_is_in_the_past():
    join = J.TemporalJoin(-10 * MIN, -5 * MIN, "left")
    rows = J.join_rows(join, [60 * MIN], [(0, 0)], [], np.zeros((0, 2)))
    assert rows.out_us.tolist() == [60 * MIN]  # S + max(hi, 0), never before the left event


@pytest.mark.parametrize(
    "lo, hi, span",
    [(0, 15, 15), (-5, 10, 15), (5, 15, 15), (-15, -5, 15)],
    ids=["holds-0", "around-0", "after", "before"],
)
def test_the_span_reaches_from_an_output_row_back_to_its_oldest_event(lo, hi, span):
    assert J.TemporalJoin(lo * MIN, hi * MIN).span_us == span * MIN


def test_bad_bounds_and_types_are_refused_with_the_reason():
    with pytest.raises(ConfigError, match="low end is above its high end"):
        J.TemporalJoin(15 * MIN, 0)
    with pytest.raises(ConfigError, match="longer than the 7-day maximum"):
        J.TemporalJoin(0, 8 * 24 * 60 * MIN)
    with pytest.raises(ConfigError, match="join type is 'right'"):
        J.TemporalJoin(0, MIN, "right")


# -- batching and restarts ---------------------------------------------------------------

JOIN = J.TemporalJoin(-3 * MIN, 10 * MIN, "left")
EARLY, LATE = 5 * MIN, 2 * MIN


def random_stream(rng, n=140):
    """Left and right events of 4 keys over 2 log partitions on a minute grid (many ties and
    duplicates), in an arrival order the policy allows: S within [A − late, A + early]."""
    s = rng.integers(0, 200, n) * MIN
    arrival = s + rng.integers(-EARLY // MIN, LATE // MIN + 1, n) * MIN
    order = np.lexsort((np.arange(n), arrival))
    return {
        "s": s[order],
        "arrival": arrival[order],
        "side": rng.integers(0, 2, n)[order],
        "key": rng.integers(0, 4, n)[order],
        "pos": np.c_[rng.integers(0, 2, n), np.arange(n)],
    }


def run(stream, rng, emit_after=None, take=None):
    """The stage as the engine drives it: arrival order cut into random micro-batches; the
    frontier after each is at most the smallest time still to come. Rows: {(left, right): out}."""
    idx = np.flatnonzero(take) if take is not None else np.arange(len(stream["s"]))
    cuts = np.sort(rng.choice(np.arange(1, len(idx)), size=min(10, len(idx) - 1), replace=False))
    held, out, prev = np.zeros(0, dtype=np.int64), {}, int(NONE)
    batches = np.split(idx, cuts)
    for b, batch in enumerate(batches):
        rest = np.concatenate(batches[b + 1 :]) if b + 1 < len(batches) else []
        now = int(rng.integers(prev if prev != NONE else 0, stream["s"][rest].min() + 1)) if len(rest) else END
        rows = np.concatenate([held, rng.permutation(batch)])
        held = np.zeros(0, dtype=np.int64)
        for key in np.unique(stream["key"][rows]):
            mine = rows[stream["key"][rows] == key]
            left, right = mine[stream["side"][mine] == 0], mine[stream["side"][mine] == 1]
            st = J.step(
                JOIN,
                stream["s"][left],
                stream["pos"][left],
                stream["s"][right],
                stream["pos"][right],
                prev,
                now,
                emit_after,
            )
            for li, ri, o in zip(st.rows.left, st.rows.right, st.rows.out_us, strict=True):
                row = (int(left[li]), None if ri < 0 else int(right[ri]))
                assert row not in out, "emitted twice"
                out[row] = int(o)
            held = np.concatenate([held, left[st.keep_left], right[st.keep_right]])
        prev = now
    return out


@pytest.mark.parametrize("seed", range(12))
def test_any_cut_into_micro_batches_gives_the_batch_paths_rows_once_each(seed):
    stream = random_stream(np.random.default_rng(seed))
    whole = run(stream, np.random.default_rng([seed, 0]))
    # the batch path: one step over everything
    batch = {}
    for key in np.unique(stream["key"]):
        left = np.flatnonzero((stream["key"] == key) & (stream["side"] == 0))
        right = np.flatnonzero((stream["key"] == key) & (stream["side"] == 1))
        rows = J.join_rows(JOIN, stream["s"][left], stream["pos"][left], stream["s"][right], stream["pos"][right])
        batch |= {
            (int(left[li]), None if ri < 0 else int(right[ri])): int(o)
            for li, ri, o in zip(rows.left, rows.right, rows.out_us, strict=True)
        }
    assert whole == batch and len(batch) > 40
    for attempt in range(1, 4):
        assert run(stream, np.random.default_rng([seed, attempt])) == whole


@pytest.mark.parametrize("seed", range(12))
def test_a_replay_from_t_minus_lookback_emits_exactly_what_the_run_emitted_after_t(seed):
    rng = np.random.default_rng(seed)
    stream = random_stream(rng)
    whole = run(stream, np.random.default_rng([seed, 0]))
    t = int(rng.integers(20, 180)) * MIN
    lookback = JOIN.span_us + LATE + EARLY
    replayed = run(stream, np.random.default_rng([seed, 1]), emit_after=t, take=stream["arrival"] >= t - lookback)
    assert replayed == {row: o for row, o in whole.items() if o > t}


def test_reading_back_less_than_the_span_changes_the_answer():
    join = J.TemporalJoin(0, 10 * MIN, "left")
    s_left, s_right, t = 50 * MIN, 58 * MIN, 55 * MIN  # the row is at 58 > t; its left event at 50

    def replay(read_from_us):
        left = [s_left] if s_left >= read_from_us else []
        st = J.step(join, left, [(0, 0)] * len(left), [s_right], [(0, 1)], int(NONE), END, emit_after_us=t)
        return [(int(li), int(ri)) for li, ri in zip(st.rows.left, st.rows.right, strict=True)]

    assert replay(t - join.span_us) == [(0, 0)]
    assert replay(t - join.span_us // 4) == []
