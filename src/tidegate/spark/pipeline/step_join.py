"""A later step that joins two earlier steps' rows on Spark (Stream Analytics' ``WITH a AS (…),
b AS (…) SELECT … FROM a JOIN b ON … AND DATEDIFF(…) BETWEEN …``).

Each side's rows of the batch — the rows its step emitted, timed by their System.Timestamp (a
window row by its ``window_end``, any other by its ``system_time``) — enter the join as the
first step's join takes events (:mod:`.join_stage`): one row per side and row, with its time,
the join keys evaluated over it and the row itself as a struct named after its step, which
the keys, ``filter`` and ``select`` read (``minutes.deviceId``; ``minutes.system_time`` is a
window row's end). The two sides' structs differ, so each has its own column (``_left`` or
``_right``), NULL on the other side's rows. The core's temporal join
(:func:`.join_stage.join_step`) pairs them on the job's frontiers: a step emits a row exactly
when the watermark passes its time, so every row of either side timed before the frontier is
there when the join decides.

A step's row has no position of its own (a window row has none; a join row shares its left
event's), so each entering row is numbered: ``partition`` the batch (the state version it
starts from, plus one), ``offset`` its place among the batch's rows of its side in the order
of their content. Rows with the same content are the same row, so which of them takes which
number changes nothing, and a batch run again numbers them alike. The numbers identify rows
inside the join only: the joined row carries each side's own ``partition`` and ``offset``
(NULL for a window's row). Rows the join still holds are kept in the step's state frame, so a
restart resumes where it was and a replay from ``T − L`` rebuilds them.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from tidegate.jobspec.step_spec import StepSpec
from tidegate.spark.pipeline import join_stage
from tidegate.spark.pipeline.join_stage import SIDE
from tidegate.spark.pipeline.sink.state import StateStore
from tidegate.spark.pipeline.window_stage import ROLE
from tidegate.spark.spec_columns import spec_column

_STRUCT = {"left": "_left", "right": "_right"}  # each side's rows, as a struct named after its step


def join_later_step(
    store: StateStore,
    step: StepSpec,
    frame: str,
    left: DataFrame,
    right: DataFrame,
    windowed: set[str],
    version: int | None,
    frontiers: tuple[int, int],
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(the step's rows of the batch, its next buffer for ``frame``, the persisted step to
    unpersist after the batch). ``left`` and ``right``: the rows its join's steps emitted in the
    batch; ``windowed``: the names of the window steps (their rows are timed by their end)."""
    join = step.join
    assert join is not None  # run only for a join step
    batch = 0 if version is None else version + 1
    lefts = _entering(step, left, "left", join.left in windowed, batch)
    key_types = [lefts.schema[f"_k{j}"].dataType for j in range(len(join.keys))]  # the right keys take them
    rights = _entering(step, right, "right", join.right in windowed, batch, key_types)
    fresh = lefts.unionByName(rights, allowMissingColumns=True)
    held = store.frame(version, frame, fresh.schema)
    rows = fresh if held is None else held.unionByName(fresh)
    # rows a step reads are cut where an output writes them: the join emits everything
    stepped = join_stage.join_step(join, rows, frontiers, None).persist()  # output and buffer both read it
    return _emitted(step, rows, stepped), join_stage.still_held(rows, stepped), stepped


def _entering(step: StepSpec, read: DataFrame, side: str, reads_window: bool, batch: int,
              key_types: list | None = None) -> DataFrame:  # fmt: skip
    """One side's rows of the batch as the join holds them: side, number, time, keys (cast to
    ``key_types``, the left keys': equal values group together) and the row as a struct (with
    ``system_time``, its System.Timestamp)."""
    join = step.join
    assert join is not None
    name = join.left if side == "left" else join.right
    time = F.col("window_end") if reads_window else F.col("system_time")
    columns = [F.col(c) for c in read.columns if c != "system_time"]
    row = F.struct(*columns, time.alias("system_time"))
    framed = read.select(F.unix_micros(time).alias("system_us"), row.alias(name))
    keys = [spec_column(a if side == "left" else b) for a, b in join.keys]
    if key_types is not None:
        keys = [k.cast(t) for k, t in zip(keys, key_types, strict=True)]
    content = F.to_json(F.col(name))
    number = F.row_number().over(Window.orderBy(F.xxhash64(content), content))
    return framed.select(
        F.lit(side).alias(SIDE),
        F.lit(batch).cast("int").alias("partition"),
        number.cast("bigint").alias("offset"),
        "system_us",
        *[k.alias(f"_k{j}") for j, k in enumerate(keys)],
        F.col(name).alias(_STRUCT[side]),
    )


def _emitted(step: StepSpec, rows: DataFrame, stepped: DataFrame) -> DataFrame:
    """The emitted join rows with both sides' rows, through the step's ``filter`` and ``select``;
    each side's own position, NULL where its row has none."""
    join = step.join
    assert join is not None
    left = rows.where(F.col(SIDE) == "left").select("partition", "offset", F.col(_STRUCT["left"]).alias(join.left))
    right = rows.where(F.col(SIDE) == "right").select(
        F.col("partition").alias("right_partition"),
        F.col("offset").alias("right_offset"),
        F.col(_STRUCT["right"]).alias(join.right),
    )
    joined = (
        stepped.where(F.col(ROLE) == "emit")
        .join(left, ["partition", "offset"], "inner")
        .join(right, ["right_partition", "right_offset"], "left")
    )
    if step.filter:
        joined = joined.where(spec_column(step.filter))
    fields = {s: set(rows.schema[_STRUCT[s]].dataType.fieldNames()) for s in _STRUCT}  # type: ignore[attr-defined]
    position = [
        _own(join.left, fields["left"], "partition", "int"),
        _own(join.left, fields["left"], "offset", "bigint"),
        _own(join.right, fields["right"], "partition", "int", "right_partition"),
        _own(join.right, fields["right"], "offset", "bigint", "right_offset"),
        F.timestamp_micros("out_us").alias("system_time"),
    ]
    return joined.select(*position, *[spec_column(e).alias(n) for n, e in step.select])


def _own(side: str, fields: set[str], column: str, kind: str, alias: str | None = None) -> Column:
    """A side's row's own ``column`` (its position), NULL when its rows have none."""
    value = F.col(side).getField(column) if column in fields else F.lit(None)
    return value.cast(kind).alias(alias or column)
