"""What a reference snapshot is once listed, and its files as tables — wherever the files are.

:mod:`tidegate.inputs.reference` (local folders) and :mod:`tidegate.inputs.reference_s3` (S3
prefixes) list and read snapshots; both hand the same :class:`Snapshot` on and turn each file's
bytes into the spec's columns here, so CSV and Parquet reach the join alike from either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tidegate.errors import ConfigError
from tidegate.jobspec.folders import ReferenceFolder
from tidegate.jobspec.reference import ReferenceSpec


@dataclass(frozen=True)
class Snapshot:
    """One published snapshot: its valid-from time, folder and files (name, bytes, SHA-256); on
    S3 also each file's ETag when it was hashed, which a read demands (``If-Match``)."""

    valid_from_us: int
    folder: ReferenceFolder
    files: tuple[tuple[str, int, str], ...]
    etags: tuple[str, ...] = field(default=(), compare=False)

    @property
    def fingerprint(self) -> list:
        return [list(f) for f in self.files]


def snapshot_table(source: Any, reference: ReferenceSpec, where: str) -> pa.Table:
    """The spec's columns of one snapshot file (``source``: a file object or pyarrow buffer
    reader), in order; CSV as text. A missing column is an error naming ``where``."""
    names = list(reference.columns)
    try:
        if reference.format == "csv":
            from pyarrow import csv

            convert = csv.ConvertOptions(column_types={c: pa.string() for c in names}, include_columns=names,
                                         strings_can_be_null=True)  # fmt: skip
            table = csv.read_csv(source, convert_options=convert)
        else:
            import pyarrow.parquet as pq

            table = pq.read_table(source, columns=names)
    except (pa.ArrowInvalid, KeyError) as exc:
        raise ConfigError(
            f"reference {reference.name}: cannot read {where}: {str(exc).splitlines()[0][:200]}",
            f"each file needs the columns {', '.join(names)}"
            + (" and a header row" if reference.format == "csv" else ""),
        ) from None
    return table.select(names)


def joined_tables(parts: list[pa.Table], reference: ReferenceSpec) -> pa.Table:
    """A snapshot's files' tables as one; a snapshot without files: the table was empty from its time."""
    if not parts:
        return pa.table({c: pa.array([], pa.string()) for c in reference.columns})
    return pa.concat_tables(parts, promote_options="permissive")
