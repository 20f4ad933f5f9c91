"""Reference snapshots on S3: the folder layout of :mod:`tidegate.inputs.reference` under an
``s3a://bucket/prefix``, listed, hashed and read through the project's botocore client
(:func:`tidegate.storage.aws.client`).

The layout is a local folder's: ``<prefix>/valid_from=<ISO-8601 time>/`` per snapshot, each with
its ``*.csv`` or ``*.parquet`` files, read in name order; names starting with ``.`` or ``_``
are skipped. The fingerprint is a local snapshot's too — each file's name, size and the SHA-256
of the bytes read — so the lineage's records (:mod:`tidegate.lineage.reference_records`), the
effective starts and the refusal of a changed snapshot apply unchanged.

**Published** — S3 has no rename, so a snapshot cannot appear whole by being renamed into place.
Instead it is published by its marker: the object ``valid_from=<time>/_published``, written after
every file of the snapshot, with ``If-None-Match: *`` so that it is written once. A snapshot
folder without it is being written (or was abandoned half way) and is not listed: a listing
sees a snapshot whole or not at all. Its content is a manifest of the files for people to
read (``tidegate reference capture`` writes one); only its presence counts. Whoever uploads a
snapshot by other means writes its files first and ``_published`` last.

**Read as listed** — each file is hashed when first listed (cached on key, size and ETag), and
read again with ``If-Match: <ETag>``: a file replaced since it was listed is refused (HTTP 412),
and so are bytes whose SHA-256 is not the listed one.

The store's settings: ``TIDEGATE_S3_REFERENCE_<KEY>``, then ``TIDEGATE_S3_<KEY>``, then AWS's
chain (:meth:`~tidegate.storage.s3.S3Settings.from_env` of ``reference``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from tidegate.errors import PATH_CHARS, ConfigError, excerpt
from tidegate.eventtime.reference import SNAPSHOT_PREFIX, snapshot_folder_name, snapshot_time_us
from tidegate.inputs.reference_tables import Snapshot, joined_tables, snapshot_table
from tidegate.jobspec.folders import SNAPSHOT_SUFFIX
from tidegate.jobspec.reference import ReferenceSpec
from tidegate.storage.s3 import S3Settings
from tidegate.storage.uri import StorageRoot

if TYPE_CHECKING:
    import pyarrow as pa

PUBLISHED = "_published"  # written last: a snapshot folder without it is not there yet
SETTINGS_NAME = "reference"  # TIDEGATE_S3_REFERENCE_<KEY>, then TIDEGATE_S3_<KEY>
_REPUBLISH = "publish a snapshot as a new valid_from=<later time> folder; never change one once its _published is there"


def reference_settings(environ: Mapping[str, str] | None = None) -> S3Settings:
    """How the driver and ``tidegate reference capture`` reach reference snapshots on S3."""
    return S3Settings.from_env(SETTINGS_NAME, environ)


def list_s3_snapshots(root: StorageRoot, fmt: str, hashes: dict, settings: S3Settings | None = None) -> list[Snapshot]:
    """The published snapshots under ``root`` (``reference.path``, already confined), in name
    order as a local folder's, their files hashed; ``hashes`` (key, size, ETag) → SHA-256."""
    s3 = _client(settings)
    out = []
    for at, folder, objects in published_snapshots(s3, root, fmt):
        files, etags = [], []
        for name, size, etag in objects:
            key = f"{folder.prefix}/{name}"
            cached = (f"{root.bucket}/{key}", size, etag)
            if cached not in hashes:
                hashes[cached] = hashlib.sha256(_read(s3, folder, name, etag)).hexdigest()
            files.append((name, size, hashes[cached]))
            etags.append(etag)
        out.append(Snapshot(at, folder, tuple(files), tuple(etags)))
    return out


def read_s3_snapshot(snapshot: Snapshot, reference: ReferenceSpec, settings: S3Settings | None = None) -> pa.Table:
    """The snapshot's rows as :func:`tidegate.inputs.reference.read_snapshot` gives them, each
    file read at the version listed (its ETag) and refused unless its bytes hash as listed."""
    import pyarrow as pa

    folder = snapshot.folder
    assert isinstance(folder, StorageRoot) and len(snapshot.etags) == len(snapshot.files)
    s3 = _client(settings)
    parts = []
    for (name, size, sha256), etag in zip(snapshot.files, snapshot.etags, strict=True):
        data = _read(s3, folder, name, etag)
        if len(data) != size or hashlib.sha256(data).hexdigest() != sha256:
            raise _changed(folder, name)
        parts.append(snapshot_table(pa.BufferReader(data), reference, f"{folder}/{name}"))
    return joined_tables(parts, reference)


def published_snapshots(s3: Any, root: StorageRoot, fmt: str | None) -> Iterator[tuple[int, StorageRoot, list]]:
    """(valid-from, snapshot prefix, its files as (name, size, ETag) in name order) of each
    published snapshot under ``root``; ``fmt`` None: every file not hidden."""
    for name in sorted(_listed(s3, root, folders=True)):
        at = snapshot_time_us(name, "reference.path") if not name.startswith((".", "_")) else None
        if at is None:
            continue
        folder = root.child(name)
        objects = _listed(s3, folder, folders=False)
        if PUBLISHED not in objects:
            continue  # being written: its files first, its marker last
        files = [(n, *objects[n]) for n in sorted(objects)
                 if not n.startswith((".", "_")) and (fmt is None or n.endswith(SNAPSHOT_SUFFIX[fmt]))]  # fmt: skip
        yield at, folder, files


def publish_s3_snapshot(rows: pa.Table, root: StorageRoot, at_us: int, captured_file: str,
                        settings: S3Settings | None = None) -> StorageRoot | None:  # fmt: skip
    """``rows`` as the snapshot ``valid_from=<at_us>`` under ``root``, published by its marker
    written last; None when they equal the newest published snapshot's ``captured_file``.
    Refused when they changed and a published snapshot is not older than ``at_us``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tidegate.storage.store import S3Store

    settings = settings or reference_settings()
    s3, store = _client(settings), S3Store(settings)
    snapshots = list(published_snapshots(s3, root, None))
    if snapshots:
        newest_at, newest, files = snapshots[-1]
        etag = next((e for n, _, e in files if n == captured_file), None)
        if etag is not None and pq.read_table(pa.BufferReader(_read(s3, newest, captured_file, etag))).equals(rows):
            return None
        if newest_at >= at_us:
            raise ConfigError(
                f"{root}: the newest snapshot, {newest.prefix.rsplit('/', 1)[-1]}, is not older than the capture "
                f"time {snapshot_folder_name(at_us)[len(SNAPSHOT_PREFIX) :]}",
                "snapshots only move forward in time: check the clock, or remove the future snapshot",
            )
    folder = root.child(snapshot_folder_name(at_us))
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink)
    data = sink.getvalue().to_pybytes()
    store.write_bytes(f"{folder.arrow_path}/{captured_file}", data)  # replaces what a capture that died left
    manifest = {"files": [[captured_file, len(data), hashlib.sha256(data).hexdigest()]]}
    if not store.put_json_if_absent(f"{folder.arrow_path}/{PUBLISHED}", manifest):
        raise ConfigError(f"{folder}: published by another capture meanwhile", "run one capture of a table at a time")
    return folder


def _client(settings: S3Settings | None) -> Any:
    from tidegate.storage.aws import client

    return client(settings or reference_settings())


def _listed(s3: Any, folder: StorageRoot, *, folders: bool) -> dict[str, Any]:
    """One level under ``folder``: its sub-folders' names (``folders``), or its objects' names →
    (size, ETag). S3 lists keys in byte order, as a local folder's names are sorted."""
    from botocore.exceptions import BotoCoreError, ClientError

    prefix = f"{folder.prefix}/" if folder.prefix else ""
    found: dict[str, Any] = {}
    try:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=folder.bucket, Prefix=prefix, Delimiter="/")
        for page in pages:
            if folders:
                found.update((p["Prefix"][len(prefix) :].rstrip("/"), None) for p in page.get("CommonPrefixes", ()))
            else:
                found.update((o["Key"][len(prefix) :], (int(o["Size"]), o["ETag"])) for o in page.get("Contents", ()))
    except (BotoCoreError, ClientError) as failed:
        raise OSError(f"listing {folder} failed: {failed}") from failed
    return {name: v for name, v in found.items() if name}  # "" is a folder marker of the store's


def _read(s3: Any, folder: StorageRoot, name: str, etag: str) -> bytes:
    """The bytes of ``folder/name`` at the version ``etag``; a :class:`ConfigError` when it was
    replaced or removed since it was listed."""
    from botocore.exceptions import BotoCoreError, ClientError

    key = f"{folder.prefix}/{name}"
    try:
        return s3.get_object(Bucket=folder.bucket, Key=key, IfMatch=etag)["Body"].read()
    except ClientError as refused:
        status = refused.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status in (404, 412):
            raise _changed(folder, name) from None
        raise OSError(f"reading {folder}/{name} failed: {refused}") from None
    except BotoCoreError as failed:
        raise OSError(f"reading {folder}/{name} failed: {failed}") from failed


def _changed(folder: StorageRoot, name: str) -> ConfigError:
    return ConfigError(
        f"reference.path: {excerpt(f'{folder}/{name}', PATH_CHARS)} changed while it was read", _REPUBLISH
    )
