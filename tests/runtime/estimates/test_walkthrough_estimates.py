"""Both estimates of a planned stop replayed from four recorded live walk-throughs
(bench/bench_walkthrough.py, 2026-11-25: standalone Airflow, 100 ev/s, both duplicates on
2 cores, nothing else on the machine), with the driver's caught-up rule
(tidegate.runtime.estimates.caught_up): each turn's model and rehearsal within a third of the catch-up
measured, fifteen of the sixteen within a quarter."""

from __future__ import annotations

import statistics

import pytest

from recorded_control import recorded_at
from tidegate.runtime.estimates.estimate import catch_up_seconds, fit_batch_cost, recorded_samples
from tidegate.runtime.estimates.rehearsal import RehearsalResult, rehearsal_for_restart

# Each start: (run, kind, requested, caught up, its first batches as (processed at, events,
# seconds)), seconds from the deploy's request. Runs 1 and 2 are the deploy (both regions at
# once), 3 and 5 the rehearsals of the first and second turn's region, 4 and 6 their restarts
# (replays of v2).
WALKS = {
    "first": dict(
        order=("east", "west"),
        runs=[
            (1, "job", 0.0, 48.0, [(39.7, 5867, 16.10), (44.9, 1858, 4.84), (48.0, 474, 2.83), (51.7, 307, 3.47),
                                   (54.1, 344, 2.13), (57.6, 220, 3.16), (61.2, 358, 3.07), (63.8, 370, 2.33)]),
            (2, "job", 0.1, 49.1, [(39.5, 5921, 16.10), (45.4, 1791, 5.11), (49.1, 550, 3.45), (52.6, 365, 2.93),
                                   (57.3, 310, 4.41), (60.5, 454, 2.90), (62.7, 347, 1.99), (64.7, 206, 1.84)]),
            (3, "rehearsal", 313.8, 392.6, [(374.2, 37871, 29.00), (381.4, 3105, 6.44), (387.4, 704, 5.32),
                                            (392.6, 546, 4.76), (396.4, 510, 3.64)]),
            (4, "job", 406.7, 438.6, [(435.1, 45413, 12.32), (438.6, 1614, 3.12), (440.9, 352, 2.09),
                                      (443.5, 259, 2.20), (446.7, 224, 2.90), (451.0, 290, 4.07)]),
            (5, "rehearsal", 485.6, 575.4, [(551.7, 50200, 36.24), (560.8, 4098, 8.65), (566.9, 889, 5.38),
                                            (575.4, 603, 8.31)]),
            (6, "job", 586.3, 638.7, [(628.2, 61681, 20.85), (634.0, 2413, 5.46), (638.7, 601, 4.09)]),
        ],
        # each rehearsal's start-up (s) and its phases' speedups as its CPU samples gave them
        rehearsals={3: (31.41, 2.100, 1.949), 5: (29.89, 2.004, 1.987)},
        # each turn: (estimated at, the rehearsal's run, backlog events, ev/s arriving, measured catch-up s)
        turns=[(399.4, 3, 43_190, 110.0, 31.9), (579.8, 5, 59_792, 103.5, 52.4)],
    ),
    "second": dict(
        order=("east", "west"),
        runs=[
            (1, "job", 0.0, 48.8, [(43.6, 6142, 18.02), (48.8, 2048, 4.59), (52.4, 468, 3.34), (55.3, 328, 2.74),
                                   (58.0, 317, 2.40), (60.3, 250, 2.08), (63.3, 239, 2.60), (66.5, 298, 2.95)]),
            (2, "job", 0.0, 49.7, [(40.8, 6097, 16.14), (46.7, 1833, 5.48), (49.7, 559, 2.53), (52.8, 255, 2.76),
                                   (57.1, 305, 3.84), (59.8, 416, 2.49), (63.3, 286, 3.28), (65.8, 339, 2.18)]),
            (3, "rehearsal", 313.8, 404.1, [(388.6, 38352, 37.93), (399.2, 4093, 9.59), (404.1, 1060, 4.51)]),
            (4, "job", 413.6, 449.2, [(445.1, 46116, 16.67), (449.2, 1977, 3.83), (453.0, 406, 3.39),
                                      (457.3, 384, 4.00), (461.3, 442, 3.61), (464.9, 416, 3.24)]),
            (5, "rehearsal", 499.1, 589.8, [(566.8, 50645, 35.06), (576.9, 3875, 9.47), (583.4, 979, 5.98),
                                            (589.8, 638, 6.08)]),
            (6, "job", 599.9, 650.1, [(640.3, 61567, 21.58), (645.9, 2375, 4.97), (650.1, 530, 3.48)]),
        ],
        # (that run recorded the start-ups' speedups as a proportional share, 1.38×; these are
        # what the same CPU samples give with all the freed CPU, as the correction now reads them)
        rehearsals={3: (36.82, 2.091, 2.045), 5: (32.64, 2.140, 1.965)},
        turns=[(406.8, 3, 44_038, 89.5, 35.6), (593.3, 5, 59_721, 104.0, 50.2)],
    ),
    "third": dict(
        order=("west", "east"),
        runs=[
            (1, "job", 0.0, 42.8, [(33.6, 4340, 13.81), (39.1, 1626, 5.14), (42.8, 528, 3.38), (47.1, 359, 3.83),
                                   (51.7, 398, 4.27), (54.7, 474, 2.74), (57.6, 292, 2.68), (60.6, 259, 2.77)]),
            (2, "job", 0.1, 38.0, [(33.1, 4255, 14.18), (38.0, 1665, 4.53), (42.2, 476, 3.95), (46.2, 389, 3.83),
                                   (50.2, 391, 3.68), (53.6, 417, 3.08), (55.9, 329, 1.94), (58.5, 215, 2.37)]),
            (3, "rehearsal", 310.0, 398.9, [(378.5, 36488, 32.82), (388.1, 3788, 8.83), (394.1, 885, 5.47),
                                            (398.9, 583, 4.49)]),
            (4, "job", 409.9, 456.5, [(447.6, 44938, 18.20), (452.9, 2134, 4.90), (456.5, 564, 3.39),
                                      (459.6, 346, 2.81), (463.2, 254, 3.42), (467.3, 358, 3.89)]),
            (5, "rehearsal", 514.5, 597.6, [(577.5, 50276, 33.92), (587.4, 3846, 9.21), (592.6, 946, 4.72),
                                            (597.6, 534, 4.68)]),
            (6, "job", 606.9, 647.9, [(642.9, 61326, 19.45), (647.9, 2200, 4.34)]),
        ],
        rehearsals={3: (35.74, 2.219, 1.979), 5: (29.10, 2.058, 1.987)},
        turns=[(402.0, 3, 42_285, 91.0, 46.6), (600.8, 5, 59_743, 107.0, 41.0)],
    ),
    "fourth": dict(
        order=("west", "east"),
        runs=[
            (1, "job", 0.0, 37.6, [(29.2, 5261, 12.13), (34.8, 1393, 5.16), (37.6, 533, 2.62), (40.9, 309, 2.87),
                                   (43.5, 290, 2.41), (46.4, 269, 2.41), (49.6, 278, 2.86), (52.4, 275, 2.58)]),
            (2, "job", 0.0, 33.9, [(29.7, 5247, 12.79), (33.9, 1466, 3.78), (37.0, 365, 2.91), (40.4, 322, 3.22),
                                   (43.5, 345, 2.86), (45.8, 310, 2.01), (47.9, 197, 1.95), (49.7, 214, 1.59)]),
            (3, "rehearsal", 303.2, 383.3, [(362.8, 36562, 29.10), (371.6, 3280, 8.35), (377.0, 828, 4.64),
                                            (383.3, 546, 5.88)]),
            (4, "job", 394.4, 429.4, [(425.5, 44130, 16.26), (429.4, 1867, 3.54), (432.5, 357, 2.88),
                                      (436.4, 355, 3.43), (440.1, 389, 3.40), (444.6, 419, 3.84)]),
            (5, "rehearsal", 485.3, 579.9, [(552.3, 50378, 36.86), (561.0, 4088, 7.81), (568.0, 820, 6.65),
                                            (574.2, 709, 5.87), (579.9, 586, 5.26)]),
            (6, "job", 589.5, 634.4, [(629.6, 61486, 22.02), (634.4, 2503, 4.39)]),
        ],
        rehearsals={3: (30.44, 2.123, 2.027), 5: (30.11, 2.144, 1.984)},
        turns=[(386.3, 3, 41_884, 105.5, 35.0), (583.8, 5, 59_814, 89.5, 44.9)],
    ),
}


def rehearsal(walk: dict, run_id: int) -> RehearsalResult:
    _, requested, caught, rows = next(row[1:] for row in walk["runs"] if row[0] == run_id)
    startup_s, startup_speedup, catch_up_speedup = walk["rehearsals"][run_id]
    return RehearsalResult(caught - requested, None, sum(n for _, n, _ in rows), run_id, None, None,
                           startup_s=startup_s, startup_speedup=startup_speedup, catch_up_speedup=catch_up_speedup,
                           catch_up_batches=tuple((n, s) for when, n, s in rows if when <= caught))


def estimates(walk: str, turn: int) -> tuple[float, float, float]:
    """(model s, rehearsal s, measured s) of one turn, as the estimate task saw the platform."""
    w = WALKS[walk]
    at, rehearsed, backlog, rate, measured = w["turns"][turn]
    speedups = {r: (startup, catch_up) for r, (_, startup, catch_up) in w["rehearsals"].items()}
    samples, startups = recorded_samples(recorded_at(w["runs"], speedups, at), "device-fleet-counts")
    model, _ = catch_up_seconds(backlog, rate, fit_batch_cost(samples), statistics.median(startups), None,
                                trigger_s=1.0, slack_s=5.0)
    return model, rehearsal_for_restart(rehearsal(w, rehearsed), backlog, rate).seconds, measured


TURNS = [(w, t) for w in WALKS for t in (0, 1)]


@pytest.mark.parametrize("walk, turn", TURNS, ids=[f"{w} walk-through, {WALKS[w]['order'][t]}" for w, t in TURNS])
def test_each_estimate_of_a_quiet_walk_through_turn_is_within_a_third(walk, turn):
    model, procedure, measured = estimates(walk, turn)
    assert abs(model - measured) / measured <= 1 / 3, f"model {model:.1f} s for {measured} s"
    assert abs(procedure - measured) / measured <= 1 / 3, f"rehearsal {procedure:.1f} s for {measured} s"


def test_fifteen_of_the_sixteen_estimates_are_within_a_quarter():
    # the one that is not: the first walk-through's model of west, −31 %. In the first two
    # runs the second turn's restart started in 21.0 and 18.8 s where the first's had taken
    # 16.0 and 14.9, and read its first batch 20-35 % slower: every estimate of those second
    # turns is short (−19 % to −31 %). Single starts on two shared cores vary that much.
    errors = []
    for walk, turn in TURNS:
        model, procedure, measured = estimates(walk, turn)
        errors += [abs(model - measured) / measured, abs(procedure - measured) / measured]
    assert sum(error <= 0.25 for error in errors) >= 15
