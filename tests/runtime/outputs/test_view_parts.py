"""What the DuckDB consumer view reads of one lineage (tidegate.runtime.outputs.duckdb_view.view_parts):
batch folders after the compaction boundary, compacted files through it — never both for
one batch — and no pattern that matches nothing where DuckDB would refuse it."""

from __future__ import annotations

from tidegate.lineage.compaction import compact
from tidegate.lineage.layout import HOUR_US, batch_folder_name, hour_dir
from tidegate.runtime.outputs.duckdb_view import view_parts

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
    assert view_parts(tmp_path, 1) == [
        (f"{tmp_path}/date=*/hour=*/batch-*/*.parquet", "batch_id > 1"),
        (f"{tmp_path}/date=*/hour=*/compacted-*.parquet", "batch_id <= 1"),
    ]


def test_a_closed_lineage_whose_batch_folders_are_all_merged_reads_its_compacted_files_only(tmp_path, monkeypatch):
    batch(tmp_path, 0)
    monkeypatch.setattr("tidegate.lineage.compaction._merge", lambda folder, batches, name: (folder / name).touch())
    compact(tmp_path, 0, now_s=0.0, grace_s=0.0)  # merged folders gone at once
    assert view_parts(tmp_path, 0, open_=False) == [(f"{tmp_path}/date=*/hour=*/compacted-*.parquet", "batch_id <= 0")]
    assert len(view_parts(tmp_path, 0, open_=True)) == 2  # an open lineage writes more: its folders are read


def test_a_lineage_whose_store_does_not_answer_is_left_out_of_the_view_and_named_in_its_manifest(tmp_path, monkeypatch):
    import json
    from types import SimpleNamespace as NS

    from tidegate.runtime.outputs.reader import publish_view

    monkeypatch.setenv("TIDEGATE_S3_ENDPOINT", "http://127.0.0.1:9")  # nothing answers there
    monkeypatch.setenv("TIDEGATE_S3_ACCESS_KEY_ID", "id")
    monkeypatch.setenv("TIDEGATE_S3_SECRET_ACCESS_KEY", "secret")
    local = tmp_path / "l1"
    batch(local / "output", 0)
    rows = [
        NS(id=name, root=root, output_from_us=None, output_until_us=None, windowed=False, created_by_run=None)
        for name, root in (("l1", str(local)), ("l2", "s3a://bucket/lineages/l2"))
    ]
    db = NS(
        active_region=lambda job: NS(region="east", since=0.0, reason="first start"), lineages=lambda job, region: rows
    )
    publish_view(NS(db=db, config=NS(home=tmp_path)), "job")
    doc = json.loads((tmp_path / "views" / "job.json").read_text())
    assert [lineage["lineage"] for lineage in doc["lineages"]] == ["l1"]
    assert [(left["lineage"], left["output"]) for left in doc["not_in_view"]] == [
        ("l2", "s3a://bucket/lineages/l2/output")
    ]


def test_each_named_output_has_its_own_view_of_the_active_region_beside_the_job_s(tmp_path):
    import json
    from types import SimpleNamespace as NS

    import pyarrow as pa
    import pyarrow.parquet as pq

    from tidegate.runtime.outputs.reader import publish_view

    def rows(output, batch_id: int, column: str) -> None:  # a real file: a handed-over view reads its schema
        batch(output, batch_id)
        table = pa.table({column: pa.array([H0 * HOUR_US], pa.timestamp("us"))})
        pq.write_table(table, hour_dir(output, H0) / batch_folder_name(batch_id) / "part-00000.parquet")

    lineages = [tmp_path / "l1", tmp_path / "l2"]
    rows(lineages[0] / "output", 0, "window_end")
    rows(lineages[0] / "outputs" / "archive", 0, "system_time")
    rows(lineages[1] / "output", 1, "window_end")  # a later lineage that has not written the archive yet
    spans = [
        NS(id=root.name, root=str(root), output_from_us=H0 * HOUR_US, output_until_us=None, windowed=True)
        for root in lineages
    ]
    db = NS(
        active_region=lambda job: NS(region="east", since=0.0, reason="first start"), lineages=lambda job, region: spans
    )
    assert publish_view(NS(db=db, config=NS(home=tmp_path)), "job") == tmp_path / "views" / "job.sql"
    sql = (tmp_path / "views" / "job.archive.sql").read_text()
    assert 'CREATE OR REPLACE VIEW "job.archive"' in sql and "job job, output archive: region east" in sql
    assert "system_time > TIMESTAMP" in sql  # the archive's rows handed over by their own time
    assert f"{lineages[0]}/outputs/archive/date=*" in sql and f"{lineages[0]}/output/" not in sql
    doc = json.loads((tmp_path / "views" / "job.archive.json").read_text())
    assert doc["output"] == "archive" and [lineage["lineage"] for lineage in doc["lineages"]] == ["l1"]
    own = json.loads((tmp_path / "views" / "job.json").read_text())
    assert own["output"] == "output" and [lineage["lineage"] for lineage in own["lineages"]] == ["l1", "l2"]
