"""Window stage on Spark: close windows on the job watermark, emit each exactly once.

The stage keeps a buffer of kept events whose windows are not all final. Each
micro-batch, buffer ∪ new kept events go through the core's window assignment (on
executors); memberships of windows that became final in this step —
``previous frontier < close_at <= frontier`` — are aggregated with the job's Spark SQL
aggregate expressions and emitted; events some open window still needs stay buffered.
Keeping events rather than partial aggregates is what lets any Spark SQL aggregate work,
and makes the streaming result the batch query over the same events, by construction.

Tumbling and hopping windows depend on nothing but an event's own time, so their step is
written in Spark SQL (:func:`fixed_window_step`) and never leaves the JVM; sliding and
session windows depend on an event's neighbours and run the core itself per key group
(:func:`window_step`). Both return the same rows; tests hold both to the core's ``step``.

Sessions cut as Stream Analytics cuts them depend on where a burst of events began, which
may have left the buffer: their rows carry that start (:data:`SESSION_FROM`, a new event's
own time) from one step to the next (:mod:`tidegate.eventtime.sessions`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from tidegate.eventtime.sessions import OVER_MAX_DURATION
from tidegate.eventtime.windows import HoppingWindow, SessionWindow, TumblingWindow, Window, close_delay_us, step
from tidegate.spark.spec_columns import spec_column

ROLE = "_role"  # "emit": one row per (event, closing window); "keep": stays buffered
SESSION_FROM = "_session_from_us"  # a session's event: the first event of its burst, as far as known
WINDOW_COLUMNS = [StructField("window_start_us", LongType(), True), StructField("window_end_us", LongType(), True)]


Frontiers = tuple[int, int]  # (previous, current) watermark a window must pass


def row_frontiers(pdf: pd.DataFrame, scalar: Frontiers, per_key: dict | None, unit_column: str | None):
    """(previous, current) frontier per row: its unit's pair in ``per_key``, else ``scalar``."""
    n = len(pdf)
    if per_key is None:
        return np.full(n, scalar[0], dtype=np.int64), np.full(n, scalar[1], dtype=np.int64)
    pairs = [per_key.get(u, scalar) for u in pdf[unit_column].to_numpy(dtype=object)]
    both = np.array(pairs, dtype=np.int64).reshape(n, 2)
    return both[:, 0], both[:, 1]


def carries_session_from(window: Window | None) -> bool:
    """Whether the window's rows carry :data:`SESSION_FROM`: sessions cut only once they have
    lasted their maximum duration (every-check-point sessions do not need it, and keep the
    buffer they had)."""
    return isinstance(window, SessionWindow) and window.cut == OVER_MAX_DURATION


def entering(rows: DataFrame, window: Window | None) -> DataFrame:
    """New rows as the window stage keeps them: with :data:`SESSION_FROM` (their own time)
    when the window carries it."""
    return rows.withColumn(SESSION_FROM, F.col("system_us")) if carries_session_from(window) else rows


def _step(window: Window, pdf: pd.DataFrame, prev: np.ndarray, now: np.ndarray, emit_after_us) -> pd.DataFrame:
    """The core's window step over a frame of buffered + new events (one key group, or
    any rows for fixed windows, which do not depend on neighbours)."""
    known = pdf[SESSION_FROM].to_numpy(np.int64) if SESSION_FROM in pdf.columns else None
    result = step(
        window, pdf["system_us"].to_numpy(np.int64), prev, now, emit_after_us=emit_after_us, session_from_us=known
    )
    emitted = pdf.iloc[result.emit.event_index].copy()
    emitted["window_start_us"] = result.emit.start_us
    emitted["window_end_us"] = result.emit.end_us
    emitted[ROLE] = "emit"
    kept = pdf[result.keep].copy()
    if known is not None and result.session_from_us is not None:
        kept[SESSION_FROM] = result.session_from_us[result.keep]
    kept["window_start_us"] = pd.array([None] * len(kept), dtype="Int64")
    kept["window_end_us"] = pd.array([None] * len(kept), dtype="Int64")
    kept[ROLE] = "keep"
    return pd.concat([emitted, kept], ignore_index=True)


def window_step(
    rows: DataFrame,
    window: Window,
    group_columns: Sequence[str],
    frontiers: Frontiers,
    key_frontiers: dict[str | None, Frontiers] | None = None,
    unit_column: str | None = None,
    emit_after_us: int | None = None,
) -> DataFrame:
    """``rows``: buffered + new kept events with ``system_us``. A window becomes final when
    the frontier passes its ``close_at``: ``frontiers`` for all rows, or per substream key
    (``key_frontiers`` by ``unit_column``) when windows wait only for their own key.
    Windows ending at or before ``emit_after_us`` are rebuilt but not emitted (an earlier
    lineage output them).
    Returns the rows tagged ``_role`` with ``window_start_us`` / ``window_end_us``."""
    schema = StructType(list(rows.schema.fields) + WINDOW_COLUMNS + [StructField(ROLE, StringType(), False)])
    names = [f.name for f in schema.fields]

    def run(pdf: pd.DataFrame) -> pd.DataFrame:
        prev, now = row_frontiers(pdf, frontiers, key_frontiers, unit_column)
        return _step(window, pdf, prev, now, emit_after_us)[names]

    if isinstance(window, (TumblingWindow, HoppingWindow)):

        def per_rows(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            for pdf in frames:
                if len(pdf):
                    yield run(pdf)

        return rows.mapInPandas(per_rows, schema)

    def per_group(pdf: pd.DataFrame) -> pd.DataFrame:
        # deterministic order inside a group, whatever the shuffle delivered
        return run(pdf.sort_values(["system_us", "partition", "offset"], kind="stable").reset_index(drop=True))

    return rows.groupBy(*one_group_or([F.col(c) for c in group_columns])).applyInPandas(per_group, schema)


def one_group_or(keys: list[Column]) -> list[Column]:
    """``keys``, or without any one constant key that puts every row in one group. Not the
    integer literal ``lit(0)``: Spark reads an integer literal in a GROUP BY as an ordinal
    (the first column) and fails analysis with "unresolved operator … unresolvedordinal(0)"."""
    return keys or [F.lit("all").alias("_all")]


def arrival_us(arrival_time: pd.Series) -> np.ndarray:
    """A frame's ``arrival_time`` column as µs since the epoch (the analytic order's second key)."""
    times = pd.to_datetime(arrival_time, utc=True)
    return ((times - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(microseconds=1)).to_numpy(np.int64)


def fixed_window_step(
    spark: SparkSession,
    rows: DataFrame,
    window: TumblingWindow | HoppingWindow,
    frontiers: Frontiers,
    key_frontiers: dict[str | None, Frontiers] | None = None,
    unit_column: str | None = None,
    emit_after_us: int | None = None,
) -> DataFrame:
    """:func:`window_step` for tumbling and hopping windows, in Spark SQL (no Python worker).

    An event at ``S`` belongs to windows ``k = k_lo .. k_hi`` (``(k·hop + offset, + size]``,
    or ``[…)`` with ``start_inclusive`` edges; a tumbling window is a hopping one with
    ``hop = size``, one window per event). With ``close = end + close_delay`` (1 µs when the
    end is in: see :mod:`tidegate.eventtime.windows`) it yields one ``emit`` row per window
    with ``prev < close <= now`` (and ``end > emit_after``) and one ``keep`` row while its
    last window is still open (``close(k_hi) > now``) — the core's ``step``, row for row.
    Plain column expressions (no lambdas) keep it in generated code.
    Per-key frontiers as :func:`with_frontiers` joins them; a unit without an entry follows
    the scalar ``frontiers``, as in :func:`window_step`."""
    hop = window.hop_us if isinstance(window, HoppingWindow) else window.size_us
    size, off = window.size_us, window.offset_us
    names = rows.columns
    framed = with_frontiers(spark, rows, frontiers, key_frontiers, unit_column)
    k_lo, k_hi, _ = window_index(window)
    if k_lo is None:  # tumbling: one window per event
        exploded = framed.select("*", k_hi.alias("_k"), k_hi.alias("_k_hi"))
    else:
        exploded = framed.select("*", F.explode(F.sequence(k_lo, k_hi)).alias("_k"), k_hi.alias("_k_hi"))
    start = F.col("_k") * F.lit(hop) + F.lit(off)
    end = start + F.lit(size)
    close = end + F.lit(close_delay_us(window))
    closing = (close > F.col("_prev_us")) & (close <= F.col("_now_us"))
    if emit_after_us is not None:
        closing &= end > F.lit(int(emit_after_us))
    # the last window of an event decides whether it stays; it cannot also close now
    stays = (F.col("_k") == F.col("_k_hi")) & (close > F.col("_now_us"))
    role = F.when(closing, F.lit("emit")).when(stays, F.lit("keep"))
    emit = F.col(ROLE) == "emit"
    return (
        exploded.select(*names, start.alias("_s"), end.alias("_e"), role.alias(ROLE))
        .where(F.col(ROLE).isNotNull())
        .select(
            *names,
            F.when(emit, F.col("_s")).alias("window_start_us"),
            F.when(emit, F.col("_e")).alias("window_end_us"),
            ROLE,
        )
    )


def with_frontiers(
    spark: SparkSession,
    rows: DataFrame,
    frontiers: Frontiers,
    key_frontiers: dict[str | None, Frontiers] | None,
    unit_column: str | None,
) -> DataFrame:
    """``rows`` with ``_prev_us`` and ``_now_us``: ``frontiers`` for every row, or the pair of
    its unit in ``key_frontiers`` (a broadcast table joined on ``unit_column``, NULL-safe;
    faster than a literal map even for hundreds of keys); a unit without an entry follows
    the scalar ``frontiers``."""
    if key_frontiers is None:
        return rows.withColumns({"_prev_us": F.lit(frontiers[0]), "_now_us": F.lit(frontiers[1])})
    if unit_column is None:
        raise ValueError("with_frontiers: key_frontiers need the unit_column their keys are values of")
    table = spark.createDataFrame(
        [(k, int(p), int(n)) for k, (p, n) in key_frontiers.items()],
        "_fk_unit STRING, _fk_prev BIGINT, _fk_now BIGINT",
    )
    joined = rows.join(F.broadcast(table), rows[unit_column].eqNullSafe(table["_fk_unit"]), "left")
    return joined.select(
        *rows.columns,
        F.coalesce("_fk_prev", F.lit(frontiers[0])).alias("_prev_us"),
        F.coalesce("_fk_now", F.lit(frontiers[1])).alias("_now_us"),
    )


def window_index(window: TumblingWindow | HoppingWindow) -> tuple[Column | None, Column, int]:
    """(first, last) index ``k`` of the windows ``(k·hop + offset, + size]`` holding an event
    at ``system_us`` (``[…)`` with ``start_inclusive`` edges: end-inclusive windows hold
    ``S`` as start-inclusive ones hold ``S − 1 µs``, the core's rule), and the hop; the first
    is None for a tumbling window (one window per event). Floor division as Python's: right
    for times before the epoch too, and for a negative offset."""
    hop = window.hop_us if isinstance(window, HoppingWindow) else window.size_us
    size = window.size_us
    off = window.offset_us + close_delay_us(window)  # S − shift − offset
    k_hi = F.expr(f"(system_us - {off}L - pmod(system_us - {off}L, {hop}L)) div {hop}L")
    if hop == size:
        return None, k_hi, hop
    k_lo = F.expr(f"(system_us - {off}L - {size}L - pmod(system_us - {off}L - {size}L, {hop}L)) div {hop}L + 1L")
    return k_lo, k_hi, hop


def aggregate_emitted(
    stepped: DataFrame, group_columns: Sequence[str], aggregates: Sequence[tuple[str, str]], having: str | None = None
) -> DataFrame:
    """Final window rows: window_start, window_end, group columns, aggregates — those for
    which ``having`` holds, when given (over those columns, after the window)."""
    emitted = stepped.where(F.col(ROLE) == "emit")
    aggs = [spec_column(expr).alias(name) for name, expr in aggregates]
    out = emitted.groupBy("window_start_us", "window_end_us", *group_columns).agg(*aggs)
    rows = out.select(
        F.timestamp_micros("window_start_us").alias("window_start"),
        F.timestamp_micros("window_end_us").alias("window_end"),
        *group_columns,
        *[name for name, _ in aggregates],
    )
    return rows if having is None else rows.where(spec_column(having))


def still_buffered(stepped: DataFrame, buffer_columns: Sequence[str]) -> DataFrame:
    return stepped.where(F.col(ROLE) == "keep").select(*buffer_columns)
