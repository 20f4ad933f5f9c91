"""Partial aggregates per (window, group) for tumbling and hopping windows.

Why: with an event buffer (:mod:`tidegate.spark.pipeline.window_stage`) every batch reads
back, steps and writes again the events of every open window — at 100k-event batches
about a third of the batch once more. When each of a job's aggregates can be merged —
one call of an aggregate :mod:`tidegate.eventtime.aggregates` registers (``count(*)``,
and ``count``, ``sum``, ``min``, ``max``, ``avg`` of one column) — the window stage keeps
one row per open (window, group) instead, holding mergeable parts (:class:`Partial`): a
count, a sum (an average is a sum and a count), a min, a max. What each aggregate keeps
and how its value reads its parts is its declaration there; this module puts it in
Spark SQL.

Each batch folds its kept events into those parts and merges them with the parts the
previous version kept, in one Spark aggregation; a window closes as in
:func:`~tidegate.spark.pipeline.window_stage.fixed_window_step` — with ``close = end + 1 µs``
for windows that include their end, ``= end`` for ``start_inclusive`` ones: emitted when
``previous frontier < close <= frontier`` (and ``end > emit_after``), kept while
``close > frontier``, dropped otherwise — so every window's row is the one the event buffer
gives. Tests hold the two paths to each other and to the core.

Exactness: counts, minima, maxima and sums of integers are the same whatever the cuts.
A sum or average of ``double``/``float`` adds the same values grouped by batch, so it can
differ from a one-pass sum in the last bits (relative error below n·2⁻⁵³ for n values) —
as a one-pass sum already does between Spark's task partitionings; the comparisons of
outputs (:mod:`tidegate.spark.tools.compare`) round doubles to 9 digits for that reason.

A kept row also holds ``system_us``, the oldest system time of its events, so the window
stage's output watermark (semantics §4) reads the same as with an event buffer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tidegate.eventtime.aggregates import MERGE, Mergeable
from tidegate.eventtime.aggregates import lookup as registered
from tidegate.eventtime.aggregates import names as registered_names
from tidegate.eventtime.windows import HoppingWindow, TumblingWindow, Window
from tidegate.jobspec.fields import AGGREGATE_BUILTINS
from tidegate.spark.columns import col, cols, reused
from tidegate.spark.pipeline.window_stage import ROLE, Frontiers, window_index, with_frontiers

FRAME = "partials"  # the state version's frame of open windows' parts

_ARGUMENT = r"\s*\(\s*(\*|[A-Za-z_][A-Za-z0-9_]*)\s*\)"  # one column, or *
_NUMERIC = {"int": "bigint", "bigint": "bigint", "double": "double", "float": "double"}  # type of their sum
_BUILTIN_TYPES = {"partition": "int", "offset": "bigint"}  # the columns of AGGREGATE_BUILTINS


@dataclass(frozen=True)
class Partial:
    """One output aggregate as mergeable parts: ``function`` of ``column`` (None: ``*``)."""

    name: str  # the output column
    function: str  # count, sum, min, max, avg
    column: str | None
    sum_type: str | None = None  # sum and avg: the type the parts add up in

    @property
    def aggregate(self) -> Mergeable:
        found = registered(self.function)
        if found is None:
            raise ValueError(f"aggregate {self.name}: {self.function} is not a registered mergeable aggregate")
        return found

    @reused
    def parts(self) -> Mapping[str, Column]:
        """Part columns of one event (a contribution), named in the state (read-only: built once)."""
        c = None if self.column is None else F.col(self.column)
        out = {}
        for kind in self.aggregate.parts:
            if kind == "n":
                one = F.lit(1) if c is None else F.when(c.isNotNull(), F.lit(1)).otherwise(F.lit(0))
                out[self._part(kind)] = one.cast("bigint")
            elif c is None:
                raise ValueError(f"aggregate {self.name}: {self.function}(*) keeps a {kind} part, which needs a column")
            elif kind == "sum":
                sum_type = self.aggregate.sum_type or self.sum_type
                if sum_type is None:
                    raise ValueError(f"aggregate {self.name}: the sum part of {self.function} needs a sum_type")
                out[self._part(kind)] = c.cast(sum_type)
            else:
                out[self._part(kind)] = c
        return MappingProxyType(out)

    @reused
    def merged(self) -> tuple[Column, ...]:
        """The parts merged over many contributions (an aggregation)."""
        return tuple(getattr(F, MERGE[name.rsplit("__", 1)[1]])(name).alias(name) for name in self.parts())

    @reused
    def value(self) -> Column:
        """The aggregate's value from merged parts."""
        read = self.aggregate.value
        if read == ("sum", "n"):
            n = F.col(self._part("n"))
            return F.when(n > 0, F.col(self._part("sum")) / n.cast("double")).alias(self.name)
        return F.col(self._part(read[0])).alias(self.name)

    def _part(self, kind: str) -> str:
        return f"_p_{self.name}__{kind}"


def partials_for(
    window: Window | None, aggregates: Sequence[tuple[str, str]], payload: Mapping[str, str]
) -> list[Partial] | None:
    """The job's aggregates as :class:`Partial` s, or None when the window stage must keep
    events: a window other than tumbling or hopping, or any aggregate that is not one
    mergeable call on a payload field (``sum``/``avg`` of int, bigint, double or float)."""
    if not isinstance(window, (TumblingWindow, HoppingWindow)) or not aggregates:
        return None
    builtins = {name: _BUILTIN_TYPES[name] for name in AGGREGATE_BUILTINS}
    types = {**builtins, **{name.lower(): t for name, t in payload.items()}}
    names = {name.lower(): name for name in [*builtins, *payload]}
    out = []
    call = re.compile(f"({'|'.join(map(re.escape, registered_names()))}){_ARGUMENT}", re.IGNORECASE)
    for name, expr in aggregates:
        m = call.fullmatch(expr.strip())
        if m is None:
            return None
        function, arg = m.group(1).lower(), m.group(2)
        declared = registered(function)
        assert declared is not None  # the pattern matched one of the registered names
        if arg == "*":
            if not declared.star:
                return None
            out.append(Partial(name, function, None))
            continue
        column = names.get(arg.lower())
        if column is None:
            return None
        sum_type = _NUMERIC.get(types[arg.lower()]) if declared.needs_sum_type else None
        if declared.needs_sum_type and sum_type is None:
            return None  # decimals change precision when sums of sums are taken: keep events
        out.append(Partial(name, function, column, sum_type))
    return out


def contributions(
    events: DataFrame, window: TumblingWindow | HoppingWindow, partials: Sequence[Partial], keys: Sequence[str]
) -> DataFrame:
    """Each event's parts in each window it belongs to: ``window_start_us``,
    ``window_end_us``, ``keys``, the part columns and ``system_us`` — the shape of the
    parts a state version keeps, so both merge in one aggregation."""
    framing, framed = _contribution_columns(window, tuple(partials), tuple(keys))
    return events.select(*framing).select(*framed)


@reused
def _contribution_columns(
    window: TumblingWindow | HoppingWindow, partials: tuple[Partial, ...], keys: tuple[str, ...]
) -> tuple[tuple[Column, ...], tuple[Column, ...]]:
    """The two projections of :func:`contributions`: each event's parts and window index
    ``_k`` (one row per window it is in); then each row's window bounds, keys and parts."""
    parts = {name: part for p in partials for name, part in p.parts().items()}
    k_lo, k_hi, hop = window_index(window)
    k = k_hi if k_lo is None else F.explode(F.sequence(k_lo, k_hi))
    start = F.col("_k") * F.lit(hop) + F.lit(window.offset_us)
    return (
        (*cols(keys), col("system_us"), *[c.alias(name) for name, c in parts.items()], k.alias("_k")),
        (
            start.alias("window_start_us"),
            (start + F.lit(window.size_us)).alias("window_end_us"),
            *cols(keys),
            *cols(parts),
            col("system_us"),
        ),
    )


def merged_parts(contributed: DataFrame, partials: Sequence[Partial], keys: Sequence[str]) -> DataFrame:
    """Contributions merged per (window, ``keys``): the state's columns, before any frontier."""
    grouped, merged = _merge_columns(tuple(partials), tuple(keys))
    return contributed.groupBy(*grouped).agg(*merged)


@reused
def _merge_columns(
    partials: tuple[Partial, ...], keys: tuple[str, ...]
) -> tuple[tuple[Column, ...], tuple[Column, ...]]:
    """What :func:`merged_parts` groups by, and its aggregates."""
    return (
        cols(["window_start_us", "window_end_us", *keys]),
        (*[c for p in partials for c in p.merged()], F.min("system_us").alias("system_us")),
    )


def merge_step(
    spark: SparkSession,
    contributed: DataFrame,
    partials: Sequence[Partial],
    keys: Sequence[str],
    frontiers: Frontiers,
    key_frontiers: dict[str | None, Frontiers] | None = None,
    unit_column: str | None = None,
    emit_after_us: int | None = None,
    close_delay: int = 1,
) -> DataFrame:
    """Merge contributions (this batch's and the parts kept before) per (window, ``keys``)
    and tag each window ``_role`` by ``close = end + close_delay`` (the window's
    :func:`~tidegate.eventtime.windows.close_delay_us`): "emit" when ``prev < close <= now``
    and ``end > emit_after_us``, "keep" when ``close > now``; windows an earlier batch closed are
    left out. The frontiers are ``frontiers`` for every row, or per substream key
    (``key_frontiers`` by ``unit_column``), as in
    :func:`~tidegate.spark.pipeline.window_stage.fixed_window_step`."""
    merged = merged_parts(contributed, partials, keys)
    framed = with_frontiers(spark, merged, frontiers, key_frontiers, unit_column)
    end = F.col("window_end_us")
    close = end + F.lit(int(close_delay))
    closing = (close > F.col("_prev_us")) & (close <= F.col("_now_us"))
    if emit_after_us is not None:
        closing &= end > F.lit(int(emit_after_us))
    role = F.when(closing, F.lit("emit")).when(close > F.col("_now_us"), F.lit("keep"))
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


# -- the step on the driver ------------------------------------------------------------
# The merged parts are one row per open (window, group): few, and they do not depend on the
# frontier. So they come to the driver in one collect that runs beside the policy stage's
# (the frontier is known only once that one is back), with the output rows' columns already
# computed by Spark from the same expressions :func:`emitted_rows` uses; the driver only
# tags each row emit / keep / closed with the frontiers — comparisons of integers — and
# writes both tables itself. No persisted step, no job per output, no plan after the policy.
_OUT = "_o_"  # prefix of the output columns computed beside the parts


def output_column(name: str) -> str:
    """Where :func:`with_output_columns` puts the output column ``name``."""
    return _OUT + name


def with_output_columns(
    merged: DataFrame, partials: Sequence[Partial], extra: Mapping[str, Column] | None = None
) -> DataFrame:
    """``merged`` and, by :func:`output_column`, the columns :func:`emitted_rows` computes for
    each window (the group columns are ``merged``'s own), then ``extra`` (which may read
    those): the output row of every window, should it close now."""
    framed = merged.select(*cols(merged.columns), *_output_columns(tuple(partials)))
    return framed.select("*", *[c.alias(_OUT + name) for name, c in extra.items()]) if extra else framed


@reused
def _output_columns(partials: tuple[Partial, ...]) -> tuple[Column, ...]:
    """The output columns of :func:`with_output_columns`, each under :func:`output_column`."""
    out = {
        "window_start": F.timestamp_micros("window_start_us"),
        "window_end": F.timestamp_micros("window_end_us"),
        **{p.name: p.value() for p in partials},
    }
    return tuple(c.alias(_OUT + name) for name, c in out.items())


def step_on_driver(
    table,
    partials: Sequence[Partial],
    group_columns: Sequence[str],
    extra: Sequence[str],
    frontiers: Frontiers,
    key_frontiers: dict[str | None, Frontiers] | None = None,
    unit_column: str | None = None,
    emit_after_us: int | None = None,
    close_delay: int = 1,
):
    """:func:`merge_step` then :func:`emitted_rows` and :func:`still_open`, over the Arrow
    rows of :func:`with_output_columns`: (the emitted rows with ``extra`` after them, the
    parts the next version keeps). Same rule, same frontiers per row (a unit without an
    entry in ``key_frontiers`` follows ``frontiers``; NULL units match a NULL key)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    end = table.column("window_end_us")
    close = pc.add(end, pa.scalar(int(close_delay), pa.int64()))
    n = table.num_rows
    if key_frontiers is None:
        prev = pa.scalar(int(frontiers[0]), pa.int64())
        now = pa.scalar(int(frontiers[1]), pa.int64())
    else:
        keys = list(key_frontiers)
        at = pc.index_in(table.column(unit_column), value_set=pa.array(keys, pa.string()), skip_nulls=False)
        prev = (
            pc.fill_null(pc.take(pa.array([int(key_frontiers[k][0]) for k in keys], pa.int64()), at), int(frontiers[0]))
            if n
            else pa.array([], pa.int64())
        )
        now = (
            pc.fill_null(pc.take(pa.array([int(key_frontiers[k][1]) for k in keys], pa.int64()), at), int(frontiers[1]))
            if n
            else pa.array([], pa.int64())
        )
    closing = pc.and_(pc.greater(close, prev), pc.less_equal(close, now))
    if emit_after_us is not None:
        closing = pc.and_(closing, pc.greater(end, pa.scalar(int(emit_after_us), pa.int64())))
    closing = pc.fill_null(closing, False)
    staying = pc.and_(pc.invert(closing), pc.fill_null(pc.greater(close, now), False))
    names = ["window_start", "window_end", *group_columns, *[p.name for p in partials], *extra]
    emitted = table.filter(closing).select([c if c in group_columns else _OUT + c for c in names])
    state_columns = table.column_names[: table.column_names.index(_OUT + "window_start")]  # merged_parts' own
    return emitted.rename_columns(names), table.filter(staying).select(state_columns)
