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
Local roots do not use this module: they commit by rename (:mod:`tidegate.spark.pipeline.sink.files`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import PurePath

from tidegate.lineage.layout import COMMITS_DIR, COMMITTED_FILE, batch_folder_name, hour_dir
from tidegate.storage.store import Store

_RECORD = re.compile(r"^(\d+)\.json$")
_ATTEMPT_FOLDER = re.compile(r"^\.tmp-batch-(\d+)-([0-9a-f]+)$")
_BATCH_FOLDER = re.compile(r"^batch-(\d+)$")


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


def commit_batch(store: Store, base: PurePath, batch_id: int, files: list[CommittedFile], *,
                 epoch: int | None, attempt: str) -> bool:
    """Create batch ``batch_id``'s record; False when an earlier attempt's is there (its
    rows are these rows), and then this attempt's files are removed. Call it inside the
    fence's commit."""
    doc = {"batch_id": batch_id, "epoch": epoch, "attempt": attempt,
           "files": [{"hour": f.hour, "path": f.path, "rows": f.rows} for f in files]}
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
    return _cached_record(store, base, batch_id)


@functools.lru_cache(maxsize=65536)
def _cached_record(store: Store, base: PurePath, batch_id: int) -> dict:
    doc = store.read_json(record_path(base, batch_id))
    if doc is None:
        raise FileNotFoundError(f"no commit record of batch {batch_id} under {base}")
    return doc


def committed_files(store: Store, base: PurePath, first_hour: int | None = None,
                    last_hour: int | None = None) -> list[PurePath]:
    """The files of every committed batch of ``base`` with rows in ``[first_hour, last_hour]``
    (None: open), in batch order. Costs a listing of the records and one read per record
    not read before."""
    files = []
    for batch_id in committed_batches(store, base):
        for f in read_record(store, base, batch_id)["files"]:
            if (first_hour is None or f["hour"] >= first_hour) and (last_hour is None or f["hour"] <= last_hour):
                files.append(base / f["path"])
    return files


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


def _batch_of(relative: PurePath) -> int | None:
    """The batch a data file belongs to, from its attempt or batch folder; None otherwise."""
    for part in relative.parts[:-1]:
        m = _ATTEMPT_FOLDER.match(part) or _BATCH_FOLDER.match(part)
        if m:
            return int(m.group(1))
    return None

