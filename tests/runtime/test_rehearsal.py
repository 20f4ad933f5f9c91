"""What a rehearsal says of the real restart: its start-up sped up, then the restart's
catch-up played out with what the rehearsal's batches cost, corrected for what will be gone
by then (synthetic runs, batches and CPU samples)."""

from types import SimpleNamespace as NS

import pytest

from tidegate.runtime.contention import CpuSample
from tidegate.runtime.rehearsal import RehearsalResult, phases, rehearsal_for_restart, restart_cost

# the rehearsal's catch-up: a look-back of 40,000 events, then what arrived meanwhile, then
# the live cadence — 1 ms an event, 2 s a first or second batch besides, 1.51 s a later one
BATCHES = ((40_000, 42.0), (2_000, 4.0), (500, 2.0), (480, 2.0))


def rehearsal(**overrides) -> RehearsalResult:
    figures = dict(seconds=110.0, first_output_s=95.0, input_events=42_980, run_id=7, per_batch_s=2.0,
                   per_event_s=1e-3, startup_s=60.0, catch_up_phase_s=50.0, catch_up_batches=BATCHES)
    return RehearsalResult(**(figures | overrides))


def test_the_rehearsals_batches_show_what_an_event_costs_and_what_a_batch_costs_besides():
    cost = restart_cost(rehearsal())
    assert cost.per_event_s == pytest.approx(1e-3, rel=1e-4)  # (42 − 4) s over (40,000 − 2,000) events
    fixed = (cost.first_s, cost.second_s, cost.fixed_s)
    assert fixed == (pytest.approx(2.0, rel=1e-4), pytest.approx(2.0, rel=1e-4), pytest.approx(1.51, rel=1e-4))


def test_the_same_backlog_with_nothing_arriving_takes_the_rehearsals_start_up_and_first_batch():
    estimate = rehearsal_for_restart(rehearsal(), 40_000, 0.0)
    assert estimate.seconds == pytest.approx(60.0 + 42.0)
    assert (estimate.measured_s, estimate.startup_s) == (110.0, 60.0)


def test_each_phase_runs_faster_by_what_the_gone_processes_took_from_it():
    # start-up 1.5× faster (60 → 40 s); every batch twice as fast: 1 s + 0.5 ms an event
    estimate = rehearsal_for_restart(rehearsal(startup_speedup=1.5, catch_up_speedup=2.0), 20_000, 0.0)
    assert estimate.seconds == pytest.approx(40.0 + 1.0 + 10.0)
    assert "start-up 60.0 s measured, 40.0 s with 1.50× the CPU" in estimate.basis


def test_events_arriving_meanwhile_are_read_batch_by_batch_until_the_driver_would_call_it_caught_up():
    # 100 ev/s: the first batch reads 10,000 + the start-up's 6,000 in 18 s; the second the
    # 1,800 that arrived meanwhile in 3.8 s, leaving 380 — within the 5 s slack
    estimate = rehearsal_for_restart(rehearsal(), 10_000, 100.0)
    assert estimate.seconds == pytest.approx(60.0 + 18.0 + 3.8) and "in 2 batches" in estimate.basis
    never = rehearsal_for_restart(rehearsal(), 10_000, 1_100.0)  # 1 ms an event: slower than they arrive
    assert never.seconds is None and "1,100 ev/s arrive" in never.basis


def test_a_resume_with_almost_nothing_to_read_still_pays_a_batchs_fixed_cost():
    assert rehearsal_for_restart(rehearsal(), 3, 0.0).seconds == pytest.approx(60.0 + 2.0 + 0.003)


def test_the_per_batch_limit_the_rehearsal_ran_under_cuts_the_restarts_batches_too():
    # 20,000 events in batches of 5,000: 7 s, 7 s, then 6.51 s twice
    limited = rehearsal(max_events_per_batch=5_000)
    assert rehearsal_for_restart(limited, 20_000, 0.0).seconds == pytest.approx(60.0 + 7 + 7 + 6.51 + 6.51)


def test_without_its_phases_the_rehearsal_stands_as_measured_and_says_so():
    plain = rehearsal_for_restart(rehearsal(startup_s=None, catch_up_phase_s=None), 1_000, 0.0)
    assert plain.seconds == 110.0 and "could not be told apart" in plain.basis
    assert rehearsal_for_restart(rehearsal(catch_up_batches=()), 1_000, 0.0).seconds == 110.0
    assert rehearsal_for_restart(rehearsal(seconds=None), 1_000, 0.0).seconds is None


def test_phases_split_at_the_first_batchs_start_and_measure_each_under_its_own_load():
    #  requested 100      first batch began 130 (ended 140)      caught up 160
    #  |---- start-up: duplicate busy ----|---- catch-up: machine idle beside it ----|
    run = NS(requested_at=100.0, caught_up_at=160.0)
    metrics = [NS(batch_id=2, processed_at=150.0, batch_seconds=5.0), NS(batch_id=1, processed_at=140.0,
                                                                         batch_seconds=10.0)]
    samples = []
    for t in range(100, 161, 5):
        before = min(t, 130) - 100  # 2 cores, saturated until 130: rehearsal 1, duplicate 0.5, others 0.5
        after = max(0, t - 130)  # then the rehearsal 1.5, duplicate 0.1, nothing else: 0.4 idle
        samples.append(CpuSample(float(t), 1.0 * before + 1.5 * after, 0.5 * before + 0.1 * after,
                                 2.0 * before + 1.6 * after))
    found = phases(run, metrics, samples, cores=2)
    assert (found["startup_s"], found["catch_up_phase_s"]) == (30.0, 30.0)
    assert found["startup_speedup"] == pytest.approx(1.5)  # the duplicate's half core, to the rehearsal's one
    assert found["catch_up_speedup"] == 1.0  # the 0.4 cores idle beside it: the duplicate took nothing
    assert found["load"]["startup"]["gone_cpu_s"] == pytest.approx(15.0)


def test_a_rehearsal_that_never_caught_up_has_no_phases():
    assert phases(NS(requested_at=0.0, caught_up_at=None), [], [], cores=2) == {}
