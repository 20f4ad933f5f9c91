"""The sink's promise (tidegate.spark.pipeline.sink.files): readers never meet a half-written batch,
what a crash left is cleared, and a folder is on disk before the batch is acknowledged."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from tidegate.lineage.fence import Fenced, LeaseClock, LineageFence
from tidegate.lineage.layout import HOUR_US, batch_folder_name, hour_dir
from tidegate.spark.output import read_output
from tidegate.spark.pipeline.sink import files as sink_files
from tidegate.spark.pipeline.sink.files import clear_partial_writes

pytestmark = pytest.mark.spark

H0 = 1_767_225_600_000_000 // HOUR_US  # 2026-01-01T00:00Z in hours


def rows(spark, start: int, n: int = 5):
    """Rows ``start…start+n`` whose window ends fall 20 minutes apart: a few hours each."""
    return spark.range(start, start + n).selectExpr(
        "id", "cast(id * 2 as double) as value", f"timestamp_micros({H0 * HOUR_US} + id * 1200000000) as window_end"
    )


def write_batch(df, output, batch_id, **kwargs):
    return sink_files.write_batch(df, output, batch_id, time_column=F.col("window_end"), **kwargs)


def batch_folders(output, batch_id):
    return sorted(output.glob(f"date=*/hour=*/{batch_folder_name(batch_id)}"))


def crash_on_rename(monkeypatch):
    def crash(*_args, **_kwargs):
        raise KeyboardInterrupt("the driver died here")  # not an Exception: nothing catches it

    monkeypatch.setattr(sink_files.os, "replace", crash)


def test_a_reader_never_sees_the_rows_of_a_batch_that_died_mid_write(spark, tmp_path, monkeypatch):
    output = tmp_path / "output"
    write_batch(rows(spark, 0), output, 0)
    write_batch(rows(spark, 5), output, 1, rows=5)
    with monkeypatch.context() as m:  # batch 2: its files are written, then the driver dies before the rename
        crash_on_rename(m)
        with pytest.raises(KeyboardInterrupt):
            write_batch(rows(spark, 100), output, 2)
    left = [p for p in output.iterdir() if "batch-2" in p.name]
    assert left and all(p.name.startswith(".") for p in left)  # staged, hidden, with its parquet inside
    assert any(left[0].rglob("*.parquet")) and not batch_folders(output, 2)
    for df in (read_output(spark, output), spark.read.parquet(str(output))):  # ours, and a plain listing
        assert sorted(r.id for r in df.collect()) == list(range(10))
        assert sorted(r.batch_id for r in df.select("batch_id").distinct().collect()) == [0, 1]


def test_a_batch_is_filed_by_the_hour_of_its_rows_each_with_its_batch_id(spark, tmp_path):
    output = tmp_path / "output"
    for writer in ({}, {"rows": 7}):  # Spark's writer, then the driver's
        batch = 0 if not writer else 1
        folders = write_batch(rows(spark, 7 * batch, 7), output, batch, **writer)
        hours = sorted({(H0 * HOUR_US + i * 1_200_000_000) // HOUR_US for i in range(7 * batch, 7 * batch + 7)})
        assert folders == [hour_dir(output, h) / batch_folder_name(batch) for h in hours]
    span = read_output(spark, output, (H0 + 1) * HOUR_US, (H0 + 3) * HOUR_US)  # window ends in (01:00, 03:00]
    assert sorted((r.batch_id, r.id) for r in span.collect()) == [(0, 4), (0, 5), (0, 6), (1, 7), (1, 8), (1, 9)]


def test_the_driver_writes_the_rows_and_schema_spark_writes(spark, tmp_path):
    """Rows that come to the driver get their batch id there, not from Spark: every file
    must still be what Spark's own write of the batch gives, column for column."""
    import pyarrow.parquet as pq

    written = {}
    for name, writer in [("spark", {}), ("known", {"rows": 7}), ("probed", {"probe": True})]:
        folders = write_batch(rows(spark, 3, 7), tmp_path / name, 12, **writer)
        tables = [pq.read_table(f) for folder in folders for f in sorted(folder.glob("*.parquet"))]
        written[name] = ([f.relative_to(tmp_path / name) for f in folders], tables)
    want_folders, want_tables = written["spark"]
    want = pa.concat_tables(want_tables).sort_by("id")
    assert want.column("batch_id").to_pylist() == [12] * 7
    for name in ("known", "probed"):
        folders, tables = written[name]
        assert folders == want_folders
        got = pa.concat_tables(tables).sort_by("id")
        assert got.schema == want.schema, name
        assert got.equals(want), name


def test_a_driver_write_compiles_no_new_code_for_the_next_batch(spark, tmp_path):
    """A live job writes small batches from the driver, one a second: a batch id in the plan
    would make Spark generate and compile its code anew for every one of them."""
    compiled = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    write_batch(rows(spark, 0), tmp_path / "output", 0, rows=5)
    before = compiled.getCount()
    for batch_id in (1, 2, 3):
        write_batch(rows(spark, 0), tmp_path / "output", batch_id, rows=5)
    assert compiled.getCount() == before
    assert sorted(r.batch_id for r in read_output(spark, tmp_path / "output").collect()) == sorted([0, 1, 2, 3] * 5)


def test_a_new_driver_clears_what_a_crash_left_and_the_batch_then_commits_once(spark, tmp_path, monkeypatch):
    output = tmp_path / "output"
    legacy = output / "_tmp_batch_id=7_0123abcd"  # how earlier versions staged: visible to Spark's listing
    legacy.mkdir(parents=True)
    (legacy / "part-00000.parquet").write_bytes(b"PAR1 torn")
    with monkeypatch.context() as m:
        crash_on_rename(m)
        with pytest.raises(KeyboardInterrupt):
            write_batch(rows(spark, 0), output, 0)
    removed = clear_partial_writes([output, tmp_path / "missing"])
    assert legacy in removed and len(removed) == 2
    assert not list(output.rglob("*.parquet"))  # at most the empty hour folders the rename was to fill
    first = write_batch(rows(spark, 0), output, 0)
    again = write_batch(rows(spark, 0), output, 0)  # the re-run of an acknowledged batch changes nothing
    assert first == again == batch_folders(output, 0) and len(first) == 2
    assert sorted(p.name for p in output.iterdir()) == ["date=2026-01-01"]
    assert spark.read.parquet(str(output)).count() == 5


def test_every_file_and_folder_of_a_batch_is_synced_before_it_is_acknowledged(spark, tmp_path, monkeypatch):
    synced: list[Path] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(sink_files.os, "fsync", recording_fsync)
    output = tmp_path / "output"
    finals = write_batch(rows(spark, 0, 50), output, 3)  # written by Spark: several part files, many hours
    files = sorted(f for final in finals for f in final.glob("*.parquet"))
    assert len(finals) > 2 and files
    staged_names = {p.name for p in synced}
    for f in files:
        assert f.name in staged_names, f"{f.name} was not fsynced"
    for final in finals:
        assert final.parent in synced  # each rename itself is on disk
    assert output in synced and output / "date=2026-01-01" in synced  # so are the folders it created
    assert any(p.name.startswith(".tmp-batch-3") for p in synced)  # the staged folder's own entry list


def test_a_fenced_driver_leaves_its_batch_invisible(spark, tmp_path):
    root = tmp_path / "lineage"
    clock = LeaseClock(15.0)
    clock.renewed(clock.monotonic())
    stale = LineageFence(root, 1, "run-1", clock, lambda: True)
    stale.claim()
    LineageFence(root, 2, "run-2", clock, lambda: True).claim()
    with pytest.raises(Fenced):
        write_batch(rows(spark, 0), root / "output", 0, fence=stale)
    assert not batch_folders(root / "output", 0)
    assert [p.name[:5] for p in (root / "output").iterdir()] == [".tmp-"]  # cleared when a driver next starts


def test_a_paused_driver_whose_staged_rows_its_successor_cleared_stops_at_the_fence(spark, tmp_path):
    """Paused between staging a batch and publishing it, a driver wakes to find its staged
    folder gone (the next driver's clear_partial_writes): the fence, not the missing folder,
    is what it reports."""
    root = tmp_path / "lineage"
    clock = LeaseClock(15.0)
    clock.renewed(clock.monotonic())
    stale = LineageFence(root, 1, "run-1", clock, lambda: True)
    stale.claim()
    table = rows(spark, 0).withColumns(sink_files.batch_columns(0, F.col("window_end"))).toArrow()
    staged = sink_files.staging_dir(root / "output", batch_folder_name(0))
    sink_files.write_hours(table, staged)
    LineageFence(root, 2, "run-2", clock, lambda: True).claim()
    clear_partial_writes([root / "output"])  # what the successor does when it starts
    with pytest.raises(Fenced):
        sink_files.publish_hours(staged, root / "output", 0, fence=stale)
    assert not batch_folders(root / "output", 0)
