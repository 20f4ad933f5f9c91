"""What a rehearsal says of the real restart: its start-up sped up, then the restart's
catch-up played out with what the rehearsal's batches cost, corrected for what will be gone
by then (synthetic runs, batches and CPU samples)."""

from types import SimpleNamespace as NS

import pytest

from tidegate.runtime.estimates.contention import CpuSample
from tidegate.runtime.estimates.rehearsal import (
    RehearsalResult,
    phases,
    rehearsal_for_restart,
    rehearsal_in_flight,
    restart_cost,
)

# the rehearsal's catch-up: a look-back of 40,000 events, then what arrived meanwhile, then
# the live cadence — 1 ms an event, 8 s a first batch besides (JIT, workers, state), 1.5 s a
# later one
BATCHES = ((40_000, 48.0), (2_000, 3.5), (500, 2.0), (480, 1.98))


def rehearsal(**overrides) -> RehearsalResult:
    figures = dict(
        seconds=110.0,
        first_output_s=95.0,
        input_events=42_980,
        run_id=7,
        per_batch_s=2.0,
        per_event_s=1e-3,
        startup_s=60.0,
        catch_up_phase_s=50.0,
        catch_up_batches=BATCHES,
    )
    return RehearsalResult(**(figures | overrides))


def test_the_rehearsals_batches_show_what_an_event_costs_and_what_a_batch_costs_besides():
    cost = restart_cost(rehearsal())
    assert cost.per_event_s == pytest.approx(1e-3)  # the later batches: 1.5 s more for 1,500 more events
    assert (cost.first_s, cost.second_s, cost.fixed_s) == (pytest.approx(8.0), pytest.approx(1.5), pytest.approx(1.5))


def test_the_same_backlog_with_nothing_arriving_takes_the_rehearsals_start_up_and_first_batch():
    estimate = rehearsal_for_restart(rehearsal(), 40_000, 0.0)
    assert estimate.seconds == pytest.approx(60.0 + 48.0)
    assert (estimate.measured_s, estimate.startup_s) == (110.0, 60.0)


def test_each_phase_runs_faster_by_what_the_gone_processes_took_from_it():
    # start-up 1.5× faster (60 → 40 s); every batch twice as fast: the first 4 s + 0.5 ms an event
    estimate = rehearsal_for_restart(rehearsal(startup_speedup=1.5, catch_up_speedup=2.0), 20_000, 0.0)
    assert estimate.seconds == pytest.approx(40.0 + 4.0 + 10.0)
    assert "start-up 60.0 s measured, 40.0 s with 1.50× the CPU" in estimate.basis


def test_events_arriving_meanwhile_are_read_batch_by_batch_until_the_driver_would_call_it_caught_up():
    # 100 ev/s: the first batch reads 10,000 + the start-up's 6,000 in 24 s; the second the
    # 2,400 that arrived meanwhile in 3.9 s, leaving 390 — within the 5 s slack
    estimate = rehearsal_for_restart(rehearsal(), 10_000, 100.0)
    assert estimate.seconds == pytest.approx(60.0 + 24.0 + 3.9) and "in 2 batches" in estimate.basis
    never = rehearsal_for_restart(rehearsal(), 10_000, 1_100.0)  # 1 ms an event: slower than they arrive
    assert never.seconds is None and "1,100 ev/s arrive" in never.basis


def test_a_resume_with_almost_nothing_to_read_still_pays_the_first_batchs_fixed_cost():
    assert rehearsal_for_restart(rehearsal(), 3, 0.0).seconds == pytest.approx(60.0 + 8.0 + 0.003)


def test_a_resume_keeps_what_the_rehearsals_first_batch_cost_besides_its_events():
    # recorded (bench_drills, a planned stop of the standby to the same version, 2026-11-25):
    # the rehearsal read 20,000 events (its per-batch limit) in 11.4 s, then 9,032 and 567;
    # the restart resumed with 416 events behind it and was caught up in 25.1 s. Fitted with
    # its second batch, the first batch's 8 s of fixed cost would have gone to its events, and
    # a resume's first batch taken 0.7 s
    r = rehearsal(
        seconds=35.9,
        startup_s=14.89,
        startup_speedup=1.326,
        catch_up_speedup=1.369,
        catch_up_batches=((20_000, 11.38), (9_032, 5.21), (567, 3.95)),
        max_events_per_batch=20_000,
    )
    estimate = rehearsal_for_restart(r, 416, 98.0)
    assert restart_cost(r).first_s > 5.0 and abs(estimate.seconds - 25.1) / 25.1 <= 0.25


def test_the_per_batch_limit_the_rehearsal_ran_under_cuts_the_restarts_batches_too():
    # 20,000 events in batches of 5,000: 13 s, then 6.5 s thrice
    limited = rehearsal(max_events_per_batch=5_000)
    assert rehearsal_for_restart(limited, 20_000, 0.0).seconds == pytest.approx(60.0 + 13 + 3 * 6.5)


def test_without_its_phases_the_rehearsal_stands_as_measured_and_says_so():
    plain = rehearsal_for_restart(rehearsal(startup_s=None, catch_up_phase_s=None), 1_000, 0.0)
    assert plain.seconds == 110.0 and "could not be told apart" in plain.basis
    assert rehearsal_for_restart(rehearsal(catch_up_batches=()), 1_000, 0.0).seconds == 110.0
    assert rehearsal_for_restart(rehearsal(seconds=None), 1_000, 0.0).seconds is None


def test_phases_split_at_the_first_batchs_start_and_measure_each_under_its_own_load():
    #  requested 100      first batch began 130 (ended 140)      caught up 160
    #  |---- start-up: duplicate busy ----|---- catch-up: machine idle beside it ----|
    run = NS(requested_at=100.0, caught_up_at=160.0)
    metrics = [
        NS(batch_id=2, processed_at=150.0, batch_seconds=5.0),
        NS(batch_id=1, processed_at=140.0, batch_seconds=10.0),
    ]
    samples = []
    for t in range(100, 161, 5):
        before = min(t, 130) - 100  # 2 cores, saturated until 130: rehearsal 1, duplicate 0.5, others 0.5
        after = max(0, t - 130)  # then the rehearsal 1.5, duplicate 0.1, nothing else: 0.4 idle
        samples.append(
            CpuSample(float(t), 1.0 * before + 1.5 * after, 0.5 * before + 0.1 * after, 2.0 * before + 1.6 * after)
        )
    found = phases(run, metrics, samples, cores=2)
    assert (found["startup_s"], found["catch_up_phase_s"]) == (30.0, 30.0)
    assert found["startup_speedup"] == pytest.approx(1.5)  # the duplicate's half core, to the rehearsal's one
    assert found["catch_up_speedup"] == 1.0  # the 0.4 cores idle beside it: the duplicate took nothing
    assert found["load"]["startup"]["gone_cpu_s"] == pytest.approx(15.0)
    assert found["load"]["startup"]["partner_busy"] is None  # no partner given


def test_phases_record_how_much_of_each_the_partner_duplicates_batches_ran():
    run = NS(requested_at=100.0, caught_up_at=160.0)
    metrics = [NS(batch_id=1, processed_at=140.0, batch_seconds=10.0)]
    samples = [
        CpuSample(float(t), 1.0 * (t - 100), 0.5 * (t - 100), 2.0 * (t - 100), 0.3 * (t - 100))
        for t in range(100, 161, 5)
    ]
    # the partner ran back to back until 130, then one 3 s batch in every 6 s
    partner = [NS(processed_at=100.0 + 3 * i, batch_seconds=3.0) for i in range(1, 11)]
    partner += [NS(processed_at=133.0 + 6 * i, batch_seconds=3.0) for i in range(5)] + [
        NS(processed_at=99.0, batch_seconds=None)
    ]
    found = phases(run, metrics, samples, cores=2, partner_metrics=partner)
    assert found["load"]["startup"]["partner_busy"] == pytest.approx(1.0)
    assert found["load"]["catch_up"]["partner_busy"] == pytest.approx(0.5)
    assert found["load"]["catch_up"]["partner_cpu_s"] == pytest.approx(9.0)


def test_a_rehearsal_that_never_caught_up_has_no_phases():
    assert phases(NS(requested_at=0.0, caught_up_at=None), [], [], cores=2) == {}


@pytest.mark.parametrize(
    ("holder", "run", "adopted"),
    [
        # a retried estimate: its first attempt's rehearsal of the same version still runs
        ("run-9", NS(id=9, kind="rehearsal", status="running", version=2, fingerprint="f"), True),
        ("run-9", NS(id=9, kind="rehearsal", status="stopping", version=2, fingerprint="f"), True),  # caught up
        ("run-9", NS(id=9, kind="rehearsal", status="running", version=1, fingerprint="e"), False),  # another version
        ("run-9", NS(id=9, kind="rehearsal", status="failed", version=2, fingerprint="f"), False),  # ended
        ("someone", None, False),
    ],
)
def test_a_rehearsal_of_the_same_version_in_flight_is_measured_rather_than_refused(holder, run, adopted):
    db = NS(lease=lambda name: NS(holder=holder), run=lambda run_id: run if run_id == 9 else None)
    found = rehearsal_in_flight(db, "fleet", "east", 2, "f")
    assert found is (run if adopted else None)
