"""Reference tables on disk: the snapshot folders of a spec's ``reference.path``, read on the driver.

A reference table's folder holds one folder per snapshot, ``valid_from=<ISO-8601 time>``
(:mod:`tidegate.eventtime.reference`), each with the snapshot's files — ``*.csv`` with a header
row, or ``*.parquet`` — read in name order. Names starting with ``.`` or ``_`` are skipped, so a
snapshot is written under such a name and renamed into place whole. A snapshot is immutable
once published: its files' names, sizes and SHA-256 are its :attr:`Snapshot.fingerprint`, which
the job records (:mod:`tidegate.lineage.reference_records`) and checks on every later read.

Where the folder may be: a spec is written by a job author, not by the operator, so
``reference.path``, each snapshot folder in it and each file of those must resolve — symlinks
followed — inside one of the **reference folders** (``TIDEGATE_REFERENCE_DIRS``;
:mod:`tidegate.jobspec.folders` owns them and the checks, which the spec's load runs too). A
driver checks the folder when it starts, each entry as it lists the snapshots
(:func:`list_snapshots`), and each file again as it opens it to hash or read it
(:func:`read_snapshot`): after opening, so a link put in a file's place in between is caught.

A reference folder on S3 (``s3a://bucket/prefix``) has the same layout and the same
fingerprint, read through :mod:`tidegate.inputs.reference_s3`; :func:`list_snapshots` and
:func:`read_snapshot` take either.

Tables are small (Stream Analytics caps a reference blob at 300 MB): the driver reads them
with pyarrow and hands Spark one frame; every column is read as text from CSV and cast by the
engine to the spec's type, so CSV and Parquet reach the join alike.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa

from tidegate.errors import PATH_CHARS, ConfigError, excerpt
from tidegate.inputs.reference_tables import Snapshot, joined_tables, snapshot_table
from tidegate.jobspec.folders import ReferenceFolder, confined_entry, snapshot_entries
from tidegate.jobspec.reference import ReferenceSpec
from tidegate.storage.uri import StorageRoot


def list_snapshots(folder: ReferenceFolder, fmt: str, hashes: dict | None = None, *,
                   roots: Sequence[ReferenceFolder]) -> list[Snapshot]:  # fmt: skip
    """The snapshots in ``folder`` (the real path of ``reference.path``, or its S3 prefix),
    oldest first, their files hashed — the hash is what proves a replay reads the same rows.
    Each snapshot folder and file must lie inside ``roots``, the reference folders
    (:func:`confined_entry`). ``hashes`` (path, size, mtime) → SHA-256 spares a driver hashing
    every file on every batch: a file is hashed again when its size or time changes."""
    hashes = {} if hashes is None else hashes
    if isinstance(folder, StorageRoot):
        from tidegate.inputs.reference_s3 import list_s3_snapshots

        return list_s3_snapshots(folder, fmt, hashes)
    out = []
    for at, entry, files in snapshot_entries(folder, fmt, roots):
        listed = []
        for f in files:
            info = f.stat()
            key = (str(f), info.st_size, info.st_mtime_ns)
            if key not in hashes:
                with _opened(f, folder, roots) as handle:
                    hashes[key] = _sha256(handle)
            listed.append((f.name, info.st_size, hashes[key]))
        out.append(Snapshot(at, entry, tuple(listed)))
    return out


def _opened(path: Path, folder: Path, roots: Sequence[ReferenceFolder]) -> BinaryIO:
    """``path``, a file of a snapshot of the reference folder ``folder``, opened for reading —
    when it lies inside ``roots`` before it is opened and is, once opened, still the file its
    path leads to there: a symlink swapped in between is refused, not read."""
    real = confined_entry(path, folder, roots)
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO put in its place must not block the driver
    handle = os.fdopen(fd, "rb")
    try:
        opened = os.fstat(fd)
        again = confined_entry(path, folder, roots)
        there = os.stat(again)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (there.st_dev, there.st_ino):
            raise ConfigError(f"reference.path: {excerpt(path.relative_to(folder).as_posix(), PATH_CHARS)} "
                              "changed while it was opened",
                              "publish a snapshot whole — under a hidden name, then renamed into place — and never "
                              "change its files afterwards")  # fmt: skip
    except BaseException:
        handle.close()
        raise
    return handle


def _sha256(handle: BinaryIO) -> str:
    digest = hashlib.sha256()
    for block in iter(lambda: handle.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()


def read_snapshot(snapshot: Snapshot, reference: ReferenceSpec, *, roots: Sequence[ReferenceFolder]) -> pa.Table:
    """The snapshot's rows, the spec's columns only, in order (CSV: as text). Each file is
    checked again as it is opened (it must still lie inside ``roots``, the reference folders:
    the folder may have changed since it was listed). A missing column is an error naming the file."""
    if isinstance(snapshot.folder, StorageRoot):
        from tidegate.inputs.reference_s3 import read_s3_snapshot

        return read_s3_snapshot(snapshot, reference)
    parts = []
    for name, _, _ in snapshot.files:
        path = snapshot.folder / name
        with _opened(path, snapshot.folder.parent, roots) as handle:
            parts.append(snapshot_table(handle, reference, str(path)))
    return joined_tables(parts, reference)
