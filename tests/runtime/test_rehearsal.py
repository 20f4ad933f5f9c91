"""What a rehearsal says of the real restart: its start-up and its throughput, corrected for
what will be gone by then (synthetic runs, batches and CPU samples)."""

from types import SimpleNamespace as NS

import pytest

from tidegate.runtime.contention import CpuSample
from tidegate.runtime.rehearsal import RehearsalResult, phases, rehearsal_for_restart


def rehearsal(**overrides) -> RehearsalResult:
    figures = dict(seconds=100.0, first_output_s=95.0, input_events=40_000, run_id=7, per_batch_s=2.0,
                   per_event_s=1e-3, startup_s=60.0, catch_up_phase_s=40.0)
    return RehearsalResult(**(figures | overrides))


def test_the_same_backlog_and_no_contention_gives_the_rehearsals_own_time():
    # 40,000 events in 40 s: 1,000 ev/s; with nothing arriving the same backlog takes the same 40 s
    estimate = rehearsal_for_restart(rehearsal(), 40_000, 0.0)
    assert estimate.seconds == pytest.approx(100.0)
    assert (estimate.measured_s, estimate.startup_s, estimate.throughput_eps) == (100.0, 60.0, 1_000.0)


def test_each_phase_runs_faster_by_what_the_gone_processes_took_from_it():
    # start-up 1.5× faster (60 → 40 s), catch-up 2× (1,000 → 2,000 ev/s): 40 + 20,000 / 2,000
    estimate = rehearsal_for_restart(rehearsal(startup_speedup=1.5, catch_up_speedup=2.0), 20_000, 0.0)
    assert estimate.seconds == pytest.approx(40.0 + 10.0)
    assert "start-up 60.0 s measured, 40.0 s with 1.50× the CPU" in estimate.basis


def test_events_arriving_meanwhile_slow_the_catch_up_and_a_restart_that_cannot_keep_up_has_no_estimate():
    # 500 ev/s arrive: the 60 s start-up adds 30,000 events to the 10,000, read 500 ev/s net
    assert rehearsal_for_restart(rehearsal(), 10_000, 500.0).seconds == pytest.approx(60.0 + 40_000 / 500)
    never = rehearsal_for_restart(rehearsal(), 10_000, 1_000.0)
    assert never.seconds is None and "1,000 ev/s arrive" in never.basis


def test_a_resume_with_almost_nothing_to_read_still_waits_for_one_batch(monkeypatch):
    monkeypatch.delenv("TIDEGATE_TRIGGER_INTERVAL", raising=False)
    assert rehearsal_for_restart(rehearsal(), 3, 0.0).seconds == pytest.approx(60.0 + 2.0 + 1.0)  # the 1 s trigger


def test_without_its_phases_the_rehearsal_stands_as_measured_and_says_so():
    plain = rehearsal_for_restart(rehearsal(startup_s=None, catch_up_phase_s=None), 1_000, 0.0)
    assert plain.seconds == 100.0 and "could not be told apart" in plain.basis
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
