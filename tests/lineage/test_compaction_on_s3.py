"""Compaction on a real S3 store (tidegate.lineage.object_compaction): an hour's committed
batches become one compacted file, visible by a record created once; the output reads the
same before, after, and whatever step a compaction died at; once the grace time passed the
merged batches' files and commit records go, so a read no longer lists them."""

from __future__ import annotations

import time

import pytest
from test_commits_on_s3 import H0, batch_rows, read_all

from s3 import BUCKETS
from tidegate.lineage import commits, object_compaction
from tidegate.lineage.committed import committed_files, last_output_batch
from tidegate.lineage.compaction import compact_lineage
from tidegate.lineage.layout import COMMITS_DIR, HOUR_US, JobPaths
from tidegate.spark.pipeline.sink.files import write_batch_table
from tidegate.storage.store import S3Store
from tidegate.storage.uri import parse_root

GRACE_S = 60.0


@pytest.fixture
def s3(s3_stores):
    store = S3Store(s3_stores["east"].settings())
    return store, JobPaths(store.path_of(parse_root(f"s3a://{BUCKETS['east']}/lineages/{time.time_ns()}")), store)


def write_batches(paths: JobPaths, batch_ids) -> None:
    for batch_id in batch_ids:
        write_batch_table(batch_rows(batch_id), paths.output, batch_id, store=paths.store)


def compact(paths: JobPaths, through: int, now_s: float):
    return object_compaction.compact_output(paths.store, paths.output, through, now_s=now_s, grace_s=GRACE_S)


def compacted_names(paths: JobPaths) -> list[str]:
    return sorted(e.name for e in paths.store.list(paths.output, recursive=True) if e.name.startswith("compacted-"))


def test_compaction_leaves_the_read_equal_and_after_the_grace_time_a_read_lists_no_merged_batch(s3):
    store, paths = s3
    write_batches(paths, range(5))
    before = read_all(paths, store)
    # batches 0..3, three hours each: one file per hour, read instead of twelve
    done = compact(paths, 3, now_s=1000.0)
    assert (done.through_batch, done.files_written, done.folders_merged, done.hours) == (3, 3, 4, [H0, H0 + 1, H0 + 2])
    assert read_all(paths, store).equals(before)
    assert len(committed_files(paths.output, store=store)) == 3 + 3  # compacted, and batch 4's
    assert done.folders_removed == 0  # within the grace time the merged batches stay for readers
    # a span reads its hours' compacted files only
    one_hour = committed_files(paths.output, (H0 + 1) * HOUR_US, (H0 + 1) * HOUR_US + 1, store=store)
    assert len(one_hour) == 2 and all("hour=01" in str(f) for f in one_hour)

    later = compact(paths, 3, now_s=1000.0 + GRACE_S)  # nothing new to merge; the merged batches go
    assert later.folders_removed == 4 and later.files_written == 0
    assert commits.committed_batches(store, paths.output) == [4]
    assert read_all(paths, store).equals(before)
    assert last_output_batch(paths) == 4

    write_batches(paths, [5])
    before = read_all(paths, store)
    again = compact(paths, 5, now_s=2000.0)  # the next compaction starts one past the boundary
    assert store.exists(paths.output / "_compactions" / "4.json") and again.through_batch == 5
    assert read_all(paths, store).equals(before)
    assert len(compacted_names(paths)) == 6


def step_that_dies(step):
    def dies(*args, **kwargs):
        step(*args, **kwargs)
        raise RuntimeError(f"killed after {step.__name__}")

    return dies


def delete_that_dies(delete, after: int):
    calls = []

    def dies(path):
        if len(calls) == after:
            raise RuntimeError("killed while removing merged batches")
        calls.append(path)
        delete(path)

    return dies


@pytest.mark.parametrize(
    "step",
    [
        "_write_compacted",  # files written, no record: nobody reads them
        "_publish",  # the record in, the hint not: readers follow the records past the hint
        "_write_hint",  # published; merged batches not removed yet
        "_remove_merged",  # killed half way through removing them: some files, some records gone
    ],
)
def test_a_compaction_killed_after_any_step_leaves_the_read_equal_and_the_next_one_finishes(s3, monkeypatch, step):
    store, paths = s3
    write_batches(paths, range(4))
    before = read_all(paths, store)
    with monkeypatch.context() as patched:
        if step == "_remove_merged":
            compact(paths, 2, now_s=1000.0 - GRACE_S)
            patched.setattr(store, "delete", delete_that_dies(store.delete, after=4))
        else:
            patched.setattr(object_compaction, step, step_that_dies(getattr(object_compaction, step)))
        with pytest.raises(RuntimeError, match="killed"):
            compact(paths, 2, now_s=1000.0)
        assert read_all(paths, store).equals(before)
    compact(paths, 3, now_s=1000.0)
    assert read_all(paths, store).equals(before)
    compact(paths, 3, now_s=1000.0 + GRACE_S)
    assert read_all(paths, store).equals(before)
    # every compacted file left is one a record names; every merged batch's files are gone
    named = {str(f) for f in commits.compacted_files(store, paths.output, 3)}
    assert {str(e.path) for e in store.list(paths.output, recursive=True) if e.name.startswith("compacted-")} == named
    assert not [e for e in store.list(paths.output, recursive=True) if "/batch-" in str(e.path)]
    assert not store.list(paths.output / COMMITS_DIR)


def test_of_two_compactions_from_one_boundary_one_gets_in_and_the_other_removes_its_files(s3):
    store, paths = s3
    write_batches(paths, range(3))
    before = read_all(paths, store)
    loser_files = object_compaction._write_compacted(store, paths.output, [0, 1], 0, 1)
    compact(paths, 2, now_s=1000.0)  # the winner, through 2
    assert not object_compaction._publish(store, paths.output, 0, 1, loser_files, 1000.0)
    compact(paths, 2, now_s=1001.0)  # from the same boundary: removes what lost
    assert read_all(paths, store).equals(before)
    assert all(name.startswith("compacted-0-2-") for name in compacted_names(paths))


def test_compact_lineage_on_s3_merges_through_spark_s_last_done_batch(s3):
    store, paths = s3
    write_batches(paths, range(3))
    before = read_all(paths, store)
    for batch_id in range(2):  # Spark's commit log: batches 0 and 1 done
        store.write_bytes(paths.commits / str(batch_id), b"v1\n{}")
    done = compact_lineage(paths.root, now_s=1000.0, store=store)
    assert [c.through_batch for c in done] == [1, 1, 1] and done[0].files_written == 3
    assert read_all(paths, store).equals(before)
