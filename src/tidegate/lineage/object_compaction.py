"""Compaction on an object store: an hour's committed batches merged into one file, no rename.

The local compaction (:mod:`tidegate.lineage.compaction`) publishes by renaming under a lock;
an S3 store has neither, so an output ``O`` is compacted through batch ``B`` (the last batch
Spark recorded done, which it never runs again) in four steps, each safe to die after:

1. From ``A`` — one past the boundary published so far (0 at first) — the files the commit
   records of batches ``A..B`` list are merged per hour into
   ``date=D/hour=H/compacted-A-B-<attempt>.parquet``, rows with their ``batch_id``. No
   record names them yet: readers do not read them.
2. ``O/_compactions/A.json`` (its files, ``through_batch: B``, the attempt) is created with
   put-if-absent. That is the commit: from then on readers take batches through ``B`` from
   the files it names and no others (:func:`tidegate.lineage.commits.committed_files`).
   Two compactions from the same ``A`` — CLI, DAG and driver may all try — cannot both get
   in; the one refused removes its files. Files of a dead attempt from ``A`` are removed once
   ``A`` is decided.
3. ``O/_compacted.json`` records the boundary and when it was published: a hint that saves
   readers following the chain of records, and the clock of step 4. It may lag (a death
   before it): readers follow the records past it.
4. The files of batches merged by a boundary published at least ``grace_s`` ago are
   removed, then their commit records: a reader that took the records before step 2 still
   finds the files for that long, and afterwards ``_commits/`` holds only the batches since,
   so a read stops costing more as the lineage ages.
"""

from __future__ import annotations

import uuid
from pathlib import PurePath

from tidegate.lineage import commits
from tidegate.lineage.compacted import Compacted
from tidegate.lineage.layout import COMPACTION_FILE, RETAINED_FILE, batch_folder_name, hour_dir
from tidegate.storage.store import Store


def compact_output(store: Store, output: PurePath, through_batch: int, *, now_s: float, grace_s: float) -> Compacted:
    """Merge ``output``'s committed batches through ``through_batch`` (steps 1–4 above). The
    caller vouches that no batch at or below ``through_batch`` is run again."""
    previous = commits.compacted_boundary(store, output)
    published = [tuple(p) for p in store.read_json(output / COMPACTION_FILE, {}).get("published", [])]
    written, merged, hours = 0, 0, []
    if previous is None or through_batch > previous:
        first = 0 if previous is None else previous + 1
        batches = [b for b in commits.committed_batches(store, output) if first <= b <= through_batch]
        files = _write_compacted(store, output, batches, first, through_batch)
        if _publish(store, output, first, through_batch, files, now_s):
            written, merged, hours = len(files), len(batches), sorted(f["hour"] for f in files)
            published.append((through_batch, now_s))
            _write_hint(store, output, through_batch, published)
        for hour in {f["hour"] for f in files}:
            for lost in commits.lost_compactions(store, output, hour_dir(output, hour), first):
                store.delete(lost)
        previous = commits.compacted_boundary(store, output)
    removed = _remove_merged(store, output, published, now_s - grace_s)
    return Compacted(output, previous, written, merged, removed, hours)


def _write_compacted(store: Store, output: PurePath, batches: list[int], first: int, through: int) -> list[dict]:
    """Step 1: one file per hour of the batches' rows; what was written (as a record lists it)."""
    import pyarrow as pa

    floor = store.read_json(output / RETAINED_FILE, {}).get("from_hour")  # hours retention removed
    parts: dict[int, list[PurePath]] = {}
    for batch_id in batches:
        for f in commits.read_record(store, output, batch_id)["files"]:
            if floor is None or int(f["hour"]) >= int(floor):
                parts.setdefault(int(f["hour"]), []).append(output / f["path"])
    attempt = uuid.uuid4().hex[:16]
    files = []
    for hour, paths in sorted(parts.items()):
        # metadata dropped: Spark's row metadata differs between its files and the driver's
        merged = pa.concat_tables(
            [store.read_parquet(p).replace_schema_metadata(None) for p in paths], promote_options="permissive"
        )
        path = commits.compacted_file_of(output, hour, first, through, attempt)
        store.write_parquet(merged, path, use_deprecated_int96_timestamps=True)  # as Spark writes timestamps
        files.append({"hour": hour, "path": str(path.relative_to(output)), "rows": merged.num_rows, "attempt": attempt})
    return files


def _publish(store: Store, output: PurePath, first: int, through: int, files: list[dict], now_s: float) -> bool:
    """Step 2: the compaction's record, created once; False when another compaction from
    ``first`` got in (its files, not these, are the batches' from now on)."""
    attempt = files[0]["attempt"] if files else uuid.uuid4().hex[:16]
    doc = {
        "first_batch": first,
        "through_batch": through,
        "attempt": attempt,
        "published_s": now_s,
        "files": [{k: f[k] for k in ("hour", "path", "rows")} for f in files],
    }
    return store.put_json_if_absent(commits.compaction_path(output, first), doc)


def _write_hint(store: Store, output: PurePath, through: int, published: list[tuple]) -> None:
    """Step 3."""
    store.write_json(output / COMPACTION_FILE, {"through_batch": through, "published": published})


def _remove_merged(store: Store, output: PurePath, published: list[tuple], before_s: float) -> int:
    """Step 4: the files of batches merged by a boundary published before ``before_s``, each
    batch's record last (a death half way leaves it to be finished next time); how many
    batches went."""
    settled = [b for b, at in published if at <= before_s]
    if not settled:
        return 0
    through = max(settled)
    removed = 0
    attempt_folders = [
        e.path
        for e in store.list(output)
        if e.is_dir and commits.attempt_batch(e.name) is not None and commits.attempt_batch(e.name) <= through
    ]
    for batch_id in commits.committed_batches(store, output):
        if batch_id > through:
            break
        record = commits.read_record(store, output, batch_id)
        for hour in {int(f["hour"]) for f in record["files"]}:
            store.delete(hour_dir(output, hour) / batch_folder_name(batch_id))  # with any lost attempt's files
        for f in record["files"]:
            store.delete(output / f["path"])
        for folder in attempt_folders:
            if commits.attempt_batch(folder.name) == batch_id:
                store.delete(folder)
        store.delete(commits.record_path(output, batch_id))
        removed += 1
    return removed
