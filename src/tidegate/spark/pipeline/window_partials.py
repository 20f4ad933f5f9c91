"""Partial aggregates per (window, group) for tumbling and hopping windows.

Why: with an event buffer (:mod:`tidegate.spark.pipeline.window_stage`) every batch reads
back, steps and writes again the events of every open window — at 100k-event batches
about a third of the batch once more. When each of a job's aggregates can be merged —
``count(*)``, and ``count``, ``sum``, ``min``, ``max``, ``avg`` of one column — the window
stage keeps one row per open (window, group) instead, holding mergeable parts
(:class:`Partial`): a count, a sum (an average is a sum and a count), a min, a max.

Each batch folds its kept events into those parts and merges them with the parts the
previous version kept, in one Spark aggregation; a window closes as in
:func:`~tidegate.spark.pipeline.window_stage.fixed_window_step` — emitted when
``previous frontier < end <= frontier`` (and ``end > emit_after``), kept while
``end > frontier``, dropped otherwise — so every window's row is the one the event buffer
gives. Tests hold the two paths to each other and to the core.

Exactness: counts, minima, maxima and sums of integers are the same whatever the cuts.
A sum or average of ``double``/``float`` adds the same values grouped by batch, so it can
differ from a one-pass sum in the last bits (relative error below n·2⁻⁵³ for n values) —
as a one-pass sum already does between Spark's task partitionings; the comparisons of
outputs (:mod:`tidegate.spark.tools.compare`) round doubles to 9 digits for that reason.

A kept row also holds ``system_us``, the oldest system time of its events, so the window
stage's output watermark (SPEC §4) reads the same as with an event buffer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tidegate.eventtime.windows import HoppingWindow, TumblingWindow, Window
from tidegate.jobspec.fields import AGGREGATE_BUILTINS
from tidegate.spark.pipeline.window_stage import ROLE, Frontiers, window_index, with_frontiers

FRAME = "partials"  # the state version's frame of open windows' parts

_CALL = re.compile(r"(count|sum|min|max|avg)\s*\(\s*(\*|[A-Za-z_][A-Za-z0-9_]*)\s*\)", re.IGNORECASE)
_NUMERIC = {"int": "bigint", "bigint": "bigint", "double": "double", "float": "double"}  # type of their sum
_BUILTIN_TYPES = {"partition": "int", "offset": "bigint"}  # the columns of AGGREGATE_BUILTINS


@dataclass(frozen=True)
class Partial:
    """One output aggregate as mergeable parts: ``function`` of ``column`` (None: ``*``)."""

    name: str  # the output column
    function: str  # count, sum, min, max, avg
    column: str | None
    sum_type: str | None = None  # sum and avg: the type the parts add up in

    def parts(self) -> dict[str, Column]:
        """Part columns of one event (a contribution), named in the state."""
        c = None if self.column is None else F.col(self.column)
        if self.function == "count":
            one = F.lit(1) if c is None else F.when(c.isNotNull(), F.lit(1)).otherwise(F.lit(0))
            return {self._part("n"): one.cast("bigint")}
        if self.function == "sum":
            return {self._part("sum"): c.cast(self.sum_type)}
        if self.function == "avg":
            return {self._part("sum"): c.cast("double"),
                    self._part("n"): F.when(c.isNotNull(), F.lit(1)).otherwise(F.lit(0)).cast("bigint")}
        return {self._part(self.function): c}

    def merged(self) -> list[Column]:
        """The parts merged over many contributions (an aggregation)."""
        merge = {"n": F.sum, "sum": F.sum, "min": F.min, "max": F.max}
        return [merge[name.rsplit("__", 1)[1]](name).alias(name) for name in self.parts()]

    def value(self) -> Column:
        """The aggregate's value from merged parts."""
        if self.function == "count":
            return F.col(self._part("n")).alias(self.name)
        if self.function == "avg":
            n = F.col(self._part("n"))
            return F.when(n > 0, F.col(self._part("sum")) / n.cast("double")).alias(self.name)
        return F.col(self._part(self.function)).alias(self.name)

    def _part(self, kind: str) -> str:
        return f"_p_{self.name}__{kind}"


def partials_for(window: Window | None, aggregates: Sequence[tuple[str, str]],
                 payload: Mapping[str, str]) -> list[Partial] | None:
    """The job's aggregates as :class:`Partial` s, or None when the window stage must keep
    events: a window other than tumbling or hopping, or any aggregate that is not one
    mergeable call on a payload field (``sum``/``avg`` of int, bigint, double or float)."""
    if not isinstance(window, (TumblingWindow, HoppingWindow)) or not aggregates:
        return None
    builtins = {name: _BUILTIN_TYPES[name] for name in AGGREGATE_BUILTINS}
    types = {**builtins, **{name.lower(): t for name, t in payload.items()}}
    names = {name.lower(): name for name in [*builtins, *payload]}
    out = []
    for name, expr in aggregates:
        m = _CALL.fullmatch(expr.strip())
        if m is None:
            return None
        function, arg = m.group(1).lower(), m.group(2)
        if arg == "*":
            if function != "count":
                return None
            out.append(Partial(name, function, None))
            continue
        column = names.get(arg.lower())
        if column is None:
            return None
        sum_type = _NUMERIC.get(types[arg.lower()]) if function in ("sum", "avg") else None
        if function in ("sum", "avg") and sum_type is None:
            return None  # decimals change precision when sums of sums are taken: keep events
        out.append(Partial(name, function, column, sum_type))
    return out


def contributions(events: DataFrame, window: TumblingWindow | HoppingWindow, partials: Sequence[Partial],
                  keys: Sequence[str]) -> DataFrame:
    """Each event's parts in each window it belongs to: ``window_start_us``,
    ``window_end_us``, ``keys``, the part columns and ``system_us`` — the shape of the
    parts a state version keeps, so both merge in one aggregation."""
    parts = {name: col for p in partials for name, col in p.parts().items()}
    k_lo, k_hi, hop = window_index(window)
    k = k_hi if k_lo is None else F.explode(F.sequence(k_lo, k_hi))
    framed = events.select(*keys, "system_us", *[col.alias(name) for name, col in parts.items()], k.alias("_k"))
    start = F.col("_k") * F.lit(hop) + F.lit(window.offset_us)
    return framed.select(start.alias("window_start_us"), (start + F.lit(window.size_us)).alias("window_end_us"),
                         *keys, *parts, "system_us")


def merge_step(spark: SparkSession, contributed: DataFrame, partials: Sequence[Partial], keys: Sequence[str],
               frontiers: Frontiers, key_frontiers: dict[str, Frontiers] | None = None,
               unit_column: str | None = None, emit_after_us: int | None = None) -> DataFrame:
    """Merge contributions (this batch's and the parts kept before) per (window, ``keys``)
    and tag each window ``_role``: "emit" when ``prev < end <= now`` and
    ``end > emit_after_us``, "keep" when ``end > now``; windows an earlier batch closed are
    left out. The frontiers are ``frontiers`` for every row, or per substream key
    (``key_frontiers`` by ``unit_column``), as in
    :func:`~tidegate.spark.pipeline.window_stage.fixed_window_step`."""
    grouped = ["window_start_us", "window_end_us", *keys]
    merged = contributed.groupBy(*grouped).agg(
        *[c for p in partials for c in p.merged()], F.min("system_us").alias("system_us"))
    framed = with_frontiers(spark, merged, frontiers, key_frontiers, unit_column)
    end = F.col("window_end_us")
    closing = (end > F.col("_prev_us")) & (end <= F.col("_now_us"))
    if emit_after_us is not None:
        closing &= end > F.lit(int(emit_after_us))
    role = F.when(closing, F.lit("emit")).when(end > F.col("_now_us"), F.lit("keep"))
    return framed.select(*merged.columns, role.alias(ROLE)).where(F.col(ROLE).isNotNull())


def emitted_rows(stepped: DataFrame, partials: Sequence[Partial], group_columns: Sequence[str]) -> DataFrame:
    """Final window rows, as :func:`~tidegate.spark.pipeline.window_stage.aggregate_emitted`
    gives them: window_start, window_end, group columns, aggregates."""
    return stepped.where(F.col(ROLE) == "emit").select(
        F.timestamp_micros("window_start_us").alias("window_start"),
        F.timestamp_micros("window_end_us").alias("window_end"),
        *group_columns,
        *[p.value() for p in partials],
    )


def still_open(stepped: DataFrame) -> DataFrame:
    """The parts the next version keeps: windows the frontier has not passed."""
    return stepped.where(F.col(ROLE) == "keep").drop(ROLE)
