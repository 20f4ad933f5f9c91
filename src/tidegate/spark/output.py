"""One lineage's output read with Spark: its rows handed over within a span of time.

The files of the span come from :func:`tidegate.lineage.committed.committed_files` (the hour
folders of the span only, compacted or not); the time a row is handed over by from
:func:`tidegate.lineage.committed.handover_column`. The runtime's reader
(:mod:`tidegate.runtime.outputs.reader`) puts a region's lineages together from these reads.
"""

from __future__ import annotations

from pathlib import PurePath

from tidegate.lineage.committed import committed_files, handover_column
from tidegate.lineage.layout import BATCH_COLUMN, LAYOUT_COLUMNS
from tidegate.storage.store import LOCAL, Store


def read_output(spark, output: PurePath, from_us: int | None = None, to_us: int | None = None, store: Store = LOCAL):
    """The rows of one lineage's output handed over by time in ``(from_us, to_us]`` — a
    window's end, or an analytic row's system time (:func:`handover_column`); None: open —
    or, with both None, every row of any output — read from the hour folders of that span
    only; each row with its ``batch_id``. None when the span has no file. On an object
    store: the files its batches' commit records list, nothing else."""
    from pyspark.sql import functions as F

    files = committed_files(output, from_us, to_us, store)
    if not files:
        return None
    if store.is_local:
        reader = spark.read.option("basePath", str(output))
    else:  # a batch's files sit in the layout's folders or a writer's attempt folder: no partition columns
        reader = spark.read.option("recursiveFileLookup", "true")
    df = reader.parquet(*[store.uri(f) for f in files])
    df = df.drop(*[c for c in LAYOUT_COLUMNS if c != BATCH_COLUMN])
    if from_us is None and to_us is None:
        return df
    end = F.unix_micros(handover_column(output, store))
    if from_us is not None:
        df = df.where(end > F.lit(from_us))
    if to_us is not None:
        df = df.where(end <= F.lit(to_us))
    return df


def by_position(df, offsets: dict[int, int], *, before: bool):
    """``df``'s rows of events before ``offsets`` (``before``), or at or after them, per
    partition; partitions ``offsets`` does not name are kept whole."""
    from functools import reduce

    from pyspark.sql import functions as F

    side = [
        (F.col("partition") == p) & ((F.col("offset") < o) if before else (F.col("offset") >= o))
        for p, o in offsets.items()
    ]
    return df.where(reduce(lambda a, b: a | b, side) | ~F.col("partition").isin(list(offsets)))
