"""The tidegate source's planning, without Spark: options, batch cuts and the clock rule.

The log is real (files under tmp_path, manual clock); only Spark is left out, so these
run in milliseconds and pin down what the Spark tests then check end to end.
"""

from __future__ import annotations

import json

import pytest

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import parse_time_us
from tidegate.inputs.event_log import EventLog, RetentionError
from tidegate.inputs.planning import arrival_at, fair_shares, plan_batch_end, resolve_positions
from tidegate.lineage.offsets import SourceOffset
from tidegate.spark.pipeline.source_options import SourceOptions

T0 = parse_time_us("2026-03-01T12:00:00Z")
SECOND = 1_000_000


def event_log_with(tmp_path, arrivals_by_partition: list[list[int]], clock_us: int, **create) -> EventLog:
    """A manual-clock log; partition p holds events arriving at ``arrivals_by_partition[p]`` (seconds after T0)."""
    log = EventLog.create(tmp_path / "event-log", partitions=len(arrivals_by_partition), clock="manual", **create)
    log.advance_clock(T0)
    for p, seconds in enumerate(arrivals_by_partition):
        if seconds:
            log.append(
                p,
                [f"k{p}"] * len(seconds),
                [json.dumps({"p": p, "i": i}) for i in range(len(seconds))],
                arrival_times=[T0 + s * SECOND for s in seconds],
            )
    log.advance_clock(T0 + clock_us)
    return log


def start_of(*offsets: int, clock: int | None = None) -> SourceOffset:
    return SourceOffset(dict(enumerate(offsets)), clock)


# --- options -------------------------------------------------------------------------------


def test_options_are_case_insensitive_and_validated():
    opts = SourceOptions.parse({"EVENT_LOG": "/h", "maxeventsperbatch": "10", "maxArrivalSpanPerBatch": "10m"})
    assert (opts.max_events_per_batch, opts.max_arrival_span_us) == (10, 600 * SECOND)
    assert SourceOptions.parse({"event_log": "/h", "idleClockInterval": "off"}).idle_clock_interval_us is None
    assert SourceOptions.parse({"event_log": "/h", "startingOffsets": '{"0": 5, "1": -2}'}).starting == {0: 5, 1: -2}


@pytest.mark.parametrize(
    "options, message",
    [
        ({}, "no event log given"),
        ({"event_log": "/h", "startingOffset": "latest"}, r"unknown option\(s\) \['startingoffset'\]"),
        ({"event_log": "/h", "startingOffsets": "latest", "startingArrivalTime": "2026-01-01T00:00:00Z"}, "both"),
        ({"event_log": "/h", "startingOffsets": "{0: 1}"}, "startingOffsets: cannot read"),
        ({"event_log": "/h", "maxEventsPerBatch": "0"}, "maxEventsPerBatch: expected a whole number"),
        ({"event_log": "/h", "maxArrivalSpanPerBatch": "ten minutes"}, "maxArrivalSpanPerBatch: cannot read"),
        ({"event_log": "/h", "acceptPartial": "yes"}, "acceptPartial: expected true or false"),
    ],
)
def test_bad_options_name_the_option_and_the_fix(options, message):
    with pytest.raises(ConfigError, match=message) as info:
        SourceOptions.parse(options)
    assert info.value.fix


# --- starting positions ---------------------------------------------------------------------


def test_start_by_arrival_time_finds_the_first_event_at_or_after_it(tmp_path):
    log = event_log_with(tmp_path, [[0, 10, 20, 30], [5, 15, 25]], clock_us=40 * SECOND)
    snap = log.snapshot()
    at = resolve_positions(log, "earliest", T0 + 15 * SECOND, snap, accept_partial=False, field="start")
    assert at == {0: 2, 1: 1}
    assert resolve_positions(log, "latest", None, snap, accept_partial=False, field="start") == {0: 4, 1: 3}
    assert resolve_positions(log, {0: -1, 1: 1}, None, snap, accept_partial=False, field="start") == {0: 4, 1: 1}
    with pytest.raises(ConfigError, match="past the end of the log"):
        resolve_positions(log, {0: 9, 1: 0}, None, snap, accept_partial=False, field="startingOffsets")
    with pytest.raises(ConfigError, match="names partitions \\[0\\]"):
        resolve_positions(log, {0: 1}, None, snap, accept_partial=False, field="startingOffsets")


def test_a_start_deleted_by_retention_is_refused_unless_partial_results_are_accepted(tmp_path):
    # small segments and big payloads: every append gets its own segment, so retention can
    # delete the first ones
    log = event_log_with(tmp_path, [[]], clock_us=0, segment_bytes=1024, retention="1m")
    for s in (0, 10, 20, 200):
        log.append(0, ["k"], ["x" * 1024], arrival_times=[T0 + s * SECOND])
    log.advance_clock(T0 + 200 * SECOND)
    log.apply_retention()  # deletes what arrived before 12:02:20
    assert log.start_offset(0) == 3
    snap = log.snapshot()
    with pytest.raises(RetentionError, match="deleted by retention") as info:
        resolve_positions(log, "earliest", T0 + 5 * SECOND, snap, accept_partial=False, field="start")
    assert "acceptPartial" in info.value.fix
    with pytest.raises(RetentionError, match="offsets 1–2 were deleted"):
        resolve_positions(log, {0: 1}, None, snap, accept_partial=False, field="start")
    assert resolve_positions(log, "earliest", T0 + 5 * SECOND, snap, accept_partial=True, field="s") == {0: 3}
    assert resolve_positions(log, "earliest", None, snap, accept_partial=False, field="s") == {0: 3}
    # a running job that fell behind retention is told what it lost
    with pytest.raises(RetentionError, match="offsets 1–2 were deleted"):
        plan_batch_end(log, start_of(1, clock=T0), snap)


# --- cutting micro-batches ------------------------------------------------------------------


@pytest.mark.parametrize(
    "available, budget, expected",
    [
        ([10, 10, 10], 9, [3, 3, 3]),  # equal shares
        ([10, 10, 10], 10, [4, 3, 3]),  # a left-over event goes to the lowest partition
        ([1, 10, 10], 9, [1, 4, 4]),  # what p0 cannot use goes to the others
        ([0, 5, 50], 100, [0, 5, 50]),  # everything fits
        ([5, 5, 5], 2, [1, 1, 1]),  # a budget below the partitions with data is raised: none starves
        ([0, 0, 0], 5, [0, 0, 0]),
    ],
)
def test_fair_shares(available, budget, expected):
    assert fair_shares(available, budget) == expected


def test_an_uncut_batch_carries_the_snapshot_clock(tmp_path):
    log = event_log_with(tmp_path, [[0, 1, 2], [0, 1]], clock_us=100 * SECOND)
    end = plan_batch_end(log, start_of(0, 0), log.snapshot())
    assert end == start_of(3, 2, clock=T0 + 100 * SECOND)


def test_a_cut_batch_claims_no_more_than_its_first_unread_arrival(tmp_path):
    #   p0: 0s 1s 2s 3s 4s 5s     max 4 events → p0 gets 2, p1 gets 2
    #   p1: 7s 8s 9s              first unread: p0 at 2s, p1 at 9s → clock 2s (not the 100 s snapshot)
    log = event_log_with(tmp_path, [[0, 1, 2, 3, 4, 5], [7, 8, 9]], clock_us=100 * SECOND)
    end = plan_batch_end(log, start_of(0, 0), log.snapshot(), max_events=4)
    assert end == start_of(2, 2, clock=T0 + 2 * SECOND)
    # next batch: p1 has 1 left, so p0 gets 3 — reads [2, 5), cut before its 5 s event
    end2 = plan_batch_end(log, end, log.snapshot(), max_events=4)
    assert end2 == start_of(5, 3, clock=T0 + 5 * SECOND)  # p1 had 1, the spare event went to p0
    end3 = plan_batch_end(log, end2, log.snapshot(), max_events=4)
    assert end3 == start_of(6, 3, clock=T0 + 100 * SECOND)
    assert end.clock_us <= end2.clock_us <= end3.clock_us  # never back


def test_the_clock_promise_holds_for_every_cut(tmp_path):
    """After every planned batch, every unread event arrives at the recorded clock or later."""
    arrivals = [[0, 0, 3, 9, 9, 30], [1, 2, 2, 2, 50], [], [4, 60]]
    log = event_log_with(tmp_path, arrivals, clock_us=70 * SECOND)
    snap = log.snapshot()
    for budget in (1, 2, 3, 5, 8):
        start = start_of(0, 0, 0, 0)
        while True:
            end = plan_batch_end(log, start, snap, max_events=budget)
            if end == start:
                break
            unread = [T0 + s * SECOND for p, a in enumerate(arrivals) for s in a[end.offsets[p] :]]
            assert all(a >= end.clock_us for a in unread), (budget, end)
            start = end
        assert start.offsets == {0: 6, 1: 5, 2: 0, 3: 2}


def test_arrival_span_limits_each_batch_to_a_window_after_the_earliest_unread_arrival(tmp_path):
    #   p0: 0s 4s 8s 12s      span 5s from the earliest unread (0 s): arrivals ≤ 5 s → p0 [0, 2), p1 [0, 1)
    #   p1: 5s 20s
    log = event_log_with(tmp_path, [[0, 4, 8, 12], [5, 20]], clock_us=30 * SECOND)
    snap = log.snapshot()
    end = plan_batch_end(log, start_of(0, 0), snap, max_arrival_span_us=5 * SECOND)
    assert end == start_of(2, 1, clock=T0 + 8 * SECOND)
    end2 = plan_batch_end(log, end, snap, max_arrival_span_us=5 * SECOND)  # from 8 s: ≤ 13 s
    assert end2 == start_of(4, 1, clock=T0 + 20 * SECOND)
    assert arrival_at(log, 1, 1) == T0 + 20 * SECOND
    # both limits at once: the tighter one wins per partition
    both = plan_batch_end(log, start_of(0, 0), snap, max_events=2, max_arrival_span_us=5 * SECOND)
    assert both == start_of(1, 1, clock=T0 + 4 * SECOND)


def test_with_no_new_events_a_batch_runs_only_once_the_clock_moved_the_idle_interval(tmp_path):
    log = event_log_with(tmp_path, [[0, 1]], clock_us=10 * SECOND)
    done = start_of(2, clock=T0 + 10 * SECOND)
    assert plan_batch_end(log, done, log.snapshot(), idle_clock_interval_us=5 * SECOND) is done
    log.advance_clock(T0 + 15 * SECOND)
    later = plan_batch_end(log, done, log.snapshot(), idle_clock_interval_us=5 * SECOND)
    assert later == start_of(2, clock=T0 + 15 * SECOND)
    assert plan_batch_end(log, done, log.snapshot(), idle_clock_interval_us=None) is done  # "off"
    # the very first batch learns the clock even without events
    assert (
        plan_batch_end(log, start_of(2), log.snapshot(), idle_clock_interval_us=5 * SECOND).clock_us == T0 + 15 * SECOND
    )
