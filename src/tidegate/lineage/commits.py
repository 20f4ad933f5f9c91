"""A batch's commit on an object store: a record created once, never a rename.

An S3 store has no rename (S3A's is a copy and a delete per object) and no lock, so on an
``s3a://`` root a batch does not stage and rename. Its files are written under names of
their own attempt, where they stay — the driver's straight into the layout's folders
(``date=D/hour=H/batch-N/part-<attempt>.parquet``), Spark's writers into a hidden attempt
folder of the output (``.tmp-batch-N-<attempt>/_hour=H/…``) — and the batch becomes visible
when its **commit record** ``<output>/_commits/N.json`` is created with put-if-absent, inside
the fence's checks. The record lists every file of the batch with its hour; readers take a
batch's files from its record and nothing else, so files of an attempt that never committed
are invisible.

Why one record decides: Spark's offset log fixes each batch's input once, and a batch's rows
are a pure function of that input and the previous state version, so every attempt of batch
``N`` — a re-run after a crash, or a stale driver racing its successor — writes the same
rows. Put-if-absent lets exactly one attempt's record in; the others are refused and their
files are garbage. Garbage is removed only for batches that have a record
(:func:`clear_uncommitted`): a file of a batch without one may still be listed by a record
that is on its way, so it stays until its batch is decided.

Records never change, so a reader may keep the ones it read (:func:`read_record` does).

**Compaction** (:mod:`tidegate.lineage.object_compaction`) merges the batches ``A..B`` of each
hour into ``date=D/hour=H/compacted-A-B-<attempt>.parquet`` and makes them visible by creating
``<output>/_compactions/A.json`` with put-if-absent: records chain, each starting one past the
previous one's ``through_batch``, so one compaction at most wins from each boundary. A reader
takes the boundary ``B`` first (:func:`compacted_boundary`), then batches through ``B`` from
the compacted files of its hours that a record names, and batches after ``B`` from their
commit records: each batch once, whichever step a compaction stopped at. Once the merged
batches' files and commit records are removed (after a grace time), a read costs a listing
of the span's hours and of the records written since, however long the lineage has run.

Local roots do not use this module: they commit by rename (:mod:`tidegate.spark.pipeline.sink.files`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import PurePath

from tidegate.lineage.layout import (
    COMMITS_DIR,
    COMMITTED_FILE,
    COMPACTED_PREFIX,
    COMPACTION_FILE,
    COMPACTIONS_DIR,
    RETAINED_FILE,
    batch_folder_name,
    hour_dir,
    hour_dirs,
)
from tidegate.storage.store import Store

_RECORD = re.compile(r"^(\d+)\.json$")
_ATTEMPT_FOLDER = re.compile(r"^\.tmp-batch-(\d+)-([0-9a-f]+)$")
_BATCH_FOLDER = re.compile(r"^batch-(\d+)$")
_COMPACTED = re.compile(rf"^{COMPACTED_PREFIX}(\d+)-(\d+)-([0-9a-f]+)\.parquet$")


@dataclass(frozen=True)
class CommittedFile:
    hour: int
    path: str  # relative to the output
    rows: int


def record_path(base: PurePath, batch_id: int) -> PurePath:
    return base / COMMITS_DIR / f"{batch_id}.json"


def part_path(base: PurePath, hour: int, batch_id: int, attempt: str, index: int = 0) -> PurePath:
    """Where the driver writes batch ``batch_id``'s rows of ``hour`` on an object store."""
    return hour_dir(base, hour) / batch_folder_name(batch_id) / f"part-{attempt}-{index:05d}.parquet"


def attempt_folder(base: PurePath, batch_id: int, attempt: str) -> PurePath:
    """The hidden folder a Spark writer writes one attempt of batch ``batch_id`` into."""
    return base / f".tmp-batch-{batch_id}-{attempt}"


def commit_batch(
    store: Store, base: PurePath, batch_id: int, files: list[CommittedFile], *, epoch: int | None, attempt: str
) -> bool:
    """Create batch ``batch_id``'s record; False when an earlier attempt's is there (its
    rows are these rows), and then this attempt's files are removed. Call it inside the
    fence's commit."""
    doc = {
        "batch_id": batch_id,
        "epoch": epoch,
        "attempt": attempt,
        "files": [{"hour": f.hour, "path": f.path, "rows": f.rows} for f in files],
    }
    if store.put_json_if_absent(record_path(base, batch_id), doc):
        return True
    for f in files:
        store.delete(base / f.path)
    store.delete(attempt_folder(base, batch_id, attempt))
    return False


def committed_batches(store: Store, base: PurePath) -> list[int]:
    """Every batch of the output ``base`` with a record, in order (one listing)."""
    found = (_RECORD.match(e.name) for e in store.list(base / COMMITS_DIR))
    return sorted(int(m.group(1)) for m in found if m)


def read_record(store: Store, base: PurePath, batch_id: int) -> dict:
    """Batch ``batch_id``'s record (kept once read: records never change)."""
    return _cached_json(store, record_path(base, batch_id))


@functools.lru_cache(maxsize=65536)
def _cached_json(store: Store, path: PurePath) -> dict:
    """A record, read once: records are created whole and never change. A missing one raises
    (and so is not cached: it may be created later)."""
    doc = store.read_json(path)
    if doc is None:
        raise FileNotFoundError(f"no record at {path}")
    return doc


def committed_files(
    store: Store, base: PurePath, first_hour: int | None = None, last_hour: int | None = None
) -> list[PurePath]:
    """The files a reader reads for rows of ``base`` in the hours ``[first_hour, last_hour]``
    (None: open), each batch once: through the compaction boundary the compacted files of
    those hours, after it the files of the batches' records, in batch order. Hours before
    what retention kept are left out."""
    floor = store.read_json(base / RETAINED_FILE, {}).get("from_hour")
    if floor is not None and (first_hour is None or first_hour < floor):
        first_hour = int(floor)
    through = compacted_boundary(store, base)  # read before the records: one snapshot
    files = [] if through is None else compacted_files(store, base, through, first_hour, last_hour)
    for batch_id in committed_batches(store, base):
        if through is not None and batch_id <= through:
            continue  # read from a compacted file; a late record of a merged batch is ignored
        for f in read_record(store, base, batch_id)["files"]:
            if (first_hour is None or f["hour"] >= first_hour) and (last_hour is None or f["hour"] <= last_hour):
                files.append(base / f["path"])
    return files


def compaction_path(base: PurePath, first_batch: int) -> PurePath:
    """The record of the compaction that merged batches ``first_batch..B`` of ``base``."""
    return base / COMPACTIONS_DIR / f"{first_batch}.json"


def read_compaction(store: Store, base: PurePath, first_batch: int) -> dict | None:
    """The record of the compaction starting at ``first_batch``; None when there is none
    (kept once read: records never change)."""
    try:
        return _cached_json(store, compaction_path(base, first_batch))
    except FileNotFoundError:  # not cached: it may be created later
        return None


def compacted_boundary(store: Store, base: PurePath) -> int | None:
    """The last batch of ``base`` read from compacted files; None: nothing was compacted.
    ``_compacted.json`` names a boundary already published (it is written after the record,
    and may lag); the records after it are followed, one read each."""
    hint = store.read_json(base / COMPACTION_FILE, {}).get("through_batch")
    through = None if hint is None else int(hint)
    while (record := read_compaction(store, base, 0 if through is None else through + 1)) is not None:
        through = int(record["through_batch"])
    return through


def compacted_files(
    store: Store, base: PurePath, through: int, first_hour: int | None = None, last_hour: int | None = None
) -> list[PurePath]:
    """The compacted files of the hours ``[first_hour, last_hour]`` of ``base`` that a
    compaction record through ``through`` names: one listing per hour."""
    files = []
    for _, folder in hour_dirs(base, first_hour, last_hour, store):
        for entry in store.list(folder):
            found = _COMPACTED.match(entry.name)
            if found is None or int(found.group(2)) > through:
                continue
            record = read_compaction(store, base, int(found.group(1)))
            if (
                record is not None
                and record["attempt"] == found.group(3)
                and int(record["through_batch"]) == int(found.group(2))
            ):
                files.append(entry.path)
    return files


def compacted_file_of(base: PurePath, hour: int, first_batch: int, through_batch: int, attempt: str) -> PurePath:
    return hour_dir(base, hour) / f"{COMPACTED_PREFIX}{first_batch}-{through_batch}-{attempt}.parquet"


def lost_compactions(store: Store, base: PurePath, folder: PurePath, first_batch: int) -> list[PurePath]:
    """Compacted files in ``folder`` of attempts from ``first_batch`` that its record does not
    name (a compaction that lost, or died before its record); [] while it is undecided."""
    record = read_compaction(store, base, first_batch)
    if record is None:
        return []
    lost = []
    for entry in store.list(folder):
        found = _COMPACTED.match(entry.name)
        if (
            found
            and int(found.group(1)) == first_batch
            and (found.group(3) != record["attempt"] or int(found.group(2)) != int(record["through_batch"]))
        ):
            lost.append(entry.path)
    return lost


def clear_uncommitted(store: Store, base: PurePath) -> list[PurePath]:
    """Remove the files of attempts that lost to a committed record; what was removed.
    Files of batches without a record stay: an attempt racing to commit may still list them."""
    committed = set(committed_batches(store, base))
    removed = []
    for entry in store.list(base, recursive=True):
        relative = entry.path.relative_to(base)
        batch = _batch_of(relative)
        if batch is None or batch not in committed:
            continue
        listed = {f["path"] for f in read_record(store, base, batch)["files"]}
        if str(relative) not in listed:
            store.delete(entry.path)
            removed.append(entry.path)
    return removed


def pending_batches(store: Store, base: PurePath) -> list[int]:
    """The batches of ``base`` with files written but no record yet, in order: attempts on
    their way to commit (or that died before it). One listing of the records, one of ``base``."""
    committed = set(committed_batches(store, base))
    found = {_batch_of(e.path.relative_to(base)) for e in store.list(base, recursive=True) if not e.is_dir}
    return sorted(b for b in found if b is not None and b not in committed)


def pending_state_versions(store: Store, state: PurePath) -> list[int]:
    """The state versions under ``state`` with an attempt written but no ``_committed.json``."""
    pending = []
    for version in store.list(state):
        if version.is_dir and version.name.isdigit():
            inside = store.list(version.path)
            if any(e.is_dir for e in inside) and not any(e.name == COMMITTED_FILE for e in inside):
                pending.append(int(version.name))
    return sorted(pending)


def clear_state_attempts(store: Store, state: PurePath) -> list[PurePath]:
    """Remove the attempts of committed state versions that their ``_committed.json`` does
    not name (``state/N/<attempt>/``); versions without one keep theirs."""
    removed = []
    for version in store.list(state):
        if not (version.is_dir and version.name.isdigit()):
            continue
        meta = store.read_json(version.path / COMMITTED_FILE)
        if meta is None:
            continue
        for entry in store.list(version.path):
            if entry.is_dir and entry.name != meta.get("attempt"):
                store.delete(entry.path)
                removed.append(entry.path)
    return removed


def drop_hours_before(store: Store, base: PurePath, hour: int) -> list[PurePath]:
    """Retention: readers of ``base`` skip the hours before ``hour`` from now on (recorded
    first, never moved back), and the files of those hours that batch records list outside
    the hour folders (Spark's attempt folders) are removed; what was removed. The caller
    removes the hour folders."""
    floor = store.read_json(base / RETAINED_FILE, {}).get("from_hour")
    if floor is None or hour > int(floor):
        store.write_json(base / RETAINED_FILE, {"from_hour": hour})
    removed = []
    for batch_id in committed_batches(store, base):
        for f in read_record(store, base, batch_id)["files"]:
            if int(f["hour"]) < hour and attempt_batch(PurePath(f["path"]).parts[0]) is not None:
                store.delete(base / f["path"])
                removed.append(base / f["path"])
    return removed


def attempt_batch(name: str) -> int | None:
    """The batch a hidden attempt folder (``.tmp-batch-N-<attempt>``) holds; None for other names."""
    found = _ATTEMPT_FOLDER.match(name)
    return None if found is None else int(found.group(1))


def _batch_of(relative: PurePath) -> int | None:
    """The batch a data file belongs to, from its attempt or batch folder; None otherwise."""
    for part in relative.parts[:-1]:
        m = _ATTEMPT_FOLDER.match(part) or _BATCH_FOLDER.match(part)
        if m:
            return int(m.group(1))
    return None
