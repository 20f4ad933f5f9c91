"""A job's reference tables: ``reference`` as one table, or a list of them joined in order.

Stream Analytics' queries join two or three reference inputs — devices, then the site of each
device, then its thresholds. A job lists them under ``reference``, each the mapping one table
is (:mod:`tidegate.jobspec.reference`)::

    reference:
      - {name: devices, path: jobs/samples/device_sites, columns: {deviceId: string, siteId: string},
         keys: [deviceId = devices.deviceId]}
      - {name: sites, path: jobs/samples/sites, columns: {siteId: string, region: string},
         keys: [devices.siteId = sites.siteId], type: left}

The tables are joined in the order listed: each one's keys read the event's fields and the
columns of the tables before it (``devices.siteId``), never a later one's. Each event joins,
per table, the snapshot of that table its System.Timestamp falls in (every table has its own
snapshots, records and effective starts). The single mapping is a list of one, hashed and
written back as it always was; so is its snapshot column, ``reference_snapshot``. With several
tables every row carries one snapshot column per table, ``reference_snapshot_<name>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tidegate.errors import ConfigError, excerpt
from tidegate.jobspec.reference import SNAPSHOT_COLUMN, ReferenceSpec, parse_reference

MAX_REFERENCES = 8  # tables per job: each is listed, read and broadcast every batch


def parse_references(value: Any, payload: Mapping[str, str], builtins: Iterable[str],
                     reserved: frozenset[str], named: bool = False) -> tuple[ReferenceSpec, ...]:  # fmt: skip
    """``reference``: nothing, one table (a mapping), or a list of tables with distinct names.
    ``payload``: the fields of the rows joined; ``named``: the snapshot columns are always
    ``reference_snapshot_<name>`` (a later step's tables)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        table = parse_reference(value, payload, builtins, reserved)
        return () if table is None else _distinct_columns((table,), payload, named)
    if not value:
        raise ConfigError("reference is an empty list", "list at least one table, or remove reference")
    if len(value) > MAX_REFERENCES:
        raise ConfigError(
            f"reference lists {len(value)} tables, more than {MAX_REFERENCES}",
            f"join at most {MAX_REFERENCES} reference tables in a job: merge tables that share a key",
        )
    builtins = list(builtins)
    names = [_listed_name(item) for item in value]
    tables: list[ReferenceSpec] = []
    for n, item in enumerate(value):
        where = f"reference[{n}]" if len(value) > 1 else "reference"
        if item is None:
            raise ConfigError(f"{where} is empty", "write each table as a mapping: {name: …, path: …, …}")
        if names[n] is not None and names[n] in names[:n]:
            raise ConfigError(f"{where}.name: {names[n]} names two tables",
                              "give every reference table its own name")  # fmt: skip
        later = {m for m in names[n + 1 :] if m is not None}
        table = parse_reference(item, payload, builtins, reserved, where, tables, later)
        assert table is not None
        tables.append(table)
    return _distinct_columns(tuple(tables), payload, named)


def _distinct_columns(tables: tuple[ReferenceSpec, ...], payload: Mapping[str, str],
                      named: bool) -> tuple[ReferenceSpec, ...]:  # fmt: skip
    """``tables``, once no snapshot column takes the name of a field or of a table."""
    names = [t.name for t in tables]
    for n, column in enumerate(snapshot_columns(tables, named)):
        where = f"reference[{n}]" if len(tables) > 1 else "reference"
        if column in payload:
            field = "a column of the rows the step reads" if named else "a payload field"
            raise ConfigError(f"{where}: {column} is {field}, and the column of this table's snapshot",
                              "give the table another name")  # fmt: skip
        if column in names:
            raise ConfigError(f"{where}: {column} is a table's name, and the column of this table's snapshot",
                              "give the tables other names")  # fmt: skip
    return tables


def _listed_name(item: Any) -> str | None:
    name = item.get("name") if isinstance(item, Mapping) else None
    return name.strip() if isinstance(name, str) else None


def snapshot_columns(references: Sequence[ReferenceSpec], named: bool = False) -> tuple[str, ...]:
    """The columns naming the snapshot each row joined, one per table: ``reference_snapshot``
    for a job of one table, ``reference_snapshot_<name>`` for each of several — and always
    with ``named``, as a later step's tables are (the rows it reads may carry the first)."""
    if len(references) == 1 and not named:
        return (SNAPSHOT_COLUMN,)
    return tuple(f"{SNAPSHOT_COLUMN}_{r.name}" for r in references)


def joined_columns(references: Sequence[ReferenceSpec], select: Sequence[tuple[str, str]],
                   named: bool = False) -> list[str]:  # fmt: skip
    """What a per-event row carries of its reference joins besides ``select``: each table's row
    (when nothing is selected), then each table's snapshot (``named``: a later step's)."""
    return ([] if select else [r.name for r in references]) + list(snapshot_columns(references, named))


def references_canonical(references: Sequence[ReferenceSpec]) -> list:
    """What the fingerprint hashes: one table as one table always was, several in order."""
    return references[0].canonical() if len(references) == 1 else [r.canonical() for r in references]


def references_dict(references: Sequence[ReferenceSpec]) -> dict[str, Any] | list[dict[str, Any]]:
    """``reference`` as :func:`parse_references` reads it back: a mapping for one table."""
    return references[0].to_dict() if len(references) == 1 else [r.to_dict() for r in references]


def references_describe(references: Sequence[ReferenceSpec]) -> str:
    return ", then ".join(r.describe() for r in references)


def check_snapshot_names(select: Sequence[tuple[str, str]], references: Sequence[ReferenceSpec],
                         named: bool = False) -> None:  # fmt: skip
    """A ``select`` column may not take a snapshot column's name: every row carries those."""
    for column in snapshot_columns(references, named) if references else ():
        if column in dict(select):
            raise ConfigError(
                f"select.{column}: every row carries it already (the snapshot joined)",
                f"give the column another name than {excerpt(column)}",
            )
