"""What the DuckDB consumer view reads of one lineage (tidegate.runtime.outputs.reader.view_parts):
batch folders after the compaction boundary, compacted files through it — never both for
one batch — and no pattern that matches nothing where DuckDB would refuse it."""

from __future__ import annotations

from tidegate.lineage.compaction import compact
from tidegate.lineage.layout import HOUR_US, batch_folder_name, hour_dir
from tidegate.runtime.outputs.reader import view_parts

H0 = 1_767_225_600_000_000 // HOUR_US


def batch(output, batch_id: int) -> None:
    folder = hour_dir(output, H0) / batch_folder_name(batch_id)
    folder.mkdir(parents=True)
    (folder / "part-00000.parquet").write_bytes(b"")  # merged by name only: no file is read here


def test_before_compaction_the_view_reads_every_batch_folder(tmp_path):
    batch(tmp_path, 0)
    assert view_parts(tmp_path, None) == [(f"{tmp_path}/date=*/hour=*/batch-*/*.parquet", "batch_id >= 0")]


def test_after_compaction_each_batch_is_read_from_one_side_of_the_boundary(tmp_path, monkeypatch):
    for b in range(3):
        batch(tmp_path, b)
    monkeypatch.setattr("tidegate.lineage.compaction._merge", lambda folder, batches, name: (folder / name).touch())
    compact(tmp_path, 1, now_s=0.0, grace_s=0.0)
    assert view_parts(tmp_path, 1) == [(f"{tmp_path}/date=*/hour=*/batch-*/*.parquet", "batch_id > 1"),
                                       (f"{tmp_path}/date=*/hour=*/compacted-*.parquet", "batch_id <= 1")]


def test_a_closed_lineage_whose_batch_folders_are_all_merged_reads_its_compacted_files_only(tmp_path, monkeypatch):
    batch(tmp_path, 0)
    monkeypatch.setattr("tidegate.lineage.compaction._merge", lambda folder, batches, name: (folder / name).touch())
    compact(tmp_path, 0, now_s=0.0, grace_s=0.0)  # merged folders gone at once
    assert view_parts(tmp_path, 0, open_=False) == [(f"{tmp_path}/date=*/hour=*/compacted-*.parquet",
                                                     "batch_id <= 0")]
    assert len(view_parts(tmp_path, 0, open_=True)) == 2  # an open lineage writes more: its folders are read
