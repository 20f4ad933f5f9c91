"""The reference join on Spark: each kept event enriched from the snapshot its time falls in.

Per micro-batch the stage lists the reference folder's snapshots (:mod:`tidegate.inputs.reference`),
records any it has not seen in the lineage — with its effective start — and checks the others
against their record (:mod:`tidegate.lineage.reference_records`), and joins: each event's
snapshot is, among those whose recorded effective start is at or before its system time ``S``,
the one with the latest valid-from time (:mod:`tidegate.eventtime.reference`; on time, that is
``[valid_from_i, valid_from_(i+1))``), then the rows of that snapshot whose key columns equal the event's key
expressions — all of them, as in SQL, so a key twice in a snapshot gives two rows. The
reference's columns ride as one struct column named after it (``devices.site`` in ``filter``
and ``select``); ``reference_snapshot`` is the valid-from time — the folder's name — of the snapshot
chosen (NULL when none covers the event), kept whether a row matched or not. Inner join: an event without a
matching row is dropped; left: kept with the struct NULL.

A job of several tables (:mod:`tidegate.jobspec.references`) joins them in the order listed,
each as above with its own snapshots, records and effective starts: a later table's keys may
read an earlier one's struct column (``devices.siteId``), which is there by then. Each table's
snapshot column is named by :func:`~tidegate.jobspec.references.snapshot_columns`.

A later per-event step joins its own tables the same way (:mod:`.step_rows`), each row it
reads by its System.Timestamp — a window row's end, any other row's ``system_time`` — with the
same records, effective starts and refusal of a changed snapshot.

The snapshots are read again only when the folder's listing changes; the table is small and
broadcast.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tidegate.eventtime.policy import NONE
from tidegate.inputs.reference import list_snapshots, read_snapshot
from tidegate.jobspec.folders import ReferenceFolder, confined_reference_folder, reference_dirs
from tidegate.jobspec.reference import ReferenceSpec
from tidegate.jobspec.references import snapshot_columns
from tidegate.lineage.layout import JobPaths
from tidegate.lineage.reference_records import record_snapshots
from tidegate.spark.spec_columns import spec_column

_AT = "_reference_at_us"  # the event's snapshot, then the rows' snapshot


class ReferenceStage:
    """A step's reference joins, one table after another: built once per driver, :meth:`enrich`
    once per batch. ``references``: the first step's tables, or (``named``) a later step's,
    whose snapshot columns are always ``reference_snapshot_<name>``."""

    def __init__(self, spark: SparkSession, references: Sequence[ReferenceSpec], paths: JobPaths,
                 base: Path | None = None, named: bool = False) -> None:  # fmt: skip
        assert references
        base = base or Path.cwd()
        roots = reference_dirs(os.environ, base)  # every snapshot folder and file read must lie inside them
        columns = snapshot_columns(references, named)
        self.tables = [ReferenceTable(spark, ref, column, paths, roots, base)
                       for ref, column in zip(references, columns, strict=True)]  # fmt: skip

    def snapshots(self) -> dict[str, list[int]]:
        """Per table, the valid-from times of the snapshots the last :meth:`enrich` joined with."""
        return {t.reference.name: t.snapshots() for t in self.tables}

    def at(self, watermark_us: int | None, processed_through_us: int | None) -> Callable[[DataFrame, str], DataFrame]:
        """:meth:`enrich` of a batch that starts at ``watermark_us`` and ``processed_through_us``,
        given the rows and the column of their time in µs (a later step's join)."""
        return lambda rows, time_us: self.enrich(rows, watermark_us, processed_through_us, time_us)

    def enrich(self, kept: DataFrame, watermark_us: int | None = None,
               processed_through_us: int | None = None, time_us: str = "system_us") -> DataFrame:  # fmt: skip
        """``kept`` joined with each table in order (:meth:`ReferenceTable.enrich`)."""
        for table in self.tables:
            kept = table.enrich(kept, watermark_us, processed_through_us, time_us)
        return kept


class ReferenceTable:
    """One table's join: its snapshots listed, recorded and read; its struct column and the
    column naming each row's snapshot (``snapshot_column``) added to the events."""

    def __init__(self, spark: SparkSession, reference: ReferenceSpec, snapshot_column: str, paths: JobPaths,
                 roots: tuple[ReferenceFolder, ...], base: Path) -> None:  # fmt: skip
        self.spark = spark
        self.reference = reference
        self.snapshot_column = snapshot_column
        self.paths = paths
        self.roots = roots
        self.folder = confined_reference_folder(reference.path, roots, base)
        self._seen: tuple | None = None  # the snapshots' fingerprints the cached rows were read from
        self._hashes: dict = {}  # file (path, size, mtime; on S3 key, size, ETag) → SHA-256, hashed once per driver
        self._checked: dict[int, list] = {}  # valid-from → fingerprint, recorded or checked by this driver
        self._effective: dict[int, int] = {}  # valid-from → effective start, as recorded
        self._rows: DataFrame | None = None
        self._starts: list[int] = []

    def snapshots(self) -> list[int]:
        """The valid-from times of the snapshots the last :meth:`enrich` joined with."""
        return list(self._starts)

    def _refresh(self, watermark_us: int | None, processed_through_us: int | None) -> None:
        ref = self.reference
        snapshots = list_snapshots(self.folder, ref.format, self._hashes, roots=self.roots)
        seen = tuple((s.valid_from_us, tuple(s.files)) for s in snapshots)
        fresh = [
            (s.valid_from_us, s.fingerprint) for s in snapshots if self._checked.get(s.valid_from_us) != s.fingerprint
        ]
        # only what this driver has not seen as it is; the effective starts are the records'
        self._effective.update(record_snapshots(self.paths, ref.name, fresh, watermark_us, processed_through_us))
        self._checked.update(fresh)
        if seen == self._seen:
            return
        frames = []
        for s in snapshots:
            table = read_snapshot(s, ref, roots=self.roots)
            frame = self.spark.createDataFrame(table)  # CSV: every column text, cast below
            typed = frame.select(*[F.col(f"`{c}`").cast(t).alias(c) for c, t in ref.columns.items()])
            frames.append(typed.withColumn(_AT, F.lit(s.valid_from_us).cast("bigint")))
        rows = None
        for frame in frames:
            rows = frame if rows is None else rows.unionByName(frame)
        if rows is not None:
            rows = rows.select(F.col(_AT), *[F.col(f"`{c}`").alias(f"_reference_key{i}") for i, (_, c) in
                                             enumerate(ref.keys)],
                               F.struct(*[F.col(f"`{c}`") for c in ref.columns]).alias(ref.name))  # fmt: skip
        self._seen, self._rows, self._starts = seen, rows, [s.valid_from_us for s in snapshots]

    def enrich(self, kept: DataFrame, watermark_us: int | None = None,
               processed_through_us: int | None = None, time_us: str = "system_us") -> DataFrame:  # fmt: skip
        """``kept`` with the reference's struct column and its snapshot column; an inner join
        drops the events nothing matched. ``watermark_us`` and ``processed_through_us``: the job
        watermark and the largest system time processed before the batch (None: nothing yet),
        which fix the effective start of a snapshot read for the first time. ``time_us``: the
        column of each row's System.Timestamp in µs (a later step's rows: their window end or
        system time)."""
        self._refresh(watermark_us, processed_through_us)
        ref = self.reference
        if self._starts:
            starts = F.array(*[F.struct(F.lit(s).cast("bigint").alias("valid_from"),
                                        F.lit(self._effective.get(s, s)).cast("bigint").alias("effective"))
                               for s in self._starts])  # fmt: skip
            in_effect = F.filter(starts, lambda s: s["effective"] <= F.col(time_us))
            at = F.array_max(F.transform(in_effect, lambda s: s["valid_from"]))
        else:
            at = F.lit(None).cast("bigint")
        events = kept.withColumn(_AT, at)
        struct_type = ", ".join(f"`{c}`: {t}" for c, t in ref.columns.items())
        if self._rows is None:  # no snapshot at all: nothing matches
            joined = events.withColumn(ref.name, F.lit(None).cast(f"struct<{struct_type}>"))
            if ref.kind == "inner":
                joined = joined.where(F.lit(False))
        else:
            rows = F.broadcast(self._rows.withColumnRenamed(_AT, "_reference_rows_at"))
            on = [events[_AT] == rows["_reference_rows_at"]]
            on += [spec_column(e) == rows[f"_reference_key{i}"] for i, (e, _) in enumerate(ref.keys)]
            joined = events.join(rows, on=on, how="left" if ref.kind == "left" else "inner")
            joined = joined.drop("_reference_rows_at", *[f"_reference_key{i}" for i in range(len(ref.keys))])
        return joined.withColumn(self.snapshot_column, F.timestamp_micros(_AT)).drop(_AT)


def processed_through_us(states: dict, previous_us: int | None) -> int | None:
    """The largest system time of any event kept so far — the partitions' states after a batch
    hold each unit's maxS — or ``previous_us`` (None: none yet)."""
    seen = [int(s) for st in states.values() for s in st.max_system_us.values() if s is not None and s != NONE]
    seen += [previous_us] if previous_us is not None else []
    return max(seen) if seen else None
