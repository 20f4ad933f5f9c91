"""The sink's promise (tidegate.spark.pipeline.sink.files): readers never meet a half-written batch,
what a crash left is cleared, and a folder is on disk before the batch is acknowledged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tidegate.runtime.fencing import Fenced, LeaseClock, LineageFence
from tidegate.spark.pipeline.sink import files as sink_files
from tidegate.spark.pipeline.sink.files import clear_partial_writes, write_batch

pytestmark = pytest.mark.spark


def rows(spark, start: int, n: int = 5):
    return spark.range(start, start + n).selectExpr("id", "cast(id * 2 as double) as value")


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
    left = [p for p in output.iterdir() if "batch_id=2" in p.name]
    assert left and all(p.name.startswith(".") for p in left)  # staged, hidden, with its parquet inside
    assert any(left[0].rglob("*.parquet"))
    df = spark.read.parquet(str(output))  # what `tidegate read`, the GX check and the batch comparison do
    assert sorted(r.id for r in df.collect()) == list(range(10))
    assert sorted(r.batch_id for r in df.select("batch_id").distinct().collect()) == [0, 1]


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
    assert sorted(p.name for p in output.iterdir()) == []
    write_batch(rows(spark, 0), output, 0)
    write_batch(rows(spark, 0), output, 0)  # the re-run of an acknowledged batch changes nothing
    assert sorted(p.name for p in output.iterdir()) == ["batch_id=0"]
    assert spark.read.parquet(str(output)).count() == 5


def test_every_file_and_folder_of_a_batch_is_synced_before_it_is_acknowledged(spark, tmp_path, monkeypatch):
    synced: list[Path] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(sink_files.os, "fsync", recording_fsync)
    output = tmp_path / "output"
    write_batch(rows(spark, 0, 50), output, 3)  # written by Spark: several part files
    final = output / "batch_id=3"
    files = sorted(final.glob("*.parquet"))
    assert files
    staged_names = {p.name for p in synced}
    for f in files:
        assert f.name in staged_names, f"{f.name} was not fsynced"
    assert output in synced  # the rename itself is on disk
    assert any(p.name.startswith(".tmp-batch_id=3") for p in synced)  # the folder's own entry list


def test_a_fenced_driver_leaves_its_batch_invisible(spark, tmp_path):
    root = tmp_path / "lineage"
    clock = LeaseClock(15.0)
    clock.renewed(clock.monotonic())
    stale = LineageFence(root, 1, "run-1", clock, lambda: True)
    stale.claim()
    LineageFence(root, 2, "run-2", clock, lambda: True).claim()
    with pytest.raises(Fenced):
        write_batch(rows(spark, 0), root / "output", 0, fence=stale)
    assert not (root / "output" / "batch_id=0").exists()
    assert [p.name[:5] for p in (root / "output").iterdir()] == [".tmp-"]  # cleared when a driver next starts
