"""The catch-up model's arithmetic (semantics §6): fitted batch cost, the catch-up formula."""

from __future__ import annotations

import statistics
from types import SimpleNamespace as NS

import pytest

from recorded_control import Recorded, recorded_at, rehearsal_estimate
from tidegate.runtime.estimates.estimate import (
    BatchCost,
    BatchSample,
    catch_up_seconds,
    fit_batch_cost,
    model_estimate,
    never_catches_up,
    processing_partitions,
    recorded_samples,
)

# Recorded in the live walk-through (standalone Airflow, 100 ev/s, both duplicates on 2 cores):
# the two deploy starts' batches (events, seconds) — each start's first two read its backlog,
# the rest what arrived during the batch before.
DEPLOY_WEST = [
    (4345, 14.76),
    (1585, 4.51),
    (450, 3.11),
    (336, 3.99),
    (422, 4.46),
    (522, 2.37),
    (242, 2.11),
    (229, 2.18),
    (257, 3.0),
    (319, 1.82),
    (206, 2.57),
    (245, 2.06),
    (248, 2.02),
    (215, 1.69),
    (206, 2.55),
    (263, 2.41),
    (274, 2.27),
    (244, 1.8),
    (185, 1.73),
    (204, 1.54),
    (183, 1.77),
    (189, 1.38),
    (159, 1.14),
    (134, 1.61),
]
DEPLOY_EAST = [
    (4432, 14.43),
    (1589, 6.68),
    (686, 3.4),
    (361, 3.56),
    (395, 2.94),
    (312, 3.41),
    (356, 2.23),
    (265, 2.05),
    (223, 2.58),
    (285, 2.05),
    (247, 2.27),
    (225, 2.54),
    (277, 2.46),
    (277, 2.34),
    (233, 2.1),
    (232, 2.19),
    (231, 3.31),
    (332, 1.69),
    (192, 1.95),
    (208, 2.32),
    (257, 1.8),
    (189, 1.87),
    (189, 1.9),
    (229, 1.78),
]
REPLAY_WEST = [(32354, 15.83), (1805, 5.05), (557, 3.22)]  # the planned stop's replay of west: caught up in 39.1 s


def run(batches, caught_up_after=2):
    return [BatchSample(n, s, i, i < caught_up_after) for i, (n, s) in enumerate(batches)]


def test_the_fit_recovers_each_kind_of_batchs_fixed_cost_and_a_per_event_cost():
    samples = []
    for n in (1_000, 20_000, 50_000):
        samples += [
            BatchSample(n, 10.0 + n * 1e-4, 0, True),
            BatchSample(n // 10, 3.0 + n // 10 * 1e-4, 1, True),
            BatchSample(100, 1.0 + 100 * 1e-4, 2, False),
        ]
    cost = fit_batch_cost(samples)
    assert cost.slope_measured and cost.per_event_s == pytest.approx(1e-4)
    assert (cost.first_s, cost.second_s, cost.fixed_s) == (pytest.approx(10.0), pytest.approx(3.0), pytest.approx(1.0))
    assert cost.seconds(5_000, 0) == pytest.approx(10.5) and cost.seconds(5_000, 7) == pytest.approx(1.5)


def test_batches_of_one_size_measure_no_per_event_cost_only_what_a_batch_costs():
    cost = fit_batch_cost([BatchSample(1_000, 2.0, 0, True), BatchSample(1_000, 3.0, 2, True)])
    assert not cost.slope_measured and cost.per_event_s == 0.0
    assert (cost.first_s, cost.second_s, cost.fixed_s) == (2.0, 3.0, 3.0)  # no second: the later ones'
    assert fit_batch_cost([BatchSample(0, 1.0, 0, True)]) is None  # idle batches say nothing about events


def test_batches_of_a_caught_up_job_show_no_per_event_cost():
    # live batches are as large as the batch before was slow: fitted, their slope would be
    # ~2 ms an event, and a 30,000-event replay would take a minute more than it did
    cost = fit_batch_cost(run(DEPLOY_WEST) + run(DEPLOY_EAST))
    assert not cost.slope_measured and cost.per_event_s == 0.0
    assert 14 < cost.first_s < 15 and 5 < cost.second_s < 6 and 2 < cost.fixed_s < 3


def test_the_walk_through_replays_are_estimated_within_a_quarter():
    # west, before any replay was recorded: only the deploys' starts (14.9 and 16.2 s) to go by
    cost = fit_batch_cost(run(DEPLOY_WEST) + run(DEPLOY_EAST))
    seconds, batches = catch_up_seconds(30_162, 103.0, cost, 15.5, None, trigger_s=1.0, slack_s=5.0)
    assert abs(seconds - 39.1) / 39.1 <= 0.25 and batches == 3
    # east, after west's replay: its first batch of 32,354 events shows what an event costs
    cost = fit_batch_cost(run(DEPLOY_WEST) + run(DEPLOY_EAST) + run(REPLAY_WEST))
    assert cost.slope_measured and 2e-5 < cost.per_event_s < 1e-4
    seconds, _ = catch_up_seconds(47_146, 106.0, cost, 14.9, None, trigger_s=1.0, slack_s=5.0)
    assert abs(seconds - 36.4) / 36.4 <= 0.25


# The same walk-through on 2026-11-25 beside another engineer's test run (load 11–13): each
# start's first batches (events, seconds); the rehearsals' corrections for the restart as recorded.
LOADED_DEPLOY = [[(5668, 15.9), (1761, 5.5), (574, 3.0)], [(5668, 15.4), (1743, 6.1), (641, 3.5)]]
LOADED_REHEARSAL_WEST = ([(37787, 39.1), (4186, 11.3), (1177, 7.4), (849, 7.1)], 2.05)
LOADED_REPLAY_WEST = [(52532, 35.9), (4143, 8.6), (938, 4.9), (534, 5.2), (581, 4.5)]
LOADED_REHEARSAL_EAST = ([(51736, 52.9), (5986, 8.8), (1018, 5.8), (655, 6.0)], 2.02)
LOADED_REPLAY_EAST = [(63853, 35.6), (13083, 8.8)]  # what the model is to foresee


def test_east_after_west_under_load_foresees_the_replays_first_batches():
    # east's estimate sees the deploys (two at once: half the machine each), both rehearsals
    # as corrected for the restart, and west's replay as it ran
    def counted(batches, slowdown=1.0):
        return [BatchSample(n, s / slowdown, i, True) for i, (n, s) in enumerate(batches)]

    cost = fit_batch_cost(
        counted(LOADED_DEPLOY[0], 2)
        + counted(LOADED_DEPLOY[1], 2)
        + counted(*LOADED_REHEARSAL_WEST)
        + counted(LOADED_REPLAY_WEST)
        + counted(*LOADED_REHEARSAL_EAST)
    )
    (first_n, first_s), (second_n, second_s) = LOADED_REPLAY_EAST
    assert abs(cost.seconds(first_n, 0) - first_s) / first_s <= 0.10
    assert abs(cost.seconds(second_n, 1) - second_s) / second_s <= 0.15


def test_a_slope_is_no_more_than_a_batch_allows_and_never_below_zero():
    # first batches whose time is mostly noise: the slope alone would be 0.3 s an event
    noisy = [BatchSample(18, 0.3, 0, True), BatchSample(40, 1.5, 0, True), BatchSample(20, 0.8, 0, True)]
    cost = fit_batch_cost(noisy)
    assert cost.per_event_s <= 0.3 / 18
    falling = [BatchSample(457, 10.56, 0, True), BatchSample(7_325, 7.66, 0, True), BatchSample(14_968, 8.05, 0, True)]
    assert fit_batch_cost(falling).per_event_s == 0.0


def test_the_catch_up_is_played_out_batch_by_batch():
    one_ms = BatchCost(fixed_s=1.0, per_event_s=1e-3, first_s=1.0, second_s=1.0)
    # 10,000 events at 1 ms, 1 s fixed, 5,000 a batch, 10 s start-up, nothing arriving
    assert catch_up_seconds(10_000, 0.0, one_ms, 10.0, 5_000, slack_s=5.0) == (pytest.approx(10 + 6 + 6), 2)
    # 500 ev/s arriving: the 10 s batch leaves 5,000 behind, the 5 s one 2,500 — the slack
    events_only = BatchCost(0.0, 1e-3, 0.0, 0.0)
    assert catch_up_seconds(10_000, 500.0, events_only, 0.0, None, slack_s=5.0) == (pytest.approx(15.0), 2)
    # a first batch shorter than the trigger but longer than the slack: the second waits for
    # the next trigger and reads what arrived meanwhile
    warming = BatchCost(fixed_s=0.1, per_event_s=0.0, first_s=0.8, second_s=0.1)
    assert catch_up_seconds(100, 100.0, warming, 0.0, None, trigger_s=1.0, slack_s=0.5) == (pytest.approx(1.1), 2)


def test_a_job_whose_capped_batches_read_less_than_arrives_never_catches_up_and_says_why():
    # events measured free, but a batch of at most 600 takes 1.2 s: 500 ev/s against 550
    free_events = BatchCost(fixed_s=1.2, per_event_s=0.0, first_s=5.0, second_s=1.2)
    assert catch_up_seconds(2_000, 550.0, free_events, 10.0, 600, trigger_s=1.0) == (None, 0)
    note = never_catches_up(free_events, 550.0, 600, "the job", trigger_s=1.0)
    assert note == (
        "the job reads at most 500 ev/s (at most 600 events a batch) but 550 ev/s arrive: it never catches up"
    )
    # without the cap what an event costs bounds it
    one_ms = BatchCost(fixed_s=0.1, per_event_s=1e-3, first_s=0.1, second_s=0.1)
    assert "reads at most 1,000 ev/s but 1,200 ev/s arrive" in never_catches_up(one_ms, 1_200.0, None, "the job")
    # nothing bounds it: the model ran out of batches, and the note says so
    assert "within 10,000 batches" in never_catches_up(free_events, 550.0, None, "the job")
    # batches shorter than the trigger: 600 a trigger at most, whatever a batch takes
    quick = BatchCost(fixed_s=0.2, per_event_s=0.0, first_s=0.2, second_s=0.2)
    assert "reads at most 600 ev/s" in never_catches_up(quick, 700.0, 600, "the job", trigger_s=1.0)


def test_a_killed_drivers_batch_in_flight_runs_first_and_the_backlog_waits_for_the_second():
    cost = BatchCost(fixed_s=1.0, per_event_s=1e-3, first_s=5.0, second_s=2.0)
    # nothing arriving: 5 s + 0.1 s for the 100 in flight (the backlog counts them, from the
    # last commit), then 2 s + 9.9 s for the 9,900 behind them
    assert catch_up_seconds(10_000, 0.0, cost, 0.0, None, slack_s=5.0, in_flight_events=100) == (
        pytest.approx(5.1 + 11.9),
        2,
    )
    # without a batch in flight the first batch reads the backlog
    assert catch_up_seconds(10_000, 0.0, cost, 0.0, None, slack_s=5.0) == (pytest.approx(15.0), 1)


def test_batches_still_warming_have_a_fixed_cost_of_their_own():
    samples = [BatchSample(100, 4.0, i, False) for i in range(2, 10)] + [
        BatchSample(100, 1.5, i, False) for i in range(10, 40)
    ]
    cost = fit_batch_cost(samples)
    assert cost.early_s == pytest.approx(4.0) and cost.fixed_s == pytest.approx(1.5)
    assert cost.seconds(0, 9) == pytest.approx(4.0) and cost.seconds(0, 10) == pytest.approx(1.5)


def test_a_job_that_cannot_keep_up_has_no_estimate():
    assert catch_up_seconds(10_000, 1_000.0, BatchCost(0.0, 1e-3, 0.0, 0.0), 0.0, None) == (None, 0)


def test_where_a_batch_outlasts_the_slack_the_backlog_gone_is_caught_up():
    # every batch takes 10 s while 1 ev/s arrives: 10 events always wait, more than 5 s' worth;
    # the second leaves as many as the first: what is left arrived while it ran
    assert catch_up_seconds(100, 1.0, BatchCost(10.0, 0.0, 10.0, 10.0), 0.0, None, slack_s=5.0) == (20.0, 2)
    # batches of 20 s, 11 s, then 7.5 s each at 100 ev/s: the fourth leaves 750 unread as the
    # third did — caught up there, though no batch runs under the 5 s slack
    warming = BatchCost(fixed_s=7.5, per_event_s=0.0, first_s=20.0, second_s=11.0)
    assert catch_up_seconds(0, 100.0, warming, 0.0, None, trigger_s=1.0, slack_s=5.0)[1] == 4


def test_batches_the_per_batch_limit_cut_short_never_end_the_catch_up():
    # 10 s a batch of at most 1,000 events, 95 ev/s arriving: each batch leaves only 50 fewer
    # unread than the one before, yet the backlog is still there until the limit stops binding
    steady = BatchCost(10.0, 0.0, 10.0, 10.0)
    seconds, batches = catch_up_seconds(10_000, 95.0, steady, 0.0, 1_000, trigger_s=1.0, slack_s=5.0)
    assert batches >= (10_000 - 1_000) // 50 and seconds == 10.0 * batches


def job_run(id, requested_at, caught_up_at, kind="job"):
    return NS(id=id, requested_at=requested_at, caught_up_at=caught_up_at, kind=kind)


def test_samples_know_each_batchs_place_in_its_run_and_whether_it_read_a_backlog():
    runs = [job_run(2, 100.0, 125.0), job_run(1, 0.0, None)]
    batches = [
        NS(run_id=1, batch_id=7, processed_at=20.0, batch_seconds=8.0, input_events=900),
        NS(run_id=1, batch_id=8, processed_at=25.0, batch_seconds=4.0, input_events=300),
        NS(run_id=2, batch_id=0, processed_at=120.0, batch_seconds=9.0, input_events=5_000),
        NS(run_id=2, batch_id=1, processed_at=125.0, batch_seconds=5.0, input_events=500),
        NS(run_id=2, batch_id=2, processed_at=127.0, batch_seconds=2.0, input_events=200),
    ]
    samples, startups = recorded_samples(Recorded(runs, batches), "job")
    assert samples == [
        BatchSample(900, 8.0, 0, True, True),
        BatchSample(300, 4.0, 1, True, True),  # never caught up
        BatchSample(5_000, 9.0, 0, True, True),
        BatchSample(500, 5.0, 1, True, True),
        BatchSample(200, 2.0, 2, False, True),
    ]  # each ran alone: restarts
    assert startups == [12.0, 11.0]  # request → its first batch began, oldest first


def test_a_batchs_lead_is_from_the_clock_its_offsets_were_taken_at_to_its_start():
    runs = [job_run(1, 0.0, 30.0)]
    # began at 12.0 and 20.0; their offsets were taken on the broker clock at 10.8 and 19.9
    batches = [
        NS(
            run_id=1,
            batch_id=0,
            processed_at=16.0,
            batch_seconds=4.0,
            input_events=2_500,
            processing_time_watermark_us=10_800_000,
        ),
        NS(
            run_id=1,
            batch_id=1,
            processed_at=22.0,
            batch_seconds=2.0,
            input_events=500,
            processing_time_watermark_us=19_900_000,
        ),
        # a log of recorded arrivals keeps a clock of its own, days from the wall clock: no lead
        NS(
            run_id=1,
            batch_id=2,
            processed_at=24.0,
            batch_seconds=1.0,
            input_events=100,
            processing_time_watermark_us=-86_400_000_000,
        ),
    ]
    samples, _ = recorded_samples(Recorded(runs, batches), "job")
    assert [s.lead_s for s in samples] == [pytest.approx(1.2), pytest.approx(0.1), None]


def test_each_kind_of_batchs_lead_is_fitted_from_the_restarts_and_a_kind_without_takes_the_next():
    samples = [
        BatchSample(1_000, 5.0, 0, True, True, 1.5),
        BatchSample(1_000, 5.0, 0, True, True, 2.5),
        BatchSample(1_000, 9.0, 0, True, False, 9.0),  # a rehearsal's: once restarts are recorded, not counted
        BatchSample(100, 1.0, 1, True, True, 0.2),
        BatchSample(100, 1.0, 12, False, True, None),
    ]
    assert fit_batch_cost(samples).leads_s == pytest.approx((2.0, 0.2, 0.2, 0.2))
    assert fit_batch_cost([BatchSample(1_000, 5.0, 0, True)]).leads_s == (0.0, 0.0, 0.0, 0.0)  # none known


def test_a_batch_leaves_unread_what_arrived_after_its_trigger_took_its_offsets():
    # a failover's restore: 1,600 events behind at 100 ev/s, a first batch of 4.4 s, which alone
    # would leave 4.4 s of input unread: within the 5 s slack, caught up after one batch
    cost = BatchCost(fixed_s=1.0, per_event_s=0.0, first_s=4.4, second_s=1.7)
    assert catch_up_seconds(1_600, 100.0, cost, 8.0, None, trigger_s=1.0, slack_s=5.0) == (pytest.approx(12.4), 1)
    # its trigger took its offsets 1.2 s before it began (inside the start-up): 5.6 s of input are
    # left, and a second batch, 0.1 s after its own offsets, reads them
    led = BatchCost(fixed_s=1.0, per_event_s=0.0, first_s=4.4, second_s=1.7, leads_s=(1.2, 0.1, 0.1, 0.1))
    assert catch_up_seconds(1_600, 100.0, led, 8.0, None, trigger_s=1.0, slack_s=5.0) == (
        pytest.approx(8.0 + 4.4 + 0.1 + 1.7),
        2,
    )


def test_a_restart_that_ran_alone_is_marked_and_gives_the_fixed_costs_once_recorded():
    #  run 1 east  |--req 0 ------ caught up 35--|            a deploy: both regions at once
    #  run 2 west  |--req 0 ------ caught up 35--|
    #  run 3 west                                   |--req 100 -- caught up 120--|   a restart, alone
    runs = [job_run(3, 100.0, 120.0), job_run(2, 0.0, 35.0), job_run(1, 0.0, 35.0)]
    batches = [
        NS(run_id=r, batch_id=i, processed_at=start + 10.0 * (i + 1), batch_seconds=s, input_events=n)
        for r, start in ((1, 12.0), (2, 12.0))
        for i, (n, s) in enumerate([(3_000, 11.0), (1_200, 5.0), (300, 2.0)])
    ]
    batches += [
        NS(run_id=3, batch_id=0, processed_at=119.0, batch_seconds=10.0, input_events=40_000),
        NS(run_id=3, batch_id=1, processed_at=120.0, batch_seconds=1.0, input_events=1_000),
    ]
    samples, startups = recorded_samples(Recorded(runs, batches), "job")
    assert startups == [9.0]  # the restart's alone
    catch_up = [s for s in samples if s.catching_up]
    # the deploy's starts as measured: they ran at once, but before anything else ran (in a quiet
    # walk-through their first batches took 11–12 s, a lone restart's 14.6–30.6 s)
    assert catch_up.count(BatchSample(3_000, 11.0, 0, True)) == 2 and BatchSample(1_200, 5.0, 1, True) in catch_up
    assert BatchSample(40_000, 10.0, 0, True, restart=True) in catch_up
    assert BatchSample(300, 2.0, 2, False) in samples  # the deploys' later batches: the live cadence
    cost = fit_batch_cost(samples)
    # what an event costs from every first batch; the first batch's fixed cost from the restart's
    assert cost.per_event_s == 0.0  # the larger first batch was no slower: no cost of an event shows
    assert cost.first_s == pytest.approx(10.0)  # not 10.7, the mean of all three
    # with no start alone (just after a deploy), the shared ones' start-ups are all there is
    samples, startups = recorded_samples(Recorded(runs[1:], batches), "job")
    assert startups == [11.0, 11.0] and not any(s.restart for s in samples)
    assert fit_batch_cost(samples).first_s == pytest.approx(11.0)


def test_rehearsals_are_starts_under_load_and_their_catch_up_counts_as_corrected_for_the_restart():
    #  run 1 rehearsal  |-req 0 - first batch 30..50 - caught up 60-|   beside both duplicates
    #  run 2 restart                                                    |-req 100 - 130..145-|
    #  run 3 rehearsal                                                                       |-req 200 - 240..260-|
    runs = [job_run(3, 200.0, 262.0, "rehearsal"), job_run(2, 100.0, 147.0), job_run(1, 0.0, 60.0, "rehearsal")]
    batches = [
        NS(run_id=1, batch_id=0, processed_at=50.0, batch_seconds=20.0, input_events=40_000),
        NS(run_id=1, batch_id=1, processed_at=60.0, batch_seconds=8.0, input_events=2_000),
        NS(run_id=2, batch_id=0, processed_at=145.0, batch_seconds=15.0, input_events=50_000),
        NS(run_id=2, batch_id=1, processed_at=147.0, batch_seconds=2.0, input_events=1_500),
        NS(run_id=3, batch_id=0, processed_at=260.0, batch_seconds=20.0, input_events=45_000),
        NS(run_id=3, batch_id=1, processed_at=262.0, batch_seconds=2.0, input_events=1_000),
    ]
    samples, startups = recorded_samples(Recorded(runs, batches, [rehearsal_estimate(1, 2.0, 1.5)]), "job")
    # each start alone under the load of its moment: the restart as measured, a rehearsal as its
    # start-up correction says (none recorded for run 3: as measured)
    assert startups == [20.0, 30.0, 40.0]
    assert BatchSample(40_000, 10.0, 0, True) in samples  # twice as fast with what the restart has
    assert BatchSample(45_000, 20.0, 0, True) in samples  # no correction recorded: as measured
    assert BatchSample(50_000, 15.0, 0, True, restart=True) in samples
    cost = fit_batch_cost(samples)
    assert cost.slope_measured and cost.per_event_s > 0  # first batches of three sizes show what an event costs


# A second walk-through that day (load 11–15): each start's batches until a little after it
# caught up, as (processed at, events, seconds) from the deploy's request; the rehearsals'
# catch-up speedups as recorded; then each turn's estimate (at, backlog, ev/s arriving) and
# its measured catch-up.
LOADED_RUNS = [
    (
        1,
        "job",
        0.0,
        78.1,
        [
            (55.6, 7827, 26.8),
            (65.7, 2873, 9.2),
            (73.2, 1029, 7.2),
            (78.1, 714, 4.6),
            (82.4, 512, 3.9),
            (86.4, 428, 3.7),
            (91.6, 413, 4.9),
            (96.8, 519, 4.3),
        ],
    ),
    (
        2,
        "job",
        0.0,
        74.3,
        [
            (56.7, 7945, 25.9),
            (63.7, 2845, 6.7),
            (69.5, 735, 5.3),
            (74.3, 554, 4.5),
            (77.8, 478, 3.3),
            (83.2, 365, 5.1),
            (87.1, 549, 3.5),
            (91.3, 400, 3.9),
        ],
    ),
    (
        3,
        "rehearsal",
        341.6,
        558.8,
        [
            (442.1, 43003, 55.2),
            (456.9, 6211, 13.2),
            (467.1, 1456, 9.8),
            (478.0, 1012, 9.9),
            (484.7, 1124, 5.4),
            (492.9, 641, 7.6),
            (499.9, 792, 6.6),
            (507.4, 671, 7.1),
            (516.1, 729, 8.1),
            (526.0, 923, 9.1),
            (534.6, 949, 8.0),
            (540.1, 827, 5.2),
            (547.4, 546, 6.7),
            (553.7, 759, 5.7),
            (558.8, 617, 4.4),
        ],
    ),
    (
        4,
        "job",
        572.6,
        667.8,
        [
            (628.0, 62061, 33.5),
            (638.2, 3694, 9.7),
            (644.4, 987, 5.5),
            (650.7, 600, 5.9),
            (657.5, 657, 6.3),
            (663.1, 662, 4.8),
            (667.8, 542, 4.3),
            (671.1, 470, 3.0),
        ],
    ),
    (5, "rehearsal", 753.7, 873.0, [(847.2, 51049, 57.9), (862.3, 7887, 14.1), (873.0, 9174, 9.2)]),
]
LOADED_SPEEDUPS = {3: (None, 2.2), 5: (None, 2.19)}  # (start-up, catch-up); no start-up's recorded
LOADED_TURNS = [(562.8, 60_007, 96.0, 95.2), (877.8, 69_524, 87.0, 90.4)]  # west, then east


def test_the_loaded_walk_through_replays_are_estimated_within_a_quarter():
    # west sees only the deploys (two at once) and its rehearsal; east also west's replay and
    # its own rehearsal. (The walk-through before it, at load 12, came out −33 % and −40 %:
    # west's first batch ran slower than its rehearsal's correction said, east waited 43 s
    # after its backlog was gone for a batch short enough to be declared caught up.)
    for at, backlog, rate, measured in LOADED_TURNS:
        samples, startups = recorded_samples(recorded_at(LOADED_RUNS, LOADED_SPEEDUPS, at), "job")
        cost = fit_batch_cost(samples)
        seconds, _ = catch_up_seconds(
            backlog, rate, cost, statistics.median(startups), None, trigger_s=1.0, slack_s=5.0
        )
        assert cost.slope_measured and abs(seconds - measured) / measured <= 0.25


def test_local_masters_cap_the_partitions_processed_at_once():
    assert processing_partitions("local[2]", 4) == 2
    assert processing_partitions("local[8]", 4) == 4
    assert processing_partitions("spark://master:7077", 4) == 4


def test_the_model_estimates_a_start_from_the_jobs_recorded_starts_and_the_logs_offsets(tmp_path, monkeypatch):
    # a real control database and log: the deploy starts of the walk-through recorded as
    # their drivers record them, a rehearsal after them, and a replay that reads 30,000
    # events of the log
    import yaml

    from platform_support import Platform
    from tidegate.inputs.event_log import EventLog
    from tidegate.jobspec import parse_spec

    log = EventLog.create(tmp_path / "event-log", partitions=3, clock="manual")
    for p in range(3):
        log.append(p, [None] * 10_000, ["{}"] * 10_000, fsync=False)
    (tmp_path / "platform").mkdir()
    platform = Platform(tmp_path / "platform", tmp_path / "event-log")
    spec = parse_spec(yaml.safe_load(platform.spec_file().read_text()) | {"source": {"event_log": str(log.root)}})
    db = platform.controller.db
    for region, batches, requested, started in (
        ("west", DEPLOY_WEST, 1000.0, 14.9),
        ("east", DEPLOY_EAST, 1000.0, 16.2),
    ):
        run_id = db.create_run(
            job=spec.name,
            region=region,
            version=1,
            fingerprint=spec.fingerprint,
            lineage="l",
            input=str(log.root),
            start_mode="now",
            checkpoint="fresh",
            checkpoint_reason="t",
            status="running",
            kind="job",
            requested_at=requested,
        )
        at = requested + started
        for i, (n, s) in enumerate(batches):
            at += s
            db.record_batch(
                run_id=run_id,
                job=spec.name,
                region=region,
                batch_id=i,
                processed_at=at,
                batch_seconds=s,
                input_events=n,
                quarantined=0,
                rows_emitted=0,
            )
            if i == 1:
                db.update_run(run_id, caught_up_at=at)
            at += max(0.0, 1.0 - s)
    rehearsal = db.create_run(
        job=spec.name,
        region="west",
        version=1,
        fingerprint=spec.fingerprint,
        lineage="r",
        input=str(log.root),
        start_mode="now",
        checkpoint="fresh",
        checkpoint_reason="t",
        status="stopped",
        kind="rehearsal",
        requested_at=2000.0,
    )
    db.record_batch(
        run_id=rehearsal,
        job=spec.name,
        region="west",
        batch_id=0,
        processed_at=2060.0,
        batch_seconds=30.0,
        input_events=30_000,
        quarantined=0,
        rows_emitted=0,
    )
    monkeypatch.setenv("TIDEGATE_TRIGGER_INTERVAL", "1s")
    plan = NS(starting_offsets={0: 0, 1: 0, 2: 0})
    m = model_estimate(platform.controller, spec.name, "west", plan=plan, spec=spec, rate_eps=103.0)
    # the deploys shared the machine: the rehearsal, the latest start alone, gives the start-up,
    # and its 30,000-event first batch beside the deploys' 4,400-event ones what an event costs
    assert m.backlog_events == 30_000 and m.startup_s == pytest.approx(30.0)
    cost = fit_batch_cost(run(DEPLOY_WEST) + run(DEPLOY_EAST) + [BatchSample(30_000, 30.0, 0, True)])
    assert cost.slope_measured and m.per_event_s == pytest.approx(cost.per_event_s)
    assert m.seconds == pytest.approx(catch_up_seconds(30_000, 103.0, cost, 30.0, None, trigger_s=1.0)[0])
    assert "ev/s" in m.describe() and not m.note
