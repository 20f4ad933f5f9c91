"""A region's storage root as a URI: a local folder, or a bucket and prefix on an S3 store.

Accepted forms:

* ``/srv/tidegate/east`` or ``var/east`` — a local folder (relative paths are relative to the
  working directory, as every path in a spec is);
* ``file:///srv/tidegate/east`` — the same, spelled as a URI;
* ``s3a://bucket/prefix`` — AWS S3 or an S3-compatible store, through Hadoop's S3A inside
  Spark and ``pyarrow.fs.S3FileSystem`` in Python (:mod:`tidegate.storage.s3`).

ADLS (``abfss://``) and GCS (``gs://``) are named and refused with a clear message: they are
the next stores, through the same layer. A URI never carries credentials: they come from the
environment or the instance role (:class:`tidegate.storage.s3.S3Settings`).

Pure: no pyspark, no pyarrow, no network.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

from tidegate.errors import ConfigError

LOCAL, S3 = "file", "s3a"

# named so the message says what they are and that they are coming, not "unknown scheme"
_NOT_YET = {
    "abfss": "Azure Data Lake Storage (ADLS Gen2)",
    "abfs": "Azure Data Lake Storage (ADLS Gen2)",
    "wasbs": "Azure Blob Storage",
    "gs": "Google Cloud Storage",
    "hdfs": "HDFS",
}
_S3_ALIASES = ("s3", "s3n")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


@dataclass(frozen=True)
class StorageRoot:
    """Where a region keeps its lineages. ``local`` roots have ``path``; ``s3a`` roots have
    ``bucket`` and ``prefix`` (no leading or trailing slash; empty for the bucket's top)."""

    scheme: str
    path: Path | None = None
    bucket: str = ""
    prefix: str = ""

    @property
    def is_local(self) -> bool:
        return self.scheme == LOCAL

    @property
    def local_path(self) -> Path:
        """The folder of a local root; raises for an S3 root, or a local one built without a path."""
        if not self.is_local:
            raise ValueError(f"storage root {self} is not a local folder")
        if self.path is None:
            raise ValueError("a local storage root was built without a path")
        return self.path

    @property
    def uri(self) -> str:
        """The canonical spelling: what Hadoop's FileSystem (Spark) opens."""
        if self.is_local:
            return self.local_path.as_uri()
        return f"s3a://{self.bucket}/{self.prefix}" if self.prefix else f"s3a://{self.bucket}"

    @property
    def arrow_path(self) -> str:
        """The same place as ``pyarrow.fs`` names it: a local path, or ``bucket/prefix``."""
        if self.is_local:
            return str(self.path)
        return f"{self.bucket}/{self.prefix}" if self.prefix else self.bucket

    def child(self, *parts: str) -> StorageRoot:
        """The root one or more plain names further down (``root.child("lineages", "a")``)."""
        for part in parts:
            _check_segment(part, f"path part {part!r}")
        if self.is_local:
            return StorageRoot(LOCAL, path=self.local_path.joinpath(*parts))
        return StorageRoot(S3, bucket=self.bucket, prefix="/".join(filter(None, (self.prefix, *parts))))

    def __str__(self) -> str:
        return self.uri


def parse_root(text: str | Path, *, base: Path | None = None) -> StorageRoot:
    """Parse a storage root; a :class:`~tidegate.errors.ConfigError` says what is wrong.

    ``base`` anchors a relative local path (default: the working directory).
    """
    if isinstance(text, Path):
        return _local(text, base)
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("a storage root is empty", "give a local folder or an s3a://bucket/prefix URI")
    text = text.strip()
    match = _SCHEME.match(text)
    if match is None or len(match.group(1)) == 1:  # no scheme (or a Windows drive letter)
        return _local(Path(text), base)
    scheme = match.group(1).lower()
    if scheme == "file":
        return _file_uri(text)
    if scheme == S3:
        return _s3a(text)
    if scheme in _S3_ALIASES:
        raise ConfigError(
            f"storage root {text!r}: the {scheme}:// scheme is not how Tidegate names S3",
            f"write s3a://{text.split('://', 1)[-1]} (Hadoop's S3A connector serves AWS S3 and S3-compatible stores)",
        )
    if scheme in _NOT_YET:
        raise ConfigError(
            f"storage root {text!r}: {_NOT_YET[scheme]} ({scheme}://) is not supported yet",
            "use a local folder or an S3 store (s3a://bucket/prefix); ADLS and GCS are the next stores",
        )
    raise ConfigError(
        f"storage root {text!r}: unknown scheme {scheme}://",
        "use a local folder, file:///path, or s3a://bucket/prefix",
    )


def _local(path: Path, base: Path | None) -> StorageRoot:
    path = path.expanduser()
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    return StorageRoot(LOCAL, path=Path(_normalise(path)))


def _normalise(path: Path) -> str:
    # "a/./b" and "a//b" are the same folder; ".." is kept out of roots altogether
    parts = PurePosixPath(path).parts
    if ".." in parts:
        raise ConfigError(f"storage root {str(path)!r} contains '..'", "give the folder without '..'")
    return str(PurePosixPath(*parts))


def _file_uri(text: str) -> StorageRoot:
    split = urlsplit(text)
    if split.netloc not in ("", "localhost"):
        raise ConfigError(
            f"storage root {text!r} names host {split.netloc!r}",
            "a file:// root is on this machine: write file:///absolute/path",
        )
    if split.query or split.fragment:
        raise ConfigError(f"storage root {text!r} has a query or fragment", "give file:///absolute/path alone")
    path = unquote(split.path)
    if not path.startswith("/"):
        raise ConfigError(f"storage root {text!r} is not an absolute path", "write file:///absolute/path")
    return _local(Path(path), None)


def _s3a(text: str) -> StorageRoot:
    split = urlsplit(text)
    if "@" in split.netloc:
        raise ConfigError(
            f"storage root s3a://…@{split.netloc.rsplit('@', 1)[-1]}/… carries credentials",
            "never put keys in a storage root or a spec: set them in the environment "
            "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) or use the instance role",
        )
    if split.query or split.fragment:
        raise ConfigError(f"storage root {text!r} has a query or fragment", "give s3a://bucket/prefix alone")
    bucket = split.netloc
    if not bucket:
        raise ConfigError(f"storage root {text!r} names no bucket", "write s3a://bucket/prefix")
    _check_bucket(bucket, text)
    prefix = split.path.strip("/")
    if prefix:
        for part in prefix.split("/"):
            _check_segment(part, f"storage root {text!r}")
    return StorageRoot(S3, bucket=bucket, prefix=prefix)


def _check_bucket(bucket: str, text: str) -> None:
    fix = (
        "an S3 bucket name is 3–63 lowercase letters, digits, dots and hyphens, "
        "starting and ending with a letter or digit"
    )
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise ConfigError(f"storage root {text!r}: {bucket!r} is not a valid bucket name", fix)
    try:
        ipaddress.ip_address(bucket)
    except ValueError:
        return
    raise ConfigError(f"storage root {text!r}: a bucket is not named like an IP address", fix)


def _check_segment(part: str, where: str) -> None:
    if part in ("", ".", "..") or "/" in part or "\\" in part or any(ord(c) < 32 for c in part):
        raise ConfigError(
            f"{where}: {part!r} is not a plain name (empty, '.', '..', a slash or a control character)",
            "name each folder of the prefix plainly: s3a://bucket/tidegate/east",
        )
