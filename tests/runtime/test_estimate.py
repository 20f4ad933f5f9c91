"""The catch-up model's arithmetic (SPEC §6): fitted batch cost, the catch-up formula."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from tidegate.runtime.estimate import (
    _startup_s,
    batch_samples,
    catch_up_seconds,
    fit_batch_cost,
    processing_partitions,
)


def test_the_fit_recovers_a_fixed_and_a_per_event_cost():
    samples = [(n, 2.0 + n * 1e-4, False) for n in (1_000, 5_000, 20_000, 50_000)]
    a, b = fit_batch_cost(samples)
    assert a == pytest.approx(2.0) and b == pytest.approx(1e-4)


def test_batches_of_one_size_give_the_mean_cost_of_an_event():
    assert fit_batch_cost([(1_000, 2.0, False), (1_000, 3.0, False)]) == (0.0, pytest.approx(5.0 / 2_000))
    assert fit_batch_cost([(0, 1.0, False)]) is None  # idle batches say nothing about events


def test_noise_among_small_batches_cannot_fit_a_cost_no_batch_allows():
    # live traffic: batches of ~20 events whose time is mostly noise; the slope alone would be
    # 0.3 s an event — slower than any recorded batch ran, and "never catches up" at 20 ev/s
    samples = [(18, 0.3, False), (22, 1.5, False), (20, 0.8, False), (21, 1.2, False), (19, 0.4, False)]
    a, b = fit_batch_cost(samples)
    assert b <= 0.3 / 18 and a >= 0
    assert all(b * n <= s + 1e-12 for n, s, _ in samples)
    assert catch_up_seconds(1_000, 20.0, a, b, 20.0, None)[0] is not None


def test_a_slope_lost_in_noise_leaves_the_fixed_cost_fixed():
    # live traffic at a 5 s trigger: ~100 events a batch, 1.5–3.7 s each, the time mostly the
    # batch's fixed cost; one catch-up batch of 937 events in 1.9 s. The slope is ≤ 0; the mean
    # cost of an event (0.024 s) would make a 5,000-event replay at 20 ev/s take ~250 s.
    samples = [(98, 2.5), (101, 3.7), (99, 1.5), (100, 3.1), (102, 2.0), (937, 1.93)] + [(100, 2.4)] * 10
    a, b = fit_batch_cost([(n, s, False) for n, s in samples])
    assert b == pytest.approx(1.93 / 937) and a > 1.5
    seconds, _ = catch_up_seconds(5_000, 20.0, a, b, 10.0, 20_000)
    assert seconds < 40


def test_each_runs_first_batch_is_marked_first():
    rows = [NS(run_id=1, batch_id=0, input_events=100, batch_seconds=30.0),
            NS(run_id=1, batch_id=1, input_events=100, batch_seconds=1.0),
            NS(run_id=2, batch_id=5, input_events=50, batch_seconds=20.0),
            NS(run_id=2, batch_id=6, input_events=50, batch_seconds=0.5)]
    assert batch_samples(rows) == [(100, 30.0, True), (100, 1.0, False), (50, 20.0, True), (50, 0.5, False)]


def test_a_replays_first_batch_shows_what_an_event_costs_where_live_batches_cannot():
    # recorded in a drill under live traffic (20 ev/s, a batch every 5 s on 2 busy cores):
    # live batches of ~100 events took ~2.5 s, nearly all of it fixed cost; the first batches
    # of starts, replays and a region's restore read 457 to 19,308 events in 7–11 s, warm-up
    # included. A restore that reads 19,000 events took ~20 s from request to caught up.
    live = [(n, s, False) for n, s in [(104, 2.5), (96, 2.6), (110, 2.3), (99, 2.7), (386, 2.2), (101, 2.5)] * 8]
    firsts = [(457, 10.56, True), (7_325, 7.66, True), (7_195, 7.28, True), (12_461, 9.35, True),
              (14_968, 8.05, True), (107, 6.84, True), (262, 8.58, True)]
    a, b = fit_batch_cost(live + firsts)
    assert b <= 8.05 / 14_968  # no more than the largest batch allows: ≤ 0.54 ms an event
    assert 2.0 < a < 3.0
    seconds, _ = catch_up_seconds(19_000, 20.0, a, b, 12.0, 20_000)
    assert 15 < seconds < 35  # where live batches alone (b ≤ 2.2/386) said ~130 s
    live_only, _ = catch_up_seconds(19_000, 20.0, *fit_batch_cost(live), 12.0, 20_000)
    assert live_only > 100


class Recorded:
    """The two queries _startup_s makes of the control database."""

    def __init__(self, runs, first_batches):
        self._runs, self._first = runs, first_batches

    def runs(self, job, kind=None, limit=20):
        return self._runs

    def batch_metrics(self, job, run_id=None, limit=None):
        return self._first.get(run_id, [])


def test_startup_is_the_first_batch_end_less_what_a_warm_batch_of_its_size_costs():
    # requested at 100; the driver's first batch (1,000 events) began at 112 and took 9 s,
    # where a warm batch of 1,000 events costs 1 + 1,000 × 1 ms = 2 s: startup 121 − 100 − 2
    db = Recorded([NS(id=1, requested_at=100.0)],
                  {1: [NS(processed_at=121.0, batch_seconds=9.0, input_events=1_000)]})
    assert _startup_s(db, "job", (1.0, 1e-3)) == pytest.approx(19.0)
    # without a fit: up to where the first batch began
    assert _startup_s(db, "job") == pytest.approx(12.0)
    # the median over runs; runs without a batch say nothing
    db = Recorded([NS(id=1, requested_at=0.0), NS(id=2, requested_at=0.0), NS(id=3, requested_at=0.0),
                   NS(id=4, requested_at=0.0)],
                  {1: [NS(processed_at=10.0, batch_seconds=1.0, input_events=0)],
                   2: [NS(processed_at=30.0, batch_seconds=1.0, input_events=0)],
                   3: [NS(processed_at=20.0, batch_seconds=1.0, input_events=0)]})
    assert _startup_s(db, "job", (0.0, 1e-3)) == pytest.approx(20.0)


def test_catch_up_counts_what_arrives_meanwhile_and_refuses_a_job_that_cannot_keep_up():
    # 10,000 events at 1 ms each, 1 s per batch (+1 s trigger), 10 s startup, nothing arriving
    seconds, batches = catch_up_seconds(10_000, 0.0, 1.0, 1e-3, 10.0, 5_000)
    assert batches == 2 and seconds == pytest.approx(10 + 2 * 2 + 10)
    # half the capacity already taken by live input: twice as long
    slower, _ = catch_up_seconds(10_000, 500.0, 0.0, 1e-3, 0.0, None)
    assert slower == pytest.approx(2 * (1 + 10))
    assert catch_up_seconds(10_000, 1_000.0, 0.0, 1e-3, 0.0, None) == (None, 0)


def test_local_masters_cap_the_partitions_processed_at_once():
    assert processing_partitions("local[2]", 4) == 2
    assert processing_partitions("local[8]", 4) == 4
    assert processing_partitions("spark://master:7077", 4) == 4
