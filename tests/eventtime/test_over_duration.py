"""Aggregates over a duration per event (``SUM/AVG/MIN/MAX/COUNT … OVER (… LIMIT DURATION …)``):
the group is the event and its key's events at most the duration before it, NULL left out."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tidegate.errors import ConfigError
from tidegate.eventtime import analytics as A
from tidegate.eventtime.analytic_functions import AvgOver, CountOver, MaxOver, MinOver, SumOver
from tidegate.jobspec import parse_spec

MIN = 60_000_000
TIMES = np.array([0, 2, 5, 9, 12]) * MIN  # one key, in analytic order


def results(fn, values, when=None):
    return A.evaluate(fn, TIMES, when, values).tolist()


def test_each_event_aggregates_itself_and_the_events_within_the_duration_before_it():
    values = [1, 2, 4, 8, 16]
    # 5 min: 0–5 holds 0, 2, 5; 9 holds 5, 9 (4 min back) but not 2; 12 holds 9, 12
    assert results(SumOver(5 * MIN), values) == [1, 3, 7, 12, 24]
    assert results(MinOver(5 * MIN), values) == [1, 1, 1, 4, 8]
    assert results(MaxOver(5 * MIN), values) == [1, 2, 4, 8, 16]
    assert results(AvgOver(5 * MIN), values) == [1.0, 1.5, 7 / 3, 6.0, 12.0]
    assert results(CountOver(5 * MIN, all_events=True), values) == [1, 2, 3, 2, 2]


def test_null_and_nan_are_left_out_and_a_group_of_none_is_null_but_counts_zero():
    values = [None, float("nan"), 3.0, None, None]
    assert results(SumOver(3 * MIN), values) == [None, None, 3.0, None, None]
    assert results(AvgOver(3 * MIN), values) == [None, None, 3.0, None, None]
    assert results(CountOver(3 * MIN), values) == [0, 0, 1, 0, 0]
    assert results(CountOver(3 * MIN, all_events=True), values) == [1, 2, 2, 1, 2]


def test_when_decides_which_events_are_in_a_group_including_the_event_itself():
    values = [10, 20, 30, 40, 50]
    when = np.array([True, False, True, False, True])
    assert results(SumOver(10 * MIN), values, when) == [10, 10, 40, 40, 80]


def test_a_float_sum_is_correctly_rounded_so_the_history_before_a_group_changes_nothing():
    values = [1e16, 1.0, -1e16, 1.0, 1.0]
    got = results(SumOver(20 * MIN), values)
    assert got == [math.fsum(values[: i + 1]) for i in range(5)] and got[-1] == 3.0


def test_min_and_max_of_records_compare_field_by_field_with_a_null_field_smallest():
    """How TopOne over a duration is written: a record per event of (key is not NULL, key,
    position, value); the group's extreme record is its top event."""
    values = [
        {"n": True, "k": 5.0, "p": -3, "v": "a"},
        {"n": False, "k": None, "p": -1, "v": "b"},
        {"n": True, "k": 5.0, "p": -2, "v": "c"},  # ties a on the key: the lower position (-2 > -3) wins MAX
        {"n": True, "k": 1.0, "p": -4, "v": "d"},
        {"n": True, "k": None, "p": -5, "v": "e"},  # a NULL field is smaller than any value
    ]
    assert [r["v"] for r in results(MaxOver(5 * MIN), values)] == ["a", "a", "c", "c", "d"]
    assert [r["v"] for r in results(MinOver(5 * MIN), values)] == ["a", "b", "b", "d", "e"]


def test_max_and_min_of_n_are_the_groups_n_extremes_from_the_extreme_on():
    """CollectTop over a duration: the group's top records, best first; NULL values left out,
    a group of fewer values gives fewer, one of none NULL."""
    values = [3, None, 7, 1, 5]
    # 5 min: {0}, {0, 2}, {0, 2, 5}, {5, 9}, {9, 12}
    assert results(MaxOver(5 * MIN, 2), values) == [[3], [3], [7, 3], [7, 1], [5, 1]]
    assert results(MinOver(5 * MIN, 2), values) == [[3], [3], [3, 7], [1, 7], [1, 5]]
    assert results(MaxOver(5 * MIN, 2), [None, None, 1, 2, 3]) == [None, None, [1], [2, 1], [3, 2]]
    records = [{"k": 5.0, "p": -3}, {"k": None, "p": -1}, {"k": 5.0, "p": -2}, {"k": 9.0, "p": -4}, {"k": 1.0, "p": -5}]
    assert results(MaxOver(20 * MIN, 3), records)[-1] == [records[3], records[2], records[0]]


def test_whole_numbers_sum_to_a_whole_number():
    assert results(SumOver(20 * MIN), [2**40, 2**40, 1, 1, 1])[-1] == 2**41 + 3


def spec(call: str):
    return parse_spec({
        "name": "recent", "version": 1, "payload": {"device": "string", "t": "string", "v": "double"},
        "timestamp_by": "t", "analytics": {"recent": call},
    })  # fmt: skip


def test_a_spec_writes_them_as_stream_analytics_does_and_reads_them_back():
    call = "AVG(v) OVER (PARTITION BY device LIMIT DURATION(minute, 5) WHEN v > 0)"
    s = spec(call)
    (a,) = s.analytics
    assert isinstance(a.function, AvgOver) and a.span_us == 5 * MIN and a.text() == call
    assert parse_spec(s.to_dict()) == s
    assert (
        spec("COUNT(*) OVER (LIMIT DURATION(minute, 5))").fingerprint
        != spec("COUNT(v) OVER (LIMIT DURATION(minute, 5))").fingerprint
    )
    top = spec("MAX(v, 3) OVER (PARTITION BY device LIMIT DURATION(minute, 5))")
    assert top.analytics[0].function == MaxOver(5 * MIN, 3) and parse_spec(top.to_dict()) == top
    assert top.analytics[0].text() == "MAX(v, 3) OVER (PARTITION BY device LIMIT DURATION(minute, 5))"
    fingerprints = {
        spec(f"MAX({args}) OVER (PARTITION BY device LIMIT DURATION(minute, 5))").fingerprint
        for args in ("v", "v, 1", "v, 3")
    }
    assert len(fingerprints) == 3, "MAX(v) and MAX(v, 1) differ: one is a value, the other an array"


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        ("SUM(v) OVER (PARTITION BY device)", "SUM(…) OVER needs LIMIT DURATION"),
        ("SUM(*) OVER (LIMIT DURATION(minute, 5))", "SUM(*) is not supported"),
        ("MAX(v, 2, 3) OVER (LIMIT DURATION(minute, 5))", "MAX over a duration takes 1 argument, got 3"),
        ("MAX(v, two) OVER (LIMIT DURATION(minute, 5))", "MAX's number of values 'two' is not a whole number"),
        ("MIN(v, 0) OVER (LIMIT DURATION(minute, 5))", "MIN's number of values is 0"),
        ("MAX(v, 1001) OVER (LIMIT DURATION(minute, 5))", "MAX's number of values is 1001"),
        ("MAX(v, 2) OVER (PARTITION BY device)", "MAX(…) OVER needs LIMIT DURATION"),
        ("AVG(v) OVER (LIMIT DURATION(day, 8))", "longer than the 7-day maximum"),
    ],
)
def test_a_call_the_spec_cannot_hold_is_refused_naming_the_field(call, problem):
    with pytest.raises(ConfigError) as err:
        spec(call)
    assert "analytics.recent" in err.value.problem and problem in err.value.problem


@pytest.mark.parametrize("seed", range(6))
def test_one_pass_results_equal_each_group_aggregated_on_its_own(seed):
    rng = np.random.default_rng(seed)
    n = 300
    times = np.sort(rng.integers(0, 120, n)) * MIN // 4
    floats = rng.normal(20, 8, n).round(3).astype(object)
    floats[rng.random(n) < 0.2] = None
    ints = rng.integers(-50, 50, n).astype(object)
    when = rng.random(n) < 0.7
    for values in (floats, ints):
        candidates = np.flatnonzero(when)
        functions = (SumOver(7 * MIN), AvgOver(7 * MIN), MinOver(3 * MIN), MaxOver(11 * MIN), CountOver(5 * MIN))
        for fn in (*functions, MaxOver(9 * MIN, 4), MinOver(6 * MIN, 3)):
            got = A.evaluate(fn, times, when, values)
            for i in range(n):
                group = [values[j] for j in candidates if j <= i and times[i] - times[j] <= fn.limit_us]
                naive = _naive(fn, [v for v in group if v is not None])
                if isinstance(fn, AvgOver) and naive is not None:  # the exact mean, rounded once
                    assert got[i] == pytest.approx(naive, rel=1e-15), (type(fn).__name__, i)
                else:
                    assert got[i] == naive, (type(fn).__name__, i)


def _naive(fn, kept: list):
    """The aggregate of one group, computed on its own."""
    if isinstance(fn, CountOver):
        return len(kept)
    if not kept:
        return None
    if isinstance(fn, SumOver):
        return math.fsum(kept) if any(isinstance(v, float) for v in kept) else sum(kept)
    if isinstance(fn, AvgOver):
        return math.fsum(kept) / len(kept)
    if fn.top is not None:
        return sorted(kept, reverse=isinstance(fn, MaxOver))[: fn.top]
    return min(kept) if isinstance(fn, MinOver) else max(kept)
