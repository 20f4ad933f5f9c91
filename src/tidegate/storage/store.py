"""The one owner of a lineage's file I/O: a local folder or an S3 store, behind one interface.

Every operation takes a path as the store names it — :meth:`Store.path_of` turns a
:class:`~tidegate.storage.uri.StorageRoot` into one: an absolute ``Path`` on a local root,
``bucket/prefix/…`` (a ``PurePosixPath``) on S3 — and :meth:`Store.uri` turns such a path
into what Spark's Hadoop FileSystem opens (``file:/…`` or ``s3a://…``).

What the two stores promise:

* :meth:`~Store.write_bytes` replaces an object whole: a reader sees the old bytes or the
  new ones. Locally: a hidden temporary file, fsynced, renamed, the folder fsynced. On S3 a
  PUT is atomic per object by itself.
* :meth:`~Store.put_if_absent` creates an object only if nothing is there, and says whether
  it did — the one atomic step a commit on S3 rests on. Locally: ``link(2)`` of a fsynced
  temporary file, which fails when the name exists. On S3: a PUT with ``If-None-Match: *``
  (HTTP 412 when the key exists), sent once through botocore (:mod:`tidegate.storage.aws`)
  since pyarrow sends no conditional headers; a 412 on an object holding these very bytes is
  this call's own earlier PUT, and counts as created.
* :meth:`~Store.list` lists one level or a whole prefix; :meth:`~Store.delete` removes an
  object or everything under a prefix; :meth:`~Store.parquet` hands pyarrow a filesystem
  and a path.
* :meth:`~Store.move_tree` moves everything under one prefix to another. Locally one
  ``rename(2)``, atomic. S3 has no rename: each object is copied by the server
  (``CopyObject``, no bytes through this process), and only when every copy is there is the
  source removed — a move cut short leaves the source whole beside a partial copy.

Free of pyspark; pyarrow is imported when a store needs it.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath
from typing import Any

from tidegate.errors import TidegateError
from tidegate.files import fsync_dir
from tidegate.storage.s3 import S3Settings
from tidegate.storage.uri import StorageRoot

MOVE_REQUESTS = 8  # copy requests S3Store.move_tree keeps in flight


@dataclass(frozen=True)
class Entry:
    """One listed object or folder (S3 has no folders: a common prefix stands for one)."""

    path: PurePath
    is_dir: bool
    size: int = 0

    @property
    def name(self) -> str:
        return self.path.name


class Store:
    """What a lineage's code asks of its storage; :class:`LocalStore` and :class:`S3Store`."""

    is_local: bool = True

    def path_of(self, root: StorageRoot) -> PurePath:
        raise NotImplementedError

    def uri(self, path: PurePath | str) -> str:
        raise NotImplementedError

    def read_bytes(self, path: PurePath | str) -> bytes:
        """The object's bytes; ``FileNotFoundError`` when there is none."""
        raise NotImplementedError

    def write_bytes(self, path: PurePath | str, data: bytes) -> None:
        raise NotImplementedError

    def put_if_absent(self, path: PurePath | str, data: bytes) -> bool:
        raise NotImplementedError

    def exists(self, path: PurePath | str) -> bool:
        raise NotImplementedError

    def list(self, path: PurePath | str, *, recursive: bool = False) -> list[Entry]:
        """What is under ``path`` (one level, or every object with ``recursive``), by path;
        [] when nothing is."""
        raise NotImplementedError

    def delete(self, path: PurePath | str) -> None:
        """Remove the object, or everything under the prefix; nothing there is no error."""
        raise NotImplementedError

    def move_tree(self, source: PurePath | str, target: PurePath | str) -> int:
        """Move everything under ``source`` to ``target``, which must not exist; how many objects
        moved (0 when nothing was under ``source``)."""
        raise NotImplementedError

    def parquet(self, path: PurePath | str) -> tuple[Any, str]:
        """(pyarrow filesystem, path) for ``pyarrow.parquet`` to read or write ``path``."""
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------------
    def read_json(self, path: PurePath | str, default: Any = None) -> Any:
        """The JSON document at ``path``; ``default`` when there is none."""
        try:
            return json.loads(self.read_bytes(path))
        except FileNotFoundError:
            return default

    def write_json(self, path: PurePath | str, doc: Any) -> None:
        self.write_bytes(path, json.dumps(doc, sort_keys=True).encode())

    def put_json_if_absent(self, path: PurePath | str, doc: Any) -> bool:
        return self.put_if_absent(path, json.dumps(doc, sort_keys=True).encode())

    def write_parquet(self, table, path: PurePath | str, **options) -> None:
        """One Parquet file (on S3 an object appears whole, at the end of the upload)."""
        import pyarrow.parquet as pq

        filesystem, where = self.parquet(path)
        pq.write_table(table, where, filesystem=filesystem, **options)

    def read_parquet(self, path: PurePath | str, **options):
        import pyarrow.parquet as pq

        filesystem, where = self.parquet(path)
        return pq.read_table(where, filesystem=filesystem, **options)


class LocalStore(Store):
    """A POSIX folder: today's semantics — fsync, then rename (or link) into place."""

    is_local = True

    def path_of(self, root: StorageRoot) -> Path:
        if not root.is_local:
            raise TidegateError(f"{root} is not a local root", "open it with open_store(root)")
        return root.local_path

    def uri(self, path: PurePath | str) -> str:
        return str(path)  # what the code has always handed Spark for a local lineage

    def read_bytes(self, path: PurePath | str) -> bytes:
        return Path(path).read_bytes()

    def write_bytes(self, path: PurePath | str, data: bytes) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._temp_of(path, data)
        os.replace(tmp, path)
        fsync_dir(path.parent)

    def put_if_absent(self, path: PurePath | str, data: bytes) -> bool:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._temp_of(path, data)
        try:
            os.link(tmp, path)  # atomic, and refused when the name exists
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)
        fsync_dir(path.parent)
        return True

    def exists(self, path: PurePath | str) -> bool:
        return Path(path).exists()

    def list(self, path: PurePath | str, *, recursive: bool = False) -> list[Entry]:
        path = Path(path)
        if not path.is_dir():
            return []
        entries = []
        for p in path.rglob("*") if recursive else path.iterdir():
            try:
                info = p.stat()
            except FileNotFoundError:  # renamed or removed while listed (staging being published)
                continue
            is_dir = stat.S_ISDIR(info.st_mode)
            if not (recursive and is_dir):
                entries.append(Entry(p, is_dir, 0 if is_dir else info.st_size))
        return sorted(entries, key=lambda e: str(e.path))

    def delete(self, path: PurePath | str) -> None:
        path = Path(path)
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)

    def move_tree(self, source: PurePath | str, target: PurePath | str) -> int:
        source, target = Path(source), Path(target)
        if not source.exists():
            return 0
        if target.exists():
            raise TidegateError(f"cannot move {source} to {target}: it exists", "move it to a name not taken")
        moved = sum(1 for p in source.rglob("*") if not p.is_dir()) if source.is_dir() else 1
        target.parent.mkdir(parents=True, exist_ok=True)
        source.rename(target)
        fsync_dir(target.parent)
        if source.parent != target.parent:
            fsync_dir(source.parent)
        return moved

    def parquet(self, path: PurePath | str) -> tuple[Any, str]:
        return None, str(path)

    def write_parquet(self, table, path: PurePath | str, **options) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        super().write_parquet(table, path, **options)

    @staticmethod
    def _temp_of(path: Path, data: bytes) -> Path:
        tmp = path.with_name(f".tmp-{path.name}-{uuid.uuid4().hex}")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return tmp


class S3Store(Store):
    """An S3 store reached with ``settings``: pyarrow for reads, writes, lists and deletes;
    botocore for :meth:`put_if_absent` and the listing behind :meth:`exists`. Both sign with
    the same keys (:func:`tidegate.storage.aws.current_credentials`)."""

    is_local = False

    def __init__(self, settings: S3Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._arrow: tuple[Any, Any] | None = None  # (the keys it signs with, pyarrow filesystem)

    def __repr__(self) -> str:
        return f"S3Store({self.settings})"

    def __reduce__(self):
        return S3Store, (self.settings,)  # clients and keys are found again where it lands

    @property
    def filesystem(self):
        """The pyarrow filesystem, made again whenever the credential chain has new keys
        (temporary credentials refreshed before they expire)."""
        from tidegate.storage.aws import arrow_filesystem, current_credentials

        keys = current_credentials(self.settings)
        with self._lock:
            if self._arrow is None or self._arrow[0] != keys:
                self._arrow = (keys, arrow_filesystem(self.settings, credentials=keys))
            return self._arrow[1]

    def path_of(self, root: StorageRoot) -> PurePosixPath:
        if root.is_local:
            raise TidegateError(f"{root} is a local root", "open it with open_store(root)")
        return PurePosixPath(root.arrow_path)

    def uri(self, path: PurePath | str) -> str:
        return f"s3a://{_key(path)}"

    def read_bytes(self, path: PurePath | str) -> bytes:
        try:
            with self.filesystem.open_input_stream(_key(path)) as source:
                return source.read()
        except FileNotFoundError:
            raise
        except OSError as failed:
            if "NoSuchKey" in str(failed) or "Path does not exist" in str(failed):
                raise FileNotFoundError(_key(path)) from failed
            raise

    def write_bytes(self, path: PurePath | str, data: bytes) -> None:
        with self.filesystem.open_output_stream(_key(path)) as out:
            out.write(data)

    def put_if_absent(self, path: PurePath | str, data: bytes) -> bool:
        """A PUT with ``If-None-Match: *``, sent once: resent after a lost answer, a PUT that landed
        gets a 412, and :func:`tidegate.lineage.commits.commit_batch` would delete the files of its
        own winning record. ``OSError`` instead; on the caller's retry, a 412 on an object holding
        exactly ``data`` counts as created by this call (every caller's document names its attempt)."""
        from botocore.exceptions import BotoCoreError, ClientError

        from tidegate.storage.aws import client

        bucket, _, key = _key(path).partition("/")
        try:
            client(self.settings, attempts=1).put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
            return True
        except ClientError as refused:
            status = refused.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 412:
                try:
                    return self.read_bytes(path) == data
                except FileNotFoundError:  # removed since the 412: not this call's
                    return False
            # 409 ConditionalRequestConflict: a concurrent conditional write of the key is in flight;
            # the caller cannot know who wins, so it is an error it retries as any failed commit
            raise OSError(f"conditional put of s3a://{bucket}/{key} answered {status}: {refused}") from None
        except BotoCoreError as failed:  # not reached, or no answer: whether it landed is unknown
            raise OSError(f"conditional put of s3a://{bucket}/{key} failed: {failed}") from failed

    def exists(self, path: PurePath | str) -> bool:
        """An object, or a prefix with an object under it. S3 has no folders; a store that keeps
        some (SeaweedFS's filer: a folder marker, or a folder emptied a moment ago) still
        lists one as a prefix — it holds nothing, so it is not there."""
        from pyarrow import fs

        found = self.filesystem.get_file_info(_key(path)).type
        return found == fs.FileType.File or (found == fs.FileType.Directory and self._holds_an_object(path))

    def _holds_an_object(self, path: PurePath | str) -> bool:
        """Whether any object other than a folder marker (a key ending in ``/``) is under ``path``:
        ListObjectsV2 pages, until one is found."""
        from botocore.exceptions import BotoCoreError, ClientError

        from tidegate.storage.aws import client

        bucket, _, key = _key(path).partition("/")
        pages = client(self.settings).get_paginator("list_objects_v2")
        try:
            for page in pages.paginate(
                Bucket=bucket, Prefix=f"{key}/" if key else "", PaginationConfig={"PageSize": 1000}
            ):
                if any(not o["Key"].endswith("/") for o in page.get("Contents", ())):
                    return True
        except (BotoCoreError, ClientError) as failed:
            raise OSError(f"listing s3a://{bucket}/{key} failed: {failed}") from failed
        return False

    def list(self, path: PurePath | str, *, recursive: bool = False) -> list[Entry]:
        from pyarrow import fs

        selector = fs.FileSelector(_key(path), recursive=recursive, allow_not_found=True)
        try:
            infos = self.filesystem.get_file_info(selector)
        except OSError as failed:  # a key that is an object, not a prefix
            if "not a directory" in str(failed).lower():
                return []
            raise
        entries = [Entry(PurePosixPath(i.path), i.type == fs.FileType.Directory, i.size or 0) for i in infos]
        return sorted((e for e in entries if not (recursive and e.is_dir)), key=lambda e: str(e.path))

    def delete(self, path: PurePath | str) -> None:
        from pyarrow import fs

        info = self.filesystem.get_file_info(_key(path))
        try:
            if info.type == fs.FileType.Directory:
                self.filesystem.delete_dir(_key(path))
            elif info.type == fs.FileType.File:
                self.filesystem.delete_file(_key(path))
        except FileNotFoundError:
            # SeaweedFS may list a prefix whose folder entry is already gone: remove what is under it
            for entry in self.list(path, recursive=True):
                try:
                    self.filesystem.delete_file(str(entry.path))
                except FileNotFoundError:
                    pass  # removed meanwhile

    def move_tree(self, source: PurePath | str, target: PurePath | str) -> int:
        source, target = _key(source), _key(target)
        if self.list(target, recursive=True):
            raise TidegateError(
                f"cannot move s3a://{source} to s3a://{target}: it holds objects", "move it to a prefix not taken"
            )
        objects = self.list(source, recursive=True)

        def copy(entry: Entry) -> None:
            relative = PurePosixPath(str(entry.path)).relative_to(source)
            self.filesystem.copy_file(str(entry.path), str(PurePosixPath(target) / relative))

        # server-side copies first, several at once (a request each): the source stays whole until all are there
        with ThreadPoolExecutor(max_workers=MOVE_REQUESTS) as pool:
            list(pool.map(copy, objects))
        if objects:
            self.delete(source)
        return len(objects)

    def parquet(self, path: PurePath | str) -> tuple[Any, str]:
        return self.filesystem, _key(path)


LOCAL = LocalStore()


def open_store(root: StorageRoot, settings: S3Settings | None = None) -> Store:
    """The store holding ``root``: :data:`LOCAL` for a folder; for ``s3a://`` the store of
    ``settings`` (default: :meth:`S3Settings.from_env`)."""
    if root.is_local:
        return LOCAL
    return S3Store(settings if settings is not None else S3Settings.from_env())


def _key(path: PurePath | str) -> str:
    text = str(path).strip("/")
    if not text or "//" in text:
        raise TidegateError(f"{path!r} is not a bucket/key path", "build paths with Store.path_of(root)")
    return text
