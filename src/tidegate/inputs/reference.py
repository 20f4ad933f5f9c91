"""Reference tables on disk: the snapshot folders of a spec's ``reference.path``, read on the driver.

A reference table's folder holds one folder per snapshot, ``valid_from=<ISO-8601 time>``
(:mod:`tidegate.eventtime.reference`), each with the snapshot's files — ``*.csv`` with a header
row, or ``*.parquet`` — read in name order. Names starting with ``.`` or ``_`` are skipped, so a
snapshot is written under such a name and renamed into place whole. A snapshot is immutable
once published: its files' names, sizes and SHA-256 are its :attr:`Snapshot.fingerprint`, which
the job records (:mod:`tidegate.lineage.reference_records`) and checks on every later read.

Where the folder may be: a spec is written by a job author, not by the operator, so
``reference.path`` must resolve — symlinks followed — inside one of the **reference
folders**: ``TIDEGATE_REFERENCE_DIRS`` (separated by ``:``), by default ``jobs/`` and
``$TIDEGATE_HOME/reference`` of the working directory (:func:`reference_dirs`).

Tables are small (Stream Analytics caps a reference blob at 300 MB): the driver reads them
with pyarrow and hands Spark one frame; every column is read as text from CSV and cast by the
engine to the spec's type, so CSV and Parquet reach the join alike.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import pyarrow as pa

from tidegate.errors import ConfigError
from tidegate.eventtime.reference import snapshot_time_us
from tidegate.jobspec.reference import ReferenceSpec

REFERENCE_DIRS_ENV = "TIDEGATE_REFERENCE_DIRS"
SUFFIX = {"csv": ".csv", "parquet": ".parquet"}


def reference_dirs(env: Mapping[str, str], base: Path) -> tuple[Path, ...]:
    """The reference folders ``env`` configures (relative ones against ``base``), else
    ``base/jobs`` and ``$TIDEGATE_HOME/reference`` (default ``var/reference``)."""
    text = (env.get(REFERENCE_DIRS_ENV) or "").strip()
    if not text:
        home = Path(env.get("TIDEGATE_HOME") or "var")
        return base / "jobs", (home if home.is_absolute() else base / home) / "reference"
    return tuple(Path(p) if Path(p).is_absolute() else base / p for p in (s.strip() for s in text.split(os.pathsep)) if p)


def confined_reference_folder(given: str, folders: Sequence[Path], base: Path) -> Path:
    """The real path of the folder ``reference.path`` names, when it lies inside one of
    ``folders``; a relative path is taken from ``base`` (the working directory, decision 0009)."""
    allowed = f"put the snapshots under {' or '.join(str(f) for f in folders)}, or add their folder to {REFERENCE_DIRS_ENV}"
    path = Path(given)
    path = path if path.is_absolute() else base / path
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise ConfigError(f"reference.path {given}: no such folder", f"create it with its snapshot folders; {allowed}") from None
    if not any(real.is_relative_to(f.resolve()) for f in folders):
        via = " (through a symlink)" if real != path.absolute() else ""
        raise ConfigError(f"reference.path {given} is outside the reference folders{via}", allowed)
    if not real.is_dir():
        raise ConfigError(f"reference.path {given} is not a folder",
                          "name the folder that holds the valid_from=<time>/ snapshot folders")
    return real


@dataclass(frozen=True)
class Snapshot:
    """One published snapshot: its valid-from time, folder and files (name, bytes, SHA-256)."""

    valid_from_us: int
    folder: Path
    files: tuple[tuple[str, int, str], ...]

    @property
    def fingerprint(self) -> list:
        return [list(f) for f in self.files]


def list_snapshots(folder: Path, fmt: str, hashes: dict | None = None) -> list[Snapshot]:
    """The snapshots in ``folder``, oldest first, their files hashed — the hash is what proves a
    replay reads the same rows. ``hashes`` (path, size, mtime) → SHA-256 spares a driver hashing
    every file on every batch: a file is hashed again when its size or time changes."""
    hashes = {} if hashes is None else hashes
    out = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith((".", "_")) or not entry.is_dir():
            continue
        at = snapshot_time_us(entry.name, "reference.path")
        if at is None:
            continue
        files = []
        for f in sorted(entry.iterdir()):
            if f.name.startswith((".", "_")) or not f.is_file() or f.suffix != SUFFIX[fmt]:
                continue
            info = f.stat()
            key = (str(f), info.st_size, info.st_mtime_ns)
            if key not in hashes:
                hashes[key] = _sha256(f)
            files.append((f.name, info.st_size, hashes[key]))
        out.append(Snapshot(at, entry, tuple(files)))
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_snapshot(snapshot: Snapshot, reference: ReferenceSpec) -> pa.Table:
    """The snapshot's rows, the spec's columns only, in order (CSV: as text). A missing
    column is an error naming the file."""
    names = list(reference.columns)
    parts = []
    for name, _, _ in snapshot.files:
        path = snapshot.folder / name
        try:
            if reference.format == "csv":
                from pyarrow import csv

                convert = csv.ConvertOptions(column_types={c: pa.string() for c in names}, include_columns=names,
                                             strings_can_be_null=True)  # fmt: skip
                table = csv.read_csv(path, convert_options=convert)
            else:
                import pyarrow.parquet as pq

                table = pq.read_table(path, columns=names)
        except (pa.ArrowInvalid, KeyError) as exc:
            raise ConfigError(f"reference {reference.name}: cannot read {path}: {str(exc).splitlines()[0]}",
                              f"each file needs the columns {', '.join(names)}"
                              + (" and a header row" if reference.format == "csv" else "")) from None
        parts.append(table.select(names))
    if not parts:  # a snapshot without files: the table was empty from its time
        return pa.table({c: pa.array([], pa.string()) for c in names})
    return pa.concat_tables(parts, promote_options="permissive")
