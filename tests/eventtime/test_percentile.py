"""Percentile watermarks: the time by which p % of the units have their watermark, and the
events that fall behind one (the side output a heuristic watermark never has)."""

from __future__ import annotations

import numpy as np
import pytest

from tidegate.errors import ConfigError
from tidegate.eventtime.percentile import behind, percentile_watermark_us
from tidegate.eventtime.policy import NONE

# five units' watermarks (minutes): one straggler at 2
UNITS = [10, 9, 9, 8, 2]


@pytest.mark.parametrize(
    "p, expected",
    [
        (100, 2),  # every unit: the minimum, semantics §3's job watermark
        (80, 8),  # 4 of 5 units have W >= 8: the straggler no longer holds output back
        (60, 9),
        (50, 9),  # ⌈2.5⌉ = 3 units
        (20, 10),
        (1, 10),
    ],
)
def test_the_percentile_watermark_is_the_time_that_p_percent_of_the_units_have_reached(p, expected):
    assert percentile_watermark_us(UNITS, p) == expected


def test_units_that_never_reported_count_as_behind_and_bad_percentiles_are_refused():
    assert percentile_watermark_us([10, int(NONE)], 100) == NONE
    assert percentile_watermark_us([10, int(NONE)], 50) == 10
    assert percentile_watermark_us([], 90) == NONE
    for bad in (0, 101, True, "95"):
        with pytest.raises(ConfigError, match="watermark percentile"):
            percentile_watermark_us(UNITS, bad)


def test_an_event_below_the_watermark_in_force_is_behind_it_and_nothing_is_before_one_exists():
    assert behind(np.array([7, 8, 9]), 8).tolist() == [True, False, False]
    assert behind(np.array([7, 8, 9]), NONE).tolist() == [False, False, False]
