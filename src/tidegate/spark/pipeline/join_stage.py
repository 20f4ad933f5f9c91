"""Join stage on Spark: a temporal join of the job's two inputs, each row emitted once final.

Each micro-batch's kept events enter the stage once per input whose ``filter`` they pass,
as one row per (input side, event): the side, the event's position and system time, the
join keys evaluated over the event, and the event itself as a struct (payload, position,
``arrival_time``, ``system_time``). Buffer ∪ entering rows are grouped by the keys and each
group goes through the core's :func:`tidegate.eventtime.joins.step` on executors, with
positions and times only; the rows it emits are then joined back to their events in
Spark SQL, and the events it holds become the next buffer. A NULL key matches nothing, as
in SQL: its left events can only come out unmatched.

The joined row exposes each side under its input's name (``orders.amount``), which the
job's ``filter`` and ``select`` read; the output carries the left event's position, the
right event's (NULL when unmatched) and the row's time as ``system_time``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from tidegate.eventtime import joins as J
from tidegate.jobspec import JobSpec
from tidegate.jobspec.joins import JoinSpec
from tidegate.spark.pipeline.window_stage import ROLE, Frontiers
from tidegate.spark.spec_columns import spec_column

SIDE = "_side"  # "left" or "right"
EVENT = "_event"  # the event as a struct
STEP_SCHEMA = StructType([
    StructField(ROLE, StringType(), False),
    StructField(SIDE, StringType(), True),  # keep rows: which side is held
    StructField("partition", IntegerType(), True),  # keep: the held event; emit: the left event
    StructField("offset", LongType(), True),
    StructField("right_partition", IntegerType(), True),  # emit: the right event, NULL when unmatched
    StructField("right_offset", LongType(), True),
    StructField("out_us", LongType(), True),
])  # fmt: skip


def _key(j: int) -> str:
    return f"_k{j}"


def _join(spec: JobSpec) -> JoinSpec:
    """The job's join: the join stage runs only for a job that has one."""
    if spec.join is None:
        raise ValueError(f"job {spec.name} has no join for the join stage to run")
    return spec.join


def entering_rows(spec: JobSpec, kept: DataFrame, members: Mapping[str, Column]) -> DataFrame:
    """This batch's kept events as the stage holds them, once per input they belong to
    (``members``: per input, the condition of its events)."""
    join = _join(spec)
    event = F.struct(*spec.payload, "partition", "offset", "arrival_time",
                     F.timestamp_micros("system_us").alias("system_time"))  # fmt: skip
    sides = []
    key_types = None
    for side, name, exprs in (("left", join.left, [a for a, _ in join.keys]),
                              ("right", join.right, [b for _, b in join.keys])):  # fmt: skip
        mine = kept.where(members[name])
        framed = mine.select("partition", "offset", "system_us", event.alias(name))
        keys = [spec_column(e) for e in exprs]
        if key_types is None:  # the right keys take the left keys' types: equal values group together
            key_types = [f.dataType for f in framed.select(*keys).schema.fields]
        else:
            keys = [k.cast(t) for k, t in zip(keys, key_types, strict=True)]  # as many right keys as left
        sides.append(
            framed.select(
                F.lit(side).alias(SIDE),
                "partition",
                "offset",
                "system_us",
                *[k.alias(_key(j)) for j, k in enumerate(keys)],
                F.col(name).alias(EVENT),
            )
        )
    return sides[0].unionByName(sides[1])


def input_counts(spec: JobSpec, kept: DataFrame, members: Mapping[str, Column]) -> dict[int, dict[str, int]]:
    """Per log partition, how many of the batch's kept events each input took (semantics §5: the
    metrics show each input); an event both filters take counts in both."""
    takes = [F.sum(F.coalesce(members[i.name], F.lit(False)).cast("int")).alias(i.name) for i in spec.inputs]
    rows = kept.groupBy("partition").agg(*takes).collect()
    return {int(r["partition"]): {i.name: int(r[i.name] or 0) for i in spec.inputs} for r in rows}


def join_step(join_spec: JoinSpec, rows: DataFrame, frontiers: Frontiers, emit_after_us: int | None) -> DataFrame:
    """``rows``: buffer ∪ :func:`entering_rows` (or a later join step's rows, :mod:`.step_join`).
    One row per emitted join row (``emit``) and per event held for the next batch (``keep``),
    positions only."""
    join = join_spec.join
    prev, now = frontiers
    keys = [_key(j) for j in range(len(join_spec.keys))]

    def per_group(pdf: pd.DataFrame) -> pd.DataFrame:
        left, right = pdf[pdf[SIDE] == "left"], pdf[pdf[SIDE] == "right"]
        if pdf[keys].iloc[0].isna().any():  # a NULL key equals nothing
            right = right.iloc[:0]
        lpos = left[["partition", "offset"]].to_numpy(np.int64)
        rpos = right[["partition", "offset"]].to_numpy(np.int64)
        st = J.step(join, left["system_us"].to_numpy(np.int64), lpos, right["system_us"].to_numpy(np.int64), rpos,
                    prev, now, emit_after_us)  # fmt: skip
        matched = st.rows.right >= 0
        right_at = np.zeros((len(matched), 2), dtype=np.int64)
        right_at[matched] = rpos[st.rows.right[matched]]
        emitted = pd.DataFrame({
            ROLE: "emit", SIDE: None,
            "partition": lpos[st.rows.left, 0], "offset": lpos[st.rows.left, 1],
            "right_partition": pd.Series(right_at[:, 0], dtype="Int64").where(matched, pd.NA),
            "right_offset": pd.Series(right_at[:, 1], dtype="Int64").where(matched, pd.NA),
            "out_us": st.rows.out_us,
        })  # fmt: skip
        held = pd.concat([left[st.keep_left], right[st.keep_right]])
        kept = pd.DataFrame({ROLE: "keep", SIDE: held[SIDE].to_numpy(object), "partition": held["partition"].to_numpy(),
                             "offset": held["offset"].to_numpy(), "right_partition": None, "right_offset": None,
                             "out_us": None})  # fmt: skip
        with warnings.catch_warnings():  # the NULL columns of each kind of row: their types are the schema's
            warnings.simplefilter("ignore", FutureWarning)
            return pd.concat([emitted, kept], ignore_index=True)[[f.name for f in STEP_SCHEMA.fields]]

    return (
        rows.select(SIDE, "partition", "offset", "system_us", *keys)
        .groupBy(*keys)
        .applyInPandas(per_group, STEP_SCHEMA)
    )


def still_held(rows: DataFrame, stepped: DataFrame) -> DataFrame:
    """The next buffer: the rows whose event the step holds."""
    held = stepped.where(F.col(ROLE) == "keep").select(SIDE, "partition", "offset")
    return rows.join(held, [SIDE, "partition", "offset"], "left_semi")


def emitted_output(spec: JobSpec, rows: DataFrame, stepped: DataFrame) -> DataFrame:
    """The emitted join rows with both events, through ``filter`` and ``select``."""
    join = _join(spec)
    events = rows.select(SIDE, "partition", "offset", EVENT)
    left = events.where(F.col(SIDE) == "left").select("partition", "offset", F.col(EVENT).alias(join.left))
    right = events.where(F.col(SIDE) == "right").select(F.col("partition").alias("right_partition"),
                                                        F.col("offset").alias("right_offset"),
                                                        F.col(EVENT).alias(join.right))  # fmt: skip
    joined = (stepped.where(F.col(ROLE) == "emit")
              .join(left, ["partition", "offset"], "inner")
              .join(right, ["right_partition", "right_offset"], "left"))  # fmt: skip
    if spec.filter:
        joined = joined.where(spec_column(spec.filter))
    position = [F.col("partition"), F.col("offset"), F.col("right_partition"), F.col("right_offset"),
                F.timestamp_micros("out_us").alias("system_time")]  # fmt: skip
    return joined.select(*position, *[spec_column(e).alias(n) for n, e in spec.select])
