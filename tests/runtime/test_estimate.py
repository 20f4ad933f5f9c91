"""The catch-up model's arithmetic (SPEC §6): fitted batch cost, the catch-up formula."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from tidegate.runtime.estimate import catch_up_seconds, fit_batch_cost, processing_partitions, warm_batches


def test_the_fit_recovers_a_fixed_and_a_per_event_cost():
    samples = [(n, 2.0 + n * 1e-4) for n in (1_000, 5_000, 20_000, 50_000)]
    a, b = fit_batch_cost(samples)
    assert a == pytest.approx(2.0) and b == pytest.approx(1e-4)


def test_batches_of_one_size_give_the_mean_cost_of_an_event():
    assert fit_batch_cost([(1_000, 2.0), (1_000, 3.0)]) == (0.0, pytest.approx(5.0 / 2_000))
    assert fit_batch_cost([(0, 1.0)]) is None  # idle batches say nothing about events


def test_each_runs_first_batch_is_warm_up_not_work():
    rows = [NS(run_id=1, batch_id=0, input_events=100, batch_seconds=30.0),
            NS(run_id=1, batch_id=1, input_events=100, batch_seconds=1.0),
            NS(run_id=2, batch_id=5, input_events=50, batch_seconds=20.0),
            NS(run_id=2, batch_id=6, input_events=50, batch_seconds=0.5)]
    assert warm_batches(rows) == [(100, 1.0), (50, 0.5)]


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
