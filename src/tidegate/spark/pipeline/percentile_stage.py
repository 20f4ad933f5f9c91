"""The percentile watermark on Spark (``watermark: {percentile: p}``, semantics §4): lossy, never silent.

In this mode the job has one frontier: the time by which ``p`` % of its units (partitions,
or (partition, key) with ``over``) have their watermark
(:func:`tidegate.eventtime.percentile.percentile_watermark_us`), never going backwards.
Windows and analytic rows wait for it, not for the slowest unit; so a unit behind it may
still deliver kept events whose system time is below it. Those events are *behind the
watermark*: taken out before the window or analytic stage (output already emitted is never
changed), written with the watermark they fell behind to ``behind_watermark/``, and
counted per partition (``behind_watermark`` beside the policy's counts).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from tidegate.eventtime.percentile import percentile_watermark_us
from tidegate.eventtime.policy import NONE, PartitionState, TimePolicy

COUNT = "behind_watermark"


def percentile_frontier_us(states: Sequence[PartitionState], policy: TimePolicy, percentile: float,
                           over: bool, previous_us: int) -> int:  # fmt: skip
    """The job frontier: the percentile over every unit's watermark, at least ``previous_us``.
    A partition without a unit yet (or without ``over``) counts as one unit."""
    if over:
        marks = [s.unit_watermark_us(k, policy) for s in states for k in (list(s.max_system_us) or [None])]
    else:
        marks = [s.unit_watermark_us(None, policy) for s in states]
    return max(int(previous_us), percentile_watermark_us(marks, percentile))


def split_behind(kept: DataFrame, frontier_us: int) -> tuple[DataFrame, DataFrame | None]:
    """(kept events at or after the frontier in force, those behind it); None before the
    first frontier, when nothing can be behind."""
    if frontier_us == NONE:
        return kept, None
    return kept.where(F.col("system_us") >= F.lit(frontier_us)), kept.where(F.col("system_us") < F.lit(frontier_us))


def behind_rows(behind: DataFrame, frontier_us: int, payload: Sequence[str]) -> DataFrame:
    """The side output: position, times, the watermark each event fell behind, its payload."""
    return behind.select(
        "partition", "offset", "arrival_time", "event_time",
        F.timestamp_micros("system_us").alias("system_time"),
        F.timestamp_micros(F.lit(int(frontier_us))).alias("watermark"),
        *payload,
    )  # fmt: skip


def behind_counts(behind: DataFrame | None) -> dict[int, int]:
    if behind is None:
        return {}
    return {r["partition"]: r["count"] for r in behind.groupBy("partition").count().collect()}
