"""Compaction (tidegate.lineage.compaction): an hour's batch folders merged into one file, and
a reader — listing at any moment — reads every row once: the old files or the new ones."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tidegate.lineage.committed import committed_files, compacted_through, last_output_batch
from tidegate.lineage.compaction import compact, compact_lineage
from tidegate.lineage.layout import HOUR_US, JobPaths, batch_folder_name, hour_dir

H0 = 1_767_225_600_000_000 // HOUR_US  # 2026-01-01T00:00Z in hours
GRACE_S = 600.0


def write_batch(output, batch_id: int, hours: list[int]) -> None:
    """Batch ``batch_id`` as the engine leaves it: one folder per hour, two rows in each."""
    for hour in hours:
        folder = hour_dir(output, hour) / batch_folder_name(batch_id)
        folder.mkdir(parents=True)
        ends = [hour * HOUR_US + 60_000_000 * (batch_id + 1), hour * HOUR_US + 60_000_000 * (batch_id + 2)]
        table = pa.table(
            {
                "window_end": pa.array(ends, pa.timestamp("us", tz="UTC")),
                "n": pa.array([batch_id, batch_id], pa.int64()),
                "batch_id": pa.array([batch_id, batch_id], pa.int64()),
            }
        )
        pq.write_table(table, folder / "part-00000.parquet", use_deprecated_int96_timestamps=True)


def rows(files) -> list[tuple]:
    """Every row a reader that listed ``files`` reads, in a fixed order (a doubled row stays two)."""
    read = [pq.read_table(f).select(["batch_id", "window_end", "n"]).to_pylist() for f in files]
    return sorted((r["batch_id"], r["window_end"], r["n"]) for t in read for r in t)


@pytest.fixture
def output(tmp_path):
    out = tmp_path / "output"
    for batch in range(6):  # batches 0–5 across hours H0, H0+1; batch 3 straddles both
        write_batch(out, batch, [H0] if batch < 3 else [H0, H0 + 1] if batch == 3 else [H0 + 1])
    return out


def test_a_reader_sees_every_row_once_before_during_and_after_compaction(output):
    before = committed_files(output)
    expected = rows(before)
    assert len(expected) == 14
    done = compact(output, 4, now_s=1000.0, grace_s=GRACE_S)  # batch 5 is still being written
    assert (done.through_batch, done.files_written, done.folders_merged) == (4, 2, 6)
    after = committed_files(output)
    assert rows(after) == expected  # the new files: every row once
    assert [f.name for f in after].count("compacted-0-4.parquet") == 2 and len(after) == 3  # + batch 5's file
    assert rows(before) == expected  # a reader that listed just before still reads the old files
    write_batch(output, 6, [H0 + 1])  # the job goes on writing meanwhile
    sixth = rows((hour_dir(output, H0 + 1) / "batch-6").glob("*.parquet"))
    assert len(sixth) == 2 and rows(committed_files(output)) == sorted(expected + sixth)


def test_merged_folders_stay_for_the_grace_time_then_go(output):
    compact(output, 4, now_s=1000.0, grace_s=GRACE_S)
    kept = compact(output, 4, now_s=1000.0 + GRACE_S - 1, grace_s=GRACE_S)
    assert kept.folders_removed == 0
    expected = rows(committed_files(output))
    gone = compact(output, 4, now_s=1000.0 + GRACE_S, grace_s=GRACE_S)
    assert gone.folders_removed == 6 and rows(committed_files(output)) == expected
    assert sorted(p.name for p in hour_dir(output, H0 + 1).iterdir()) == ["batch-5", "compacted-0-4.parquet"]


def test_a_second_compaction_merges_only_what_came_after_the_first(output):
    compact(output, 2, now_s=1000.0, grace_s=GRACE_S)
    expected = rows(committed_files(output))
    compact(output, 5, now_s=1001.0, grace_s=GRACE_S)
    assert rows(committed_files(output)) == expected
    assert sorted(p.name for p in hour_dir(output, H0).iterdir() if p.suffix) == [
        "compacted-0-2.parquet",
        "compacted-3-5.parquet",
    ]


def test_a_compaction_that_died_before_publishing_leaves_nothing_a_reader_or_the_next_one_reads_twice(output):
    expected = rows(committed_files(output))
    compact(output, 2, now_s=1000.0, grace_s=GRACE_S)
    folder = hour_dir(output, H0)
    orphan = folder / "compacted-3-4.parquet"  # written, never published: the process died
    pq.write_table(pq.read_table(next((folder / "batch-3").glob("*.parquet"))), orphan)
    (folder / ".tmp-compacted-3-4.parquet-ab").write_bytes(b"PAR1 torn")
    assert rows(committed_files(output)) == expected  # beyond the boundary: ignored
    compact(output, 5, now_s=1001.0, grace_s=GRACE_S)
    assert not orphan.exists() and rows(committed_files(output)) == expected
    assert compacted_through(output) == 5


def test_a_span_reads_the_hours_it_covers_only(output):
    compact(output, 5, now_s=1000.0, grace_s=GRACE_S)
    second_hour = committed_files(output, (H0 + 1) * HOUR_US, (H0 + 1) * HOUR_US + 1)
    assert {f.parent.name for f in second_hour} == {"hour=01"}
    assert committed_files(output, (H0 + 5) * HOUR_US, (H0 + 6) * HOUR_US) == []


def test_a_lineage_is_compacted_through_the_last_batch_spark_recorded_done(tmp_path):
    paths = JobPaths(tmp_path)
    for batch in range(4):
        write_batch(paths.output, batch, [H0])
    assert [c.through_batch for c in compact_lineage(tmp_path, now_s=1.0)] == [None, None, None]  # no commit log
    paths.commits.mkdir(parents=True)
    for batch in range(3):  # batch 3's rows are visible, but Spark may still run it again
        (paths.commits / str(batch)).write_text("v1\n{}")
    output, audit, _ = compact_lineage(tmp_path, now_s=1.0)
    assert (output.through_batch, output.folders_merged, audit.through_batch) == (2, 3, None)
    assert last_output_batch(paths) == 3
