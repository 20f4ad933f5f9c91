"""Policy stage on Spark: the core's :func:`apply_policy` per log partition, on executors.

Each micro-batch's events are cogrouped by log partition with that partition's state
rows, so each task sees one partition's events (sorted by offset) and its state, and
returns the outcomes and the next state. The computation is the core's, unchanged:
the engine cannot disagree with the executable spec.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from tidegate.eventtime.policy import NONE, PartitionState, TimePolicy, apply_policy

STATE_SCHEMA = StructType(
    [
        StructField("partition", IntegerType(), False),
        StructField("is_unit", BooleanType(), False),
        StructField("unit", StringType(), True),
        StructField("max_system_us", LongType(), True),
        StructField("arrival_watermark_us", LongType(), True),
        StructField("last_arrival_us", LongType(), True),
    ]
)
OUTCOME_FIELDS = [
    StructField("action", ByteType(), True),
    StructField("reason", ByteType(), True),
    StructField("system_us", LongType(), True),
    StructField("watermark_us", LongType(), True),
]
KIND = StructField("_kind", StringType(), False)  # "e" event row, "s" state row


def _nullable(v: int) -> object:
    return None if v == NONE else int(v)


def state_from_rows(rows: pd.DataFrame) -> PartitionState:
    part = rows[~rows["is_unit"]]
    pw = int(part["arrival_watermark_us"].iloc[0]) if len(part) and pd.notna(part["arrival_watermark_us"].iloc[0]) else int(NONE)
    last = int(part["last_arrival_us"].iloc[0]) if len(part) and pd.notna(part["last_arrival_us"].iloc[0]) else int(NONE)
    units = rows[rows["is_unit"]]
    max_s = {
        (None if pd.isna(u) else u): int(m)
        for u, m in zip(units["unit"], units["max_system_us"])
        if pd.notna(m)
    }
    return PartitionState(pw, last, max_s)


def state_to_rows(partition: int, state: PartitionState) -> list[dict]:
    rows = [
        dict(
            partition=partition,
            is_unit=False,
            unit=None,
            max_system_us=None,
            arrival_watermark_us=_nullable(state.arrival_watermark_us),
            last_arrival_us=_nullable(state.last_arrival_us),
        )
    ]
    for unit, max_s in sorted(state.max_system_us.items(), key=lambda kv: (kv[0] is not None, kv[0] or "")):
        rows.append(
            dict(
                partition=partition,
                is_unit=True,
                unit=unit,
                max_system_us=int(max_s),
                arrival_watermark_us=None,
                last_arrival_us=None,
            )
        )
    return rows


def seed_state(spark, partitions: list[int]) -> DataFrame:
    """Partition rows for partitions that have no state yet (SPEC §3: unknown, not empty)."""
    rows = [(p, False, None, None, None, None) for p in partitions]
    return spark.createDataFrame(rows, STATE_SCHEMA)


def apply_policy_stage(
    events: DataFrame,
    state: DataFrame,
    policy: TimePolicy,
    clock_us: int | None,
    unit_column: str | None,
) -> DataFrame:
    """Outcomes and next state, in one DataFrame told apart by ``_kind``.

    ``events`` must hold ``partition``, ``offset``, ``arrival_us``, ``event_us`` and, with
    ``over``, ``unit_column``; other columns pass through. ``clock_us`` is the broker
    clock recorded with this batch's end offsets (None when the source has none).
    """
    event_fields = list(events.schema.fields)
    out_schema = StructType(
        [KIND]
        + [StructField(f.name, f.dataType, True) for f in event_fields]
        + OUTCOME_FIELDS
        + [StructField("s_" + f.name, f.dataType, True) for f in STATE_SCHEMA.fields]
    )
    event_names = [f.name for f in event_fields]
    state_names = ["s_" + f.name for f in STATE_SCHEMA.fields]

    def run(evs: pd.DataFrame, st: pd.DataFrame) -> pd.DataFrame:
        partition = int(evs["partition"].iloc[0]) if len(evs) else int(st["partition"].iloc[0])
        state_in = state_from_rows(st)
        evs = evs.sort_values("offset", kind="stable").reset_index(drop=True)
        units = evs[unit_column].astype(object).where(evs[unit_column].notna(), None).to_numpy() if unit_column else None
        result, state_out = apply_policy(
            policy, evs["event_us"].to_numpy(np.int64), evs["arrival_us"].to_numpy(np.int64), state_in, units
        )
        if clock_us is not None:
            state_out = state_out.advance_idle(clock_us, policy)
        out_events = evs.copy()
        out_events["action"] = result.action
        out_events["reason"] = result.reason
        system = pd.Series(result.system_us, dtype="Int64")
        system[result.system_us == NONE] = pd.NA
        out_events["system_us"] = system
        out_events["watermark_us"] = result.watermark_us
        out_events.insert(0, "_kind", "e")
        state_rows = pd.DataFrame(state_to_rows(partition, state_out))
        state_rows.columns = state_names
        state_rows.insert(0, "_kind", "s")
        frame = pd.concat([out_events, state_rows], ignore_index=True, sort=False)
        for name in event_names + [f.name for f in OUTCOME_FIELDS] + state_names:
            if name not in frame:
                frame[name] = None
        return frame[["_kind"] + event_names + [f.name for f in OUTCOME_FIELDS] + state_names]

    return events.groupBy("partition").cogroup(state.groupBy("partition")).applyInPandas(run, out_schema)


def split_outcomes(result: DataFrame, event_columns: list[str]) -> tuple[DataFrame, DataFrame]:
    """(event outcomes, next state) from :func:`apply_policy_stage`'s combined output."""
    outcomes = result.where(F.col("_kind") == "e").select(*event_columns, *[f.name for f in OUTCOME_FIELDS])
    state = result.where(F.col("_kind") == "s").select(
        *[F.col("s_" + f.name).cast(f.dataType).alias(f.name) for f in STATE_SCHEMA.fields]
    )
    return outcomes, state
