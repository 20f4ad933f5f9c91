"""Compaction: the batch folders of each hour merged into one file, while the job writes.

A job with a 5 s trigger leaves ~720 batch folders per hour in each output. Compaction of
an output through batch ``B`` (the last batch Spark recorded done, which it never runs
again) goes:

1. under the output's compaction lock, for every hour holding batch folders after the
   previous boundary ``P`` and through ``B``: their rows — each with its ``batch_id`` — are
   written to a hidden file, fsynced, and renamed to ``compacted-(P+1)-B.parquet``. Readers
   ignore it: its batches are beyond the published boundary.
2. ``_compacted.json`` is replaced (one rename) with ``through_batch: B``. From then on
   readers take compacted files through ``B`` and batch folders after it
   (:func:`tidegate.lineage.committed.committed_files`): old files or new ones, never both,
   never neither.
3. Batch folders merged by a boundary published at least ``grace_s`` ago are removed: a
   reader that listed them just before step 2 still finds them for that long.

Exactly once holds: the driver never re-runs a batch Spark recorded done, and a batch at or
below the boundary writes nothing (:func:`tidegate.spark.pipeline.sink.files.write_batch`).
Plain pyarrow: no Spark session, so the CLI, a DAG task or the driver's own thread runs it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path, PurePath

from tidegate.files import atomic_write_json, flocked, fsync_dir
from tidegate.lineage.committed import compaction_record
from tidegate.lineage.compacted import Compacted
from tidegate.lineage.layout import (
    COMPACTION_FILE,
    JobPaths,
    batch_of_folder,
    compacted_name,
    compacted_range,
    hour_dirs,
    is_staging,
    staging_dir,
)
from tidegate.storage.store import LOCAL, Store

COMPACTION_LOCK = ".compaction.lock"
DEFAULT_GRACE_S = 3600.0  # how long merged batch folders stay for readers that listed them


def done_through(paths: JobPaths) -> int | None:
    """The last batch Spark's commit log records as done: never run again, safe to merge."""
    done = [int(e.name) for e in paths.store.list(paths.commits) if e.name.isdigit()]
    return max(done) if done else None


def compact_lineage(
    root: PurePath, *, now_s: float, grace_s: float = DEFAULT_GRACE_S, store: Store = LOCAL
) -> list[Compacted]:
    """Compact every row output of the lineage at ``root`` (a path of ``store``) through its
    last done batch; on an object store by record (:mod:`tidegate.lineage.object_compaction`)."""
    paths = JobPaths(root, store)
    through = done_through(paths)
    if through is None:
        return [Compacted(output, None) for output in paths.partitioned_outputs]
    if not store.is_local:
        from tidegate.lineage.object_compaction import compact_output

        return [
            compact_output(store, output, through, now_s=now_s, grace_s=grace_s) for output in paths.partitioned_outputs
        ]
    # a local lineage's paths are Paths
    return [compact(Path(output), through, now_s=now_s, grace_s=grace_s) for output in paths.partitioned_outputs]


def compact(output: Path, through_batch: int, *, now_s: float, grace_s: float = DEFAULT_GRACE_S) -> Compacted:
    """Merge ``output``'s batch folders through ``through_batch`` (steps 1–3 above). The
    caller vouches that no batch at or below ``through_batch`` is written again."""
    if not output.is_dir():
        return Compacted(output, None)
    with flocked(output / COMPACTION_LOCK, exclusive=True):  # one at a time: CLI, DAG and driver may all try
        record = compaction_record(output)
        previous = record.get("through_batch")
        published = [tuple(p) for p in record.get("published", [])]
        written, merged, hours = 0, 0, []
        if previous is None or through_batch > previous:
            first = 0 if previous is None else previous + 1
            for hour, listed in hour_dirs(output):
                folder = Path(listed)  # the local store lists Paths
                _clear_unpublished(folder, previous)
                batches = sorted(
                    (b, e)
                    for e in folder.iterdir()
                    if (b := batch_of_folder(e.name)) is not None and first <= b <= through_batch
                )
                if batches:
                    _merge(folder, [e for _, e in batches], compacted_name(first, through_batch))
                    written, merged = written + 1, merged + len(batches)
                    hours.append(hour)
            published.append((through_batch, now_s))
            _publish_record(output, {"through_batch": through_batch, "published": published})
            previous = through_batch
        removed = _remove_merged(output, published, now_s - grace_s)
        return Compacted(output, previous, written, merged, removed, hours)


def _merge(folder: Path, batch_folders: list[Path], name: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    # metadata dropped: Spark's row metadata differs between its files and the driver's
    tables = [
        pq.read_table(f).replace_schema_metadata(None)
        for batch in batch_folders
        for f in sorted(batch.glob("*.parquet"))
    ]
    if not tables:  # batch folders without a row file: nothing to merge, but they are merged
        return
    merged = pa.concat_tables(tables, promote_options="permissive")
    staged = staging_dir(folder, name)
    pq.write_table(merged, staged, use_deprecated_int96_timestamps=True)  # as Spark writes timestamps
    fd = os.open(staged, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(staged, folder / name)
    fsync_dir(folder)


def _publish_record(output: Path, record: dict) -> None:
    atomic_write_json(output / COMPACTION_FILE, record)


def _remove_merged(output: Path, published: list[tuple[int, float]], before_s: float) -> int:
    """Remove batch folders merged by a boundary published before ``before_s``."""
    settled = [b for b, at in published if at <= before_s]
    if not settled:
        return 0
    through = max(settled)
    removed = 0
    for _, folder in hour_dirs(output):
        for entry in Path(folder).iterdir():  # the local store lists Paths
            batch = batch_of_folder(entry.name)
            if batch is not None and batch <= through:
                shutil.rmtree(entry, ignore_errors=True)
                removed += 1
    return removed


def _clear_unpublished(folder: Path, published_through: int | None) -> None:
    """What a compaction that died before publishing left in ``folder``: hidden files, and
    compacted files past the published boundary, which no reader reads and which would
    overlap the ones this compaction writes. Under the lock nobody else writes them."""
    for entry in folder.iterdir():
        merged = compacted_range(entry.name)
        if is_staging(entry.name) or (
            merged is not None and (published_through is None or merged[1] > published_through)
        ):
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
