"""LAG, LAST and ISFIRST in the pure core: the golden transcript, when each result is final,
and that batching, ties and replays from ``T − L`` never change an answer.

Timeline of the emission rule (one key, LAG within 10 min)::

    S:        12:00   12:04(p0) 12:04(p1)   12:20
    W = 12:04 → emits 12:00 only: a later event at exactly 12:04 from a lower
                partition would still sort before the 12:04 events
    W = 12:05 → emits both 12:04 events, each once
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from support import TRANSCRIPTS
from tidegate.errors import ConfigError
from tidegate.eventtime import analytics as A
from tidegate.eventtime.analytic_functions import AvgOver, CountOver, MaxOver, SumOver
from tidegate.eventtime.durations import parse_time_us
from tidegate.eventtime.policy import NONE
from tidegate.eventtime.windows import START_INCLUSIVE as A_START
from tidegate.jobspec.analytics import parse_analytics

GOLDEN = yaml.safe_load((TRANSCRIPTS / "analytics_golden.yaml").read_text())
PAYLOAD = {"device": "string", "temperature": "double"}
MIN = 60_000_000


def golden_time(hhmm: str) -> int:
    return parse_time_us(f"{GOLDEN['date']}T{hhmm}{':00' if hhmm.count(':') == 1 else ''}Z")


def golden_events():
    """The transcript's columns: system time, arrival time, log partition, offset, device,
    temperature (offsets count per partition, in row order)."""
    times = np.array([golden_time(e[0]) for e in GOLDEN["events"]])
    arrival = np.array([golden_time(e[4] if len(e) > 4 else e[0]) for e in GOLDEN["events"]])
    partition = np.array([e[1] for e in GOLDEN["events"]])
    offset = np.array([int((partition[:i] == p).sum()) for i, p in enumerate(partition)])
    device = np.array([e[2] for e in GOLDEN["events"]], dtype=object)
    temperature = np.array([float(e[3]) for e in GOLDEN["events"]], dtype=object)
    return times, arrival, partition, offset, device, temperature


def parts(spec, temperature):
    """(when, values, defaults) for the golden payload: the few expressions the transcript uses."""

    def sql(expr):
        if expr is None:
            return None
        if expr == "temperature":
            return temperature
        if expr == "temperature > 25":
            return np.array([t > 25 for t in temperature])
        return np.array([float(expr)] * len(temperature), dtype=object)

    return sql(spec.when), sql(spec.expression), sql(spec.default)


@pytest.mark.parametrize("case", GOLDEN["functions"], ids=lambda c: c["name"])
def test_each_function_gives_the_transcripts_values_per_device_in_analytic_order(case):
    (spec,) = parse_analytics({case["name"]: case["call"]}, PAYLOAD, (), frozenset())
    times, arrival, partition, offset, device, temperature = golden_events()
    when, values, defaults = parts(spec, temperature)
    got = np.empty(len(times), dtype=object)
    for d in np.unique(device):
        rows = np.flatnonzero(device == d)
        order = rows[A.analytic_order(times[rows], arrival[rows], partition[rows], offset[rows])]
        got[order] = A.evaluate(
            spec.function,
            times[order],
            None if when is None else when[order],
            None if values is None else values[order],
            None if defaults is None else defaults[order],
        )
    assert [None if v is None else float(v) for v in got] == case["expect"]


def test_a_result_is_emitted_once_the_watermark_passes_the_event_not_when_it_reaches_it():
    lag = A.Lag(10 * MIN)
    s = np.array([0, 4, 4, 20]) * MIN
    values = np.array([20.0, 22.0, 28.0, 29.0], dtype=object)
    first = A.step([lag], s, NONE, 4 * MIN, [None], [values], [None])
    assert first.emit.tolist() == [True, False, False, False]
    second = A.step([lag], s[first.keep], 4 * MIN, 5 * MIN, [None], [values[first.keep]], [None])
    assert second.emit.tolist() == [False, True, True, False]  # 12:00 was emitted before
    assert second.results[0].tolist() == [None, 20.0, 22.0, None]  # 12:20 is 16 min after 12:04


def test_state_keeps_only_what_limit_duration_and_the_isfirst_period_need():
    s = np.array([0, 5, 30, 59, 61, 70]) * MIN
    hot = np.array([True, False, True, True, True, False])
    lag = A.step([A.Lag(10 * MIN)], s, NONE, 65 * MIN, [hot], [s.astype(object)], [None])
    # pending: 70; history: within 10 min of the frontier (≥ 55) and matching WHEN
    assert s[lag.keep].tolist() == [59 * MIN, 61 * MIN, 70 * MIN]
    first = A.step([A.IsFirst(60 * MIN)], s, NONE, 65 * MIN, [None], [None], [None])
    assert s[first.keep].tolist() == [61 * MIN, 70 * MIN]  # the hour that holds 65 min began at 60


def test_isfirst_intervals_include_their_end_unless_start_inclusive_is_asked_for():
    # hours from the epoch; events at 1, 60 (exactly on the boundary), 61, 120, 121 minutes
    s = np.array([1, 60, 61, 120, 121]) * MIN
    assert A.evaluate(A.IsFirst(60 * MIN), s).tolist() == [1, 0, 1, 0, 1]  # (0, 60] holds 60
    assert A.evaluate(A.IsFirst(60 * MIN, A_START), s).tolist() == [1, 1, 0, 1, 0]  # [60, 120) holds 60


def test_isfirst_history_at_a_frontier_exactly_on_a_boundary_is_the_interval_that_ends_there():
    # W = 60: an event at exactly 60 may still come and belongs to (0, 60], so 5, 30 and 59
    # are still needed; with [start, end) it belongs to [60, 120), which nothing has reached
    s = np.array([0, 5, 30, 59, 61, 70]) * MIN
    end = A.step([A.IsFirst(60 * MIN)], s, NONE, 60 * MIN, [None], [None], [None])
    assert s[end.keep].tolist() == [5 * MIN, 30 * MIN, 59 * MIN, 61 * MIN, 70 * MIN]
    start = A.step([A.IsFirst(60 * MIN, A_START)], s, NONE, 60 * MIN, [None], [None], [None])
    assert s[start.keep].tolist() == [61 * MIN, 70 * MIN]


def test_equal_times_are_taken_in_arrival_order_then_partition_then_offset():
    s = np.array([5, 5, 5, 5]) * MIN
    arrival = np.array([5, 4, 5, 5]) * MIN
    partition = np.array([0, 1, 1, 0])
    offset = np.array([0, 0, 1, 1])
    assert A.analytic_order(s, arrival, partition, offset).tolist() == [1, 0, 3, 2]


def test_limit_duration_and_isfirst_period_over_seven_days_are_refused_with_the_field():
    with pytest.raises(ConfigError, match="LIMIT DURATION is 8d, longer than the 7-day maximum"):
        A.Lag(8 * 24 * 60 * MIN)
    with pytest.raises(ConfigError, match="ISFIRST period"):
        A.IsFirst(0)


# -- batching, ties, restarts -------------------------------------------------------------

FUNCTIONS = [A.Lag(10 * MIN), A.Lag(7 * MIN, 2), A.Last(15 * MIN), A.IsFirst(30 * MIN), A.IsFirst(30 * MIN, A_START),
             SumOver(12 * MIN), AvgOver(9 * MIN), MaxOver(20 * MIN), CountOver(6 * MIN, all_events=True)]  # fmt: skip
EARLY, LATE = 5 * MIN, 2 * MIN
SPAN = max(f.span_us for f in FUNCTIONS)


def random_stream(rng, n=160):
    """Events of 3 keys over 2 log partitions on a minute grid (many ties), with arrival times
    the policy would allow: S within [A − late, A + early]."""
    s = np.sort(rng.integers(0, 240, n)) * MIN
    partition = rng.integers(0, 2, n)
    arrival = s + rng.integers(-EARLY // MIN, LATE // MIN + 1, n) * MIN
    return {
        "s": s,
        "partition": partition,
        "offset": np.arange(n),
        "key": rng.integers(0, 3, n),
        "value": rng.normal(20, 5, n).round(1).astype(object),
        "when": rng.random(n) < 0.6,
        "arrival": arrival,
    }


def run(stream, rng, emit_after=None, take=None):
    """The stage as the engine drives it: random micro-batches in system-time order, the
    frontier after each at most the next batch's first time; only the kept rows carry over.
    Emitted rows: {(partition, offset): results}."""
    idx = np.flatnonzero(take) if take is not None else np.arange(len(stream["s"]))
    cuts = (
        np.sort(rng.choice(np.arange(1, len(idx)), size=min(12, len(idx) - 1), replace=False)) if len(idx) > 1 else []
    )
    batches = np.split(idx, cuts)
    buffer, out, prev = np.zeros(0, dtype=np.int64), {}, int(NONE)
    for b, batch in enumerate(batches):
        nxt = stream["s"][batches[b + 1][0]] if b + 1 < len(batches) else 10**15
        now = int(rng.integers(max(prev, stream["s"][batch].min()), nxt + 1)) if b + 1 < len(batches) else nxt
        if rng.random() < 0.5:  # often exactly on an event time or an ISFIRST boundary
            now = min(nxt, -(-now // MIN) * MIN)
        rows = np.concatenate([buffer, rng.permutation(batch)])
        for key in np.unique(stream["key"][rows]):
            mine = rows[stream["key"][rows] == key]
            mine = mine[
                A.analytic_order(
                    stream["s"][mine], stream["arrival"][mine], stream["partition"][mine], stream["offset"][mine]
                )
            ]
            st = A.step(
                FUNCTIONS,
                stream["s"][mine],
                prev,
                now,
                [
                    None,
                    stream["when"][mine],
                    stream["when"][mine],
                    None,
                    stream["when"][mine],
                    None,
                    stream["when"][mine],
                    stream["when"][mine],
                    None,
                ],
                [stream["value"][mine]] * 3 + [None, None] + [stream["value"][mine]] * 3 + [None],
                [None] * len(FUNCTIONS),
                emit_after,
            )
            for i in np.flatnonzero(st.emit):
                row = (int(stream["partition"][mine[i]]), int(stream["offset"][mine[i]]))
                assert row not in out, "emitted twice"
                out[row] = tuple(r[i] for r in st.results)
            buffer = (
                np.concatenate([buffer[stream["key"][buffer] != key], mine[st.keep]]) if len(buffer) else mine[st.keep]
            )
        prev = now
    return out


@pytest.mark.parametrize("seed", range(12))
def test_any_cut_into_micro_batches_gives_every_event_once_and_the_same_results(seed):
    rng = np.random.default_rng(seed)
    stream = random_stream(rng)
    whole = run(stream, np.random.default_rng([seed, 0]))
    assert len(whole) == len(stream["s"])
    for attempt in range(1, 4):
        assert run(stream, np.random.default_rng([seed, attempt])) == whole


@pytest.mark.parametrize("seed", range(12))
def test_a_replay_from_t_minus_lookback_emits_exactly_what_the_run_emitted_after_t(seed):
    rng = np.random.default_rng(seed)
    stream = random_stream(rng)
    whole = run(stream, np.random.default_rng([seed, 0]))
    t = int(rng.integers(20, 200)) * MIN
    lookback = SPAN + LATE + EARLY
    replayed = run(stream, np.random.default_rng([seed, 1]), emit_after=t, take=stream["arrival"] >= t - lookback)
    after_t = {row: v for row, v in whole.items() if stream["s"][row[1]] > t}
    assert replayed == after_t


@pytest.mark.parametrize(
    "fn, times_min, when",
    [
        # the second event looks back 9.5 min to the first
        (A.Lag(10 * MIN), [51, 60.5], [True, True]),
        # the second fails WHEN: its LAST is the first, 9.5 min back
        (A.Last(10 * MIN), [51, 60.5], [True, False]),
        # the hour [60, 120) began with the first event: the second is not first
        (A.IsFirst(60 * MIN), [61, 119.5], [True, True]),
    ],
    ids=["lag", "last", "isfirst"],
)
def test_each_operator_needs_its_own_span_read_back_and_no_more(fn, times_min, when):
    s = (np.array(times_min) * MIN).astype(np.int64)
    t = s[1] - 30 * 1_000_000  # the first output time: just before the second event
    values, whens = np.array([1.0, 2.0], dtype=object), np.array(when)

    def replay(read_from_us):
        take = s >= read_from_us  # on time: arrival = system time
        st = A.step([fn], s[take], NONE, 10**15, [whens[take]], [values[take]], [None], emit_after_us=t)
        return list(st.results[0][st.emit])

    full = list(A.evaluate(fn, s, whens, values, None))[1:]
    assert replay(t - (fn.span_us + LATE + EARLY)) == full
    assert replay(t - fn.span_us // 2) != full  # reading back less than the span changes the answer
