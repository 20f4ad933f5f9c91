"""Percentile watermarks (*Streaming Systems*, ch. 3; semantics §4): an explicitly lossy early-output mode.

The job watermark of semantics §3 is the minimum over the units' watermarks: output waits for the
slowest unit. A percentile watermark at ``p`` is the time by which ``p`` % of the units have
seen their events — the largest ``t`` such that at least ``⌈p/100 · n⌉`` of the ``n`` units
have ``W ≥ t``. At ``p = 100`` it is the minimum again. A unit that has never reported
(NONE) counts as behind every time.

It can lose data, by design: a unit behind it may still send events with ``S`` below it.
Such an event is *behind the watermark* (:func:`behind`): it must be counted and sent to a
side output, never folded into output that was already emitted, never silently dropped.
Units are counted, not events: weighting by events would need per-unit counts in the
state; on evenly loaded units the two agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tidegate.errors import ConfigError
from tidegate.eventtime.policy import NONE


def check_percentile(percentile: float) -> None:
    if isinstance(percentile, bool) or not isinstance(percentile, (int, float)) or not 0 < percentile <= 100:
        raise ConfigError(f"watermark percentile is {percentile!r}", "use a number above 0 and at most 100, e.g. 95")


def percentile_watermark_us(unit_watermarks_us: Sequence[int], percentile: float) -> int:
    """The time by which ``percentile`` % of the units have their watermark; NONE while fewer
    than that many units have reported."""
    check_percentile(percentile)
    marks = np.sort(np.asarray(unit_watermarks_us, dtype=np.int64))[::-1]
    if len(marks) == 0:
        return int(NONE)
    needed = math.ceil(percentile / 100 * len(marks) - 1e-9)
    return int(marks[max(needed, 1) - 1])


def behind(system_us: np.ndarray, watermark_before_us: np.ndarray | int) -> np.ndarray:
    """Kept events whose system time is below the watermark in force when they arrived: their
    windows (or rows) may already be out. A heuristic (minimum) watermark never has any;
    a percentile one does, and each goes to the side output."""
    before = np.asarray(watermark_before_us, dtype=np.int64)
    return (before != NONE) & (np.asarray(system_us, dtype=np.int64) < before)
