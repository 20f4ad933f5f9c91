"""A reference folder on S3 as a spec or ``TIDEGATE_REFERENCE_DIRS`` spells it: ``s3a://bucket/prefix``.

Its own module: :mod:`tidegate.jobspec.reference` parses ``reference.path`` with it and
:mod:`tidegate.jobspec.folders` the operator's folders, and neither imports the other. Pure.
"""

from __future__ import annotations

from tidegate.errors import PATH_CHARS, ConfigError, excerpt
from tidegate.storage.uri import S3, StorageRoot, parse_root

S3_REFERENCE = "s3a://"  # how a reference folder on S3 is spelled, in TIDEGATE_REFERENCE_DIRS and reference.path


def s3_reference_root(text: str, where: str = "reference.path") -> StorageRoot:
    """The S3 prefix ``text`` (``s3a://bucket/prefix``) names, normalised: no empty, ``.`` or
    ``..`` segment, no credentials, query or fragment (:func:`~tidegate.storage.uri.parse_root`)."""
    try:
        root = parse_root(text.strip())
    except ConfigError as exc:
        raise ConfigError(f"{where} {excerpt(text, PATH_CHARS)} is not a plain S3 prefix: {exc.problem}",
                          f"{exc.fix}, e.g. s3a://bucket/reference/devices") from None  # fmt: skip
    if root.scheme != S3:
        raise ConfigError(f"{where} {excerpt(text, PATH_CHARS)} is not an s3a:// prefix",
                          "write s3a://bucket/prefix")  # fmt: skip
    return root
