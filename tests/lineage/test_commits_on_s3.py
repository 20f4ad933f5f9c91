"""A lineage on a real S3 store commits without renames: a batch is visible once its commit
record is created, each batch has one version however many attempts race, losers' files
are cleared once the batch is decided, and a stale driver (a fence at a lower epoch) is
refused. The same batches written locally read back equal."""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from s3 import BUCKETS
from tidegate.lineage import commits
from tidegate.lineage.committed import committed_files, committed_versions, last_output_batch, last_state
from tidegate.lineage.fence import Fenced, LeaseClock, LineageFence
from tidegate.lineage.layout import BATCH_COLUMN, HOUR_US, JobPaths
from tidegate.spark.pipeline.sink import files as sink_files
from tidegate.spark.pipeline.sink.files import HOUR_KEY, clear_partial_writes, write_batch_table
from tidegate.spark.pipeline.sink.objects import hour_parts
from tidegate.spark.pipeline.sink.state import StateStore
from tidegate.storage.store import LOCAL, S3Store
from tidegate.storage.uri import parse_root

H0 = 1_767_225_600_000_000 // HOUR_US  # 2026-01-01T00:00Z in hours


def batch_rows(batch_id: int, n: int = 6) -> pa.Table:
    """Rows of one batch spread over three hours, with the columns write_batch adds."""
    ids = list(range(batch_id * 100, batch_id * 100 + n))
    return pa.table(
        {
            "id": ids,
            "value": [i * 2.0 for i in ids],
            BATCH_COLUMN: [batch_id] * n,
            HOUR_KEY: [H0 + i % 3 for i in range(n)],
        }
    )


@pytest.fixture
def s3(s3_stores):
    store = S3Store(s3_stores["east"].settings())
    return store, JobPaths(store.path_of(parse_root(f"s3a://{BUCKETS['east']}/lineages/{time.time_ns()}")), store)


def read_all(paths: JobPaths, store) -> pa.Table:
    files = committed_files(paths.output, store=store)
    tables = [store.read_parquet(f) for f in files]
    return pa.concat_tables(tables).sort_by([("id", "ascending")]) if tables else None


def fence(paths: JobPaths, epoch: int, holds=lambda: True) -> LineageFence:
    clock = LeaseClock(ttl_s=60)
    clock.renewed(time.monotonic())
    return LineageFence(paths.root, epoch, f"run {epoch}", clock, holds, store=paths.store)


def test_batches_written_on_s3_read_back_equal_to_the_local_lineage(s3, tmp_path):
    store, remote = s3
    local = JobPaths(tmp_path / "lineage")
    local.output.mkdir(parents=True)
    for batch_id in range(3):
        write_batch_table(batch_rows(batch_id), local.output, batch_id)
        files = write_batch_table(batch_rows(batch_id), remote.output, batch_id, store=store)
        assert len(files) == 3 and all(f.suffix == ".parquet" for f in files)
    assert read_all(remote, store).equals(read_all(local, LOCAL))
    # a span reads the records' files of its hours only
    one_hour = committed_files(remote.output, (H0 + 1) * HOUR_US, (H0 + 1) * HOUR_US + 1, store=store)
    assert len(one_hour) == 3 and all("hour=01" in str(f) for f in one_hour)
    assert last_output_batch(remote) == 2


def test_files_without_a_record_are_invisible_and_a_second_attempt_is_refused(s3):
    store, paths = s3
    # an attempt that wrote its files and died before its record
    for hour, part in hour_parts(batch_rows(0), paths.output, 0):
        store.write_parquet(part, commits.part_path(paths.output, hour, 0, "deadbeef"))
    assert read_all(paths, store) is None
    first = write_batch_table(batch_rows(0), paths.output, 0, store=store)
    again = write_batch_table(batch_rows(0), paths.output, 0, store=store)  # a re-run: same rows
    assert again == first  # the record's files, the re-run's own removed
    assert read_all(paths, store).num_rows == 6
    # an undecided batch keeps every file; the dead attempt of decided batch 0 goes
    for hour, part in hour_parts(batch_rows(1), paths.output, 1):
        store.write_parquet(part, commits.part_path(paths.output, hour, 1, "cafe"))
    removed = clear_partial_writes([paths.output], store)
    assert len(removed) == 3 and all("deadbeef" in str(p) for p in removed)
    left = [e.path for e in store.list(paths.output, recursive=True) if e.name.endswith(".parquet")]
    assert sorted(left) == sorted(first + [commits.part_path(paths.output, H0 + h, 1, "cafe") for h in range(3)])


def test_a_batch_or_state_version_written_without_its_record_is_pending_until_it_commits(s3):
    # what a fault drill watches for to freeze a driver mid-write on an object store
    store, paths = s3
    assert commits.pending_batches(store, paths.output) == []
    write_batch_table(batch_rows(0), paths.output, 0, store=store)
    for hour, part in hour_parts(batch_rows(1), paths.output, 1):
        store.write_parquet(part, commits.part_path(paths.output, hour, 1, "cafe"))
    assert commits.pending_batches(store, paths.output) == [1]
    write_batch_table(batch_rows(1), paths.output, 1, store=store)
    assert commits.pending_batches(store, paths.output) == []  # the record decided batch 1

    state = StateStore(None, paths.state, store=store)
    staged = state.staging(0)
    sink_files.write_table(batch_rows(0), staged / "policy", store)
    assert commits.pending_state_versions(store, paths.state) == [0]
    state.commit(0, staged, {"batch_id": 0, "frontier_us": 10}, {})
    assert commits.pending_state_versions(store, paths.state) == []


def test_a_stale_driver_is_refused_on_s3(s3):
    store, paths = s3
    old, new = fence(paths, 1), fence(paths, 2)
    old.claim()
    write_batch_table(batch_rows(0), paths.output, 0, store=store, fence=old)
    new.claim()  # the successor: from now on the old driver commits nothing
    with pytest.raises(Fenced):
        write_batch_table(batch_rows(1), paths.output, 1, store=store, fence=old)
    with pytest.raises(Fenced):
        old.claim()
    assert commits.committed_batches(store, paths.output) == [0]
    write_batch_table(batch_rows(1), paths.output, 1, store=store, fence=new)
    assert commits.committed_batches(store, paths.output) == [0, 1]
    assert commits.read_record(store, paths.output, 1)["epoch"] == 2
    lost = fence(paths, 3, holds=lambda: False)  # the database says the lease is not its
    lost.claim()
    with pytest.raises(Fenced):
        write_batch_table(batch_rows(2), paths.output, 2, store=store, fence=lost)


def test_state_versions_commit_once_on_s3(s3):
    store, paths = s3
    state = StateStore(None, paths.state, store=store)
    for attempt in range(2):  # the second attempt of batch 0 is refused: version 0 stays the first's
        staged = state.staging(0)
        sink_files.write_table(batch_rows(0), staged / "policy", store)
        state.commit(0, staged, {"batch_id": 0, "frontier_us": 10 + attempt}, {"frontiers": {"k": attempt}})
    assert state.latest_before(1) == 0 and last_state(paths)["frontier_us"] == 10
    assert state.document(0, "frontiers") == {"k": 0}
    assert store.read_parquet(state.path(0, "policy")).num_rows == 6
    removed = clear_partial_writes(paths.staged_folders, store, state=paths.state)
    assert len(removed) == 1  # the refused attempt's folder
    for batch_id in (1, 2):
        staged = state.staging(batch_id)
        sink_files.write_table(batch_rows(batch_id), staged / "policy", store)
        state.commit(batch_id, staged, {"batch_id": batch_id, "frontier_us": batch_id}, {})
    # the version before the last is removed, the previous one kept (a re-run of batch 2 needs it)
    assert sorted(committed_versions(paths.state, store)) == [1, 2]
    assert {e.path.relative_to(paths.state).parts[0] for e in store.list(paths.state, recursive=True)} == {"1", "2"}
    assert pc.sum(store.read_parquet(state.path(2, "policy")).column("id")).as_py() == sum(range(200, 206))


def test_a_stale_driver_s_late_record_never_names_a_removed_file(s3):
    """The race no lock closes on S3: the old driver passed the fence's checks, then slept
    while its successor claimed the lineage and cleared; it wakes and creates its record."""
    store, paths = s3
    old, new = fence(paths, 1), fence(paths, 2)
    old.claim()
    files = []
    for hour, part in hour_parts(batch_rows(5), paths.output, 5):
        path = commits.part_path(paths.output, hour, 5, "0ld")
        store.write_parquet(part, path)
        files.append(commits.CommittedFile(hour, str(path.relative_to(paths.output)), part.num_rows))
    with old.commit("batch 5"):  # the checks pass here ...
        new.claim()  # ... the successor claims and clears meanwhile ...
        assert clear_partial_writes([paths.output], store) == []  # batch 5 undecided: its files stay
        assert commits.commit_batch(store, paths.output, 5, files, epoch=1, attempt="0ld")  # ... the late record
    assert read_all(paths, store).equals(
        pa.concat_tables([part for _, part in hour_parts(batch_rows(5), paths.output, 5)]).sort_by(
            [("id", "ascending")]
        )
    )
    # the successor's own attempt of batch 5 is refused and reads the same rows from the old files
    assert write_batch_table(batch_rows(5), paths.output, 5, store=store, fence=new) == [
        paths.output / f.path for f in files
    ]
