"""What a lineage has committed: the engine's state versions and the batches readers can see.

Two records of progress sit side by side. Spark's commit log says which micro-batches it
finished; the engine's own state versions (``checkpoint/tidegate/state/N``) say what the
event-time core had decided after batch N — its frontier among them. A state version
counts only once its ``_committed.json`` is there: it is written last and renamed into
place with the rest, so a version without it is a crash's left-over, never read.
A batch's folder of an hour (``date=D/hour=H/batch-N``) counts once visible: the rename
is the commit. On an object store a batch counts once its commit record is there, and its
files are the ones the record lists (:mod:`tidegate.lineage.commits`), or after compaction
the compacted files a compaction record names (:mod:`tidegate.lineage.object_compaction`).

Compaction merges the batch folders through batch ``B`` of each hour into
``compacted-A-B.parquet`` files and then records ``B`` in the output's
``_compacted.json`` (one rename): from that moment readers take the compacted files of
batches through ``B`` and no batch folder at or below it; before it, the opposite. So a
reader sees the old files or the new ones, never both and never neither; the merged
batch folders stay on disk for a grace time, for readers that listed them just before
(:mod:`tidegate.lineage.compaction`).
"""

from __future__ import annotations

import json
from collections.abc import Container
from pathlib import Path, PurePath

from tidegate.lineage import commits
from tidegate.lineage.layout import (
    BATCH_FOLDER_PREFIX,
    COMMITTED_FILE,
    COMPACTED_PREFIX,
    COMPACTION_FILE,
    JobPaths,
    batch_of_folder,
    compacted_range,
    hour_dirs,
    hour_of,
    is_staging,
)
from tidegate.storage.store import LOCAL, Store


def committed_versions(state_dir: PurePath, store: Store = LOCAL, known: Container[int] = ()) -> list[int]:
    """The state versions under ``state_dir`` that were committed (unordered). A version in
    ``known`` (seen committed before: a commit is never undone) is not looked at again."""
    return [
        int(e.name)
        for e in store.list(state_dir)
        if e.is_dir and e.name.isdigit() and (int(e.name) in known or store.exists(e.path / COMMITTED_FILE))
    ]


def has_committed_state(root: PurePath, store: Store = LOCAL) -> bool:
    """True when the lineage's checkpoint holds at least one committed batch."""
    return any(e.name.isdigit() for e in store.list(JobPaths(root, store).commits))


def last_state(paths: JobPaths) -> dict:
    """The engine's last committed state version's metadata (frontier, batch); {} before any."""
    versions = committed_versions(paths.state, paths.store)
    if not versions:
        return {}
    return json.loads(paths.store.read_bytes(paths.state_version(max(versions)) / COMMITTED_FILE))


def compaction_record(directory: PurePath, store: Store = LOCAL) -> dict:
    """The output's compaction record: ``through_batch`` and when each boundary was published."""
    return store.read_json(directory / COMPACTION_FILE, {})


def compacted_through(directory: PurePath) -> int | None:
    """The batch through which ``directory`` is read from compacted files; None: none is."""
    through = compaction_record(directory).get("through_batch")
    return None if through is None else int(through)


def committed_files(
    directory: PurePath, from_us: int | None = None, to_us: int | None = None, store: Store = LOCAL
) -> list[PurePath]:
    """The Parquet files a reader reads for rows of ``directory`` stamped in ``[from_us, to_us]``
    (None: open): those of the hour folders of that span only, each batch once — from its
    compacted file when compaction has published it, else from its batch folder. On an
    object store: the files the commit records of the span's hours list."""
    first = None if from_us is None else hour_of(from_us)
    last = None if to_us is None else hour_of(to_us)
    if not store.is_local:
        return commits.committed_files(store, directory, first, last)
    through = compacted_through(directory)  # read once, before listing: one snapshot
    files: list[PurePath] = []
    for _, folder in hour_dirs(directory, first, last):
        for entry in sorted(Path(folder).iterdir()):  # the local store lists Paths
            if is_staging(entry.name):
                continue
            batch = batch_of_folder(entry.name)
            if batch is not None:
                if through is None or batch > through:
                    files.extend(sorted(entry.glob("*.parquet")))
                continue
            merged = compacted_range(entry.name)
            if merged is not None and through is not None and merged[1] <= through:
                files.append(entry)
    return files


def handover_column(output: PurePath, store: Store = LOCAL) -> str:
    """The time a lineage's rows are handed over (and filed) by: ``window_end`` for window
    rows, ``system_time`` for analytic rows (one per event, final once the watermark passes
    it) — read from the schema of one of its files."""
    import pyarrow.parquet as pq

    files = _any_file(Path(output)) if store.is_local else _any_object(store, output)
    if not files:
        return "window_end"
    filesystem, where = store.parquet(files[0])
    return "window_end" if "window_end" in pq.read_schema(where, filesystem=filesystem).names else "system_time"


def _any_file(output: Path) -> list[PurePath]:
    """One data file of an output, found without listing the whole history; [] when none."""
    for pattern in (f"date=*/hour=*/{COMPACTED_PREFIX}*.parquet", f"date=*/hour=*/{BATCH_FOLDER_PREFIX}*/*.parquet"):
        found = next(output.glob(pattern), None)
        if found is not None:
            return [found]
    return []


def _any_object(store: Store, output: PurePath) -> list[PurePath]:
    """One data file of an output on an object store: a recent batch's, else a compacted one."""
    through = commits.compacted_boundary(store, output)
    for batch_id in reversed(commits.committed_batches(store, output)):
        if through is not None and batch_id <= through:
            break
        files = commits.read_record(store, output, batch_id)["files"]
        if files:
            return [output / files[0]["path"]]
    return [] if through is None else commits.compacted_files(store, output, through)[:1]


def visible_batches(directory: PurePath, store: Store = LOCAL) -> list[int]:
    """Every batch id with a visible folder in ``directory`` (each once, in order); on an
    object store, with a commit record."""
    if not store.is_local:
        return commits.committed_batches(store, directory)
    found = {batch_of_folder(entry.name) for _, folder in hour_dirs(directory) for entry in Path(folder).iterdir()}
    return sorted(b for b in found if b is not None)


def last_output_batch(paths: JobPaths) -> int | None:
    """The last batch whose output is visible; None before the first. A batch that emitted no
    row has no folder: the last committed state version vouches for it (written after its
    outputs)."""
    through = (
        commits.compacted_boundary(paths.store, paths.output)
        if paths.on_object_store
        else compacted_through(paths.output)
    )
    state_batch = last_state(paths).get("batch_id")
    candidates = visible_batches(paths.output, paths.store) + [b for b in (through, state_batch) if b is not None]
    return max(candidates) if candidates else None
