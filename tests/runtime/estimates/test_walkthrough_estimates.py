"""Both estimates of a planned stop replayed from four recorded live walk-throughs
(bench/bench_walkthrough.py, 2026-11-25: standalone Airflow, 100 ev/s, both duplicates on
2 cores, nothing else on the machine), with the driver's caught-up rule
(tidegate.runtime.estimates.caught_up): each turn's better estimate within a quarter of the
catch-up measured, fourteen of the sixteen; and the model of a fifth (2026-11-26) through a
planned stop, a node-failure drill and an upgrade drill, each within a quarter."""

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
            (
                1,
                "job",
                0.0,
                48.0,
                [
                    (39.7, 5867, 16.10),
                    (44.9, 1858, 4.84),
                    (48.0, 474, 2.83),
                    (51.7, 307, 3.47),
                    (54.1, 344, 2.13),
                    (57.6, 220, 3.16),
                    (61.2, 358, 3.07),
                    (63.8, 370, 2.33),
                ],
            ),
            (
                2,
                "job",
                0.1,
                49.1,
                [
                    (39.5, 5921, 16.10),
                    (45.4, 1791, 5.11),
                    (49.1, 550, 3.45),
                    (52.6, 365, 2.93),
                    (57.3, 310, 4.41),
                    (60.5, 454, 2.90),
                    (62.7, 347, 1.99),
                    (64.7, 206, 1.84),
                ],
            ),
            (
                3,
                "rehearsal",
                313.8,
                392.6,
                [
                    (374.2, 37871, 29.00),
                    (381.4, 3105, 6.44),
                    (387.4, 704, 5.32),
                    (392.6, 546, 4.76),
                    (396.4, 510, 3.64),
                ],
            ),
            (
                4,
                "job",
                406.7,
                438.6,
                [
                    (435.1, 45413, 12.32),
                    (438.6, 1614, 3.12),
                    (440.9, 352, 2.09),
                    (443.5, 259, 2.20),
                    (446.7, 224, 2.90),
                    (451.0, 290, 4.07),
                ],
            ),
            (
                5,
                "rehearsal",
                485.6,
                575.4,
                [(551.7, 50200, 36.24), (560.8, 4098, 8.65), (566.9, 889, 5.38), (575.4, 603, 8.31)],
            ),
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
            (
                1,
                "job",
                0.0,
                48.8,
                [
                    (43.6, 6142, 18.02),
                    (48.8, 2048, 4.59),
                    (52.4, 468, 3.34),
                    (55.3, 328, 2.74),
                    (58.0, 317, 2.40),
                    (60.3, 250, 2.08),
                    (63.3, 239, 2.60),
                    (66.5, 298, 2.95),
                ],
            ),
            (
                2,
                "job",
                0.0,
                49.7,
                [
                    (40.8, 6097, 16.14),
                    (46.7, 1833, 5.48),
                    (49.7, 559, 2.53),
                    (52.8, 255, 2.76),
                    (57.1, 305, 3.84),
                    (59.8, 416, 2.49),
                    (63.3, 286, 3.28),
                    (65.8, 339, 2.18),
                ],
            ),
            (3, "rehearsal", 313.8, 404.1, [(388.6, 38352, 37.93), (399.2, 4093, 9.59), (404.1, 1060, 4.51)]),
            (
                4,
                "job",
                413.6,
                449.2,
                [
                    (445.1, 46116, 16.67),
                    (449.2, 1977, 3.83),
                    (453.0, 406, 3.39),
                    (457.3, 384, 4.00),
                    (461.3, 442, 3.61),
                    (464.9, 416, 3.24),
                ],
            ),
            (
                5,
                "rehearsal",
                499.1,
                589.8,
                [(566.8, 50645, 35.06), (576.9, 3875, 9.47), (583.4, 979, 5.98), (589.8, 638, 6.08)],
            ),
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
            (
                1,
                "job",
                0.0,
                42.8,
                [
                    (33.6, 4340, 13.81),
                    (39.1, 1626, 5.14),
                    (42.8, 528, 3.38),
                    (47.1, 359, 3.83),
                    (51.7, 398, 4.27),
                    (54.7, 474, 2.74),
                    (57.6, 292, 2.68),
                    (60.6, 259, 2.77),
                ],
            ),
            (
                2,
                "job",
                0.1,
                38.0,
                [
                    (33.1, 4255, 14.18),
                    (38.0, 1665, 4.53),
                    (42.2, 476, 3.95),
                    (46.2, 389, 3.83),
                    (50.2, 391, 3.68),
                    (53.6, 417, 3.08),
                    (55.9, 329, 1.94),
                    (58.5, 215, 2.37),
                ],
            ),
            (
                3,
                "rehearsal",
                310.0,
                398.9,
                [(378.5, 36488, 32.82), (388.1, 3788, 8.83), (394.1, 885, 5.47), (398.9, 583, 4.49)],
            ),
            (
                4,
                "job",
                409.9,
                456.5,
                [
                    (447.6, 44938, 18.20),
                    (452.9, 2134, 4.90),
                    (456.5, 564, 3.39),
                    (459.6, 346, 2.81),
                    (463.2, 254, 3.42),
                    (467.3, 358, 3.89),
                ],
            ),
            (
                5,
                "rehearsal",
                514.5,
                597.6,
                [(577.5, 50276, 33.92), (587.4, 3846, 9.21), (592.6, 946, 4.72), (597.6, 534, 4.68)],
            ),
            (6, "job", 606.9, 647.9, [(642.9, 61326, 19.45), (647.9, 2200, 4.34)]),
        ],
        rehearsals={3: (35.74, 2.219, 1.979), 5: (29.10, 2.058, 1.987)},
        turns=[(402.0, 3, 42_285, 91.0, 46.6), (600.8, 5, 59_743, 107.0, 41.0)],
    ),
    "fourth": dict(
        order=("west", "east"),
        runs=[
            (
                1,
                "job",
                0.0,
                37.6,
                [
                    (29.2, 5261, 12.13),
                    (34.8, 1393, 5.16),
                    (37.6, 533, 2.62),
                    (40.9, 309, 2.87),
                    (43.5, 290, 2.41),
                    (46.4, 269, 2.41),
                    (49.6, 278, 2.86),
                    (52.4, 275, 2.58),
                ],
            ),
            (
                2,
                "job",
                0.0,
                33.9,
                [
                    (29.7, 5247, 12.79),
                    (33.9, 1466, 3.78),
                    (37.0, 365, 2.91),
                    (40.4, 322, 3.22),
                    (43.5, 345, 2.86),
                    (45.8, 310, 2.01),
                    (47.9, 197, 1.95),
                    (49.7, 214, 1.59),
                ],
            ),
            (
                3,
                "rehearsal",
                303.2,
                383.3,
                [(362.8, 36562, 29.10), (371.6, 3280, 8.35), (377.0, 828, 4.64), (383.3, 546, 5.88)],
            ),
            (
                4,
                "job",
                394.4,
                429.4,
                [
                    (425.5, 44130, 16.26),
                    (429.4, 1867, 3.54),
                    (432.5, 357, 2.88),
                    (436.4, 355, 3.43),
                    (440.1, 389, 3.40),
                    (444.6, 419, 3.84),
                ],
            ),
            (
                5,
                "rehearsal",
                485.3,
                579.9,
                [
                    (552.3, 50378, 36.86),
                    (561.0, 4088, 7.81),
                    (568.0, 820, 6.65),
                    (574.2, 709, 5.87),
                    (579.9, 586, 5.26),
                ],
            ),
            (6, "job", 589.5, 634.4, [(629.6, 61486, 22.02), (634.4, 2503, 4.39)]),
        ],
        rehearsals={3: (30.44, 2.123, 2.027), 5: (30.11, 2.144, 1.984)},
        turns=[(386.3, 3, 41_884, 105.5, 35.0), (583.8, 5, 59_814, 89.5, 44.9)],
    ),
}


def rehearsal(walk: dict, run_id: int) -> RehearsalResult:
    _, requested, caught, rows = next(row[1:] for row in walk["runs"] if row[0] == run_id)
    startup_s, startup_speedup, catch_up_speedup = walk["rehearsals"][run_id]
    return RehearsalResult(
        caught - requested,
        None,
        sum(n for _, n, _ in rows),
        run_id,
        None,
        None,
        startup_s=startup_s,
        startup_speedup=startup_speedup,
        catch_up_speedup=catch_up_speedup,
        catch_up_batches=tuple((n, s) for when, n, s in rows if when <= caught),
    )


def estimates(walk: str, turn: int) -> tuple[float, float, float]:
    """(model s, rehearsal s, measured s) of one turn, as the estimate task saw the platform."""
    w = WALKS[walk]
    at, rehearsed, backlog, rate, measured = w["turns"][turn]
    speedups = {r: (startup, catch_up) for r, (_, startup, catch_up) in w["rehearsals"].items()}
    samples, startups = recorded_samples(recorded_at(w["runs"], speedups, at), "device-fleet-counts")
    model, _ = catch_up_seconds(
        backlog, rate, fit_batch_cost(samples), statistics.median(startups), None, trigger_s=1.0, slack_s=5.0
    )
    return model, rehearsal_for_restart(rehearsal(w, rehearsed), backlog, rate).seconds, measured


TURNS = [(w, t) for w in WALKS for t in (0, 1)]


@pytest.mark.parametrize("walk, turn", TURNS, ids=[f"{w} walk-through, {WALKS[w]['order'][t]}" for w, t in TURNS])
def test_each_quiet_walk_through_turn_has_an_estimate_within_a_quarter(walk, turn):
    model, procedure, measured = estimates(walk, turn)
    assert min(abs(model - measured), abs(procedure - measured)) / measured <= 0.25, (model, procedure, measured)


def test_fourteen_of_the_sixteen_estimates_are_within_a_quarter():
    # the two that are not: the models of the second turns of the first two runs, −42 % and
    # −28 %. Their restarts started in 21.0 and 18.8 s where the first turn's had taken 16.0
    # and 14.9, and read their first batch 20–35 % slower; the model takes a restart's fixed
    # costs from the restarts before it, and the first turn's restart had been the fastest
    # recorded (45,413 events in 12.3 s). Single starts on two shared cores vary that much.
    errors = []
    for walk, turn in TURNS:
        model, procedure, measured = estimates(walk, turn)
        errors += [abs(model - measured) / measured, abs(procedure - measured) / measured]
    assert sum(error <= 0.25 for error in errors) >= 14


# The fifth walk-through (2026-11-26, quiet, 100 ev/s): the deploy (runs 1, 2), the planned
# stop's rehearsals (3, 5) and replays (4, 6), then a node-failure drill of west — a kill -9 in
# the middle of a batch: its restart (7) ran that batch again first, 179 events in 14.6 s, and
# read the backlog in its second — and an upgrade drill of west, a replay (8). Each start's first
# twelve batches as (processed at, events, seconds) from the deploy's request.
DRILL_WALK = [
    (
        1,
        "job",
        0.0,
        35.8,
        [
            (26.1, 4964, 12.30),
            (31.7, 1444, 5.18),
            (35.8, 526, 3.77),
            (39.1, 403, 3.05),
            (42.7, 340, 3.31),
            (46.8, 328, 3.79),
            (50.0, 384, 2.96),
            (51.8, 302, 1.62),
            (54.6, 169, 2.48),
            (57.2, 275, 2.40),
            (60.1, 248, 2.64),
            (62.7, 322, 2.24),
        ],
    ),
    (
        2,
        "job",
        0.1,
        29.6,
        [
            (25.0, 5031, 11.31),
            (29.6, 1271, 4.15),
            (33.9, 441, 3.81),
            (36.3, 392, 2.20),
            (40.1, 253, 3.44),
            (43.6, 365, 3.07),
            (46.4, 347, 2.52),
            (48.8, 251, 2.08),
            (51.7, 231, 2.48),
            (54.2, 276, 2.21),
            (56.7, 239, 2.19),
            (59.0, 236, 2.11),
        ],
    ),
    (
        3,
        "rehearsal",
        191.5,
        281.2,
        [(248.7, 25020, 30.88), (260.0, 3438, 10.58), (267.9, 1163, 7.09), (274.4, 769, 6.02), (281.2, 658, 6.27)],
    ),
    (
        4,
        "job",
        293.6,
        342.1,
        [
            (331.8, 34243, 21.88),
            (338.6, 2557, 6.09),
            (342.1, 697, 3.15),
            (346.9, 393, 4.08),
            (352.1, 446, 4.50),
            (357.3, 494, 4.62),
            (360.5, 509, 2.90),
            (364.6, 322, 3.43),
            (371.2, 403, 6.06),
            (375.3, 596, 3.68),
            (378.7, 401, 3.07),
            (382.1, 292, 3.12),
        ],
    ),
    (
        5,
        "rehearsal",
        411.5,
        504.5,
        [(479.5, 47072, 39.96), (491.6, 4398, 11.37), (497.9, 1198, 5.69), (504.5, 641, 5.72)],
    ),
    (
        6,
        "job",
        520.8,
        569.1,
        [
            (559.0, 56986, 21.47),
            (564.8, 2358, 5.21),
            (569.1, 591, 3.95),
            (572.9, 412, 3.55),
            (578.0, 355, 4.53),
            (584.2, 521, 5.60),
            (588.3, 598, 3.79),
            (593.4, 423, 4.51),
            (597.4, 473, 3.76),
            (601.5, 436, 3.16),
            (605.7, 378, 3.73),
            (610.9, 451, 4.28),
        ],
    ),
    (
        7,
        "job",
        637.1,
        685.5,
        [
            (671.8, 179, 14.57),
            (680.9, 3850, 8.18),
            (685.5, 857, 4.15),
            (689.5, 502, 3.47),
            (693.9, 439, 4.11),
            (698.3, 448, 3.84),
            (701.4, 490, 2.76),
            (706.1, 303, 4.04),
            (711.5, 460, 4.94),
            (715.8, 573, 3.53),
            (719.9, 430, 3.83),
            (723.0, 390, 2.74),
        ],
    ),
    (
        8,
        "job",
        753.7,
        814.9,
        [
            (802.6, 62019, 30.60),
            (810.6, 3410, 7.05),
            (814.9, 808, 3.83),
            (819.8, 409, 4.30),
            (824.2, 522, 3.96),
            (828.9, 455, 3.99),
            (832.2, 475, 3.00),
            (835.4, 350, 2.79),
            (839.2, 344, 3.55),
            (843.6, 368, 3.84),
            (846.4, 444, 2.57),
            (849.0, 292, 2.31),
        ],
    ),
]
DRILL_WALK_SPEEDUPS = {3: (2.262, 2.16), 5: (2.438, 2.22)}  # (start-up, catch-up), as recorded
# (what, estimated at, backlog, ev/s arriving, events in flight at the kill, measured: request → caught up)
DRILL_WALK_ESTIMATES = [
    ("planned stop, east", 508.4, 54_122, 91.5, 0, 48.3),
    ("node-failure drill", 631.2, 152, 104.0, 118, 48.4),
    ("upgrade drill", 743.5, 60_262, 102.5, 0, 61.2),
]


@pytest.mark.parametrize(
    "what, at, backlog, rate, in_flight, measured", DRILL_WALK_ESTIMATES, ids=[e[0] for e in DRILL_WALK_ESTIMATES]
)
def test_once_a_restart_is_recorded_each_kind_is_estimated_within_a_quarter(
    what, at, backlog, rate, in_flight, measured
):
    # (the recorded estimates, before a restart's fixed costs were taken from restarts: −17 %, −46 %, −27 %;
    # the batch in flight changes little here: its events cost next to nothing, its fixed cost is the first's)
    samples, startups = recorded_samples(recorded_at(DRILL_WALK, DRILL_WALK_SPEEDUPS, at), "device-fleet-counts")
    model, _ = catch_up_seconds(
        backlog,
        rate,
        fit_batch_cost(samples),
        statistics.median(startups),
        None,
        trigger_s=1.0,
        slack_s=5.0,
        in_flight_events=in_flight,
    )
    assert abs(model - measured) / measured <= 0.25, f"{what}: model {model:.1f} s for {measured} s"
