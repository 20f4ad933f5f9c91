"""The ``reference`` section: enrich each event from a table that is not a stream, read without Spark.

Stream Analytics' reference data join: a table kept as **snapshots**, each valid from its
time until the next one's, and each event joined with the snapshot its time falls in
(:mod:`tidegate.eventtime.reference`)::

    reference:
      name: devices                                # expressions read devices.<column>
      path: jobs/samples/device_sites              # holds valid_from=<time>/ folders, one per snapshot
      format: csv                                  # csv (with a header row) or parquet
      columns: {deviceId: string, site: string, max_temperature: double}
      keys: [deviceId = devices.deviceId]          # event expression = reference column, at least one
      type: left                                   # inner (the default) or left (left outer)

The join is an inner join unless ``type: left``, as ``JOIN`` and ``LEFT OUTER JOIN`` are in
Stream Analytics: an event no row of its snapshot matches (or that no snapshot covers) is
dropped, or kept with ``devices`` NULL. Every output row carries ``reference_snapshot``, the
valid-from time of the snapshot its event was joined with (NULL when none covers it).

Paths: relative to the working directory, as every path of a spec (decision 0009); where the
folder, its snapshot folders and their files may lead — inside the reference folders, symlinks
followed — is checked when the spec is loaded and again as the job reads them
(:mod:`tidegate.jobspec.folders`). ``path`` may be an S3 prefix, ``s3a://bucket/prefix``, under
an S3 prefix among the reference folders (:mod:`tidegate.inputs.reference_s3`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tidegate.errors import PATH_CHARS, ConfigError, excerpt
from tidegate.jobspec.expressions import canonical_expression, check_expression, token_spans
from tidegate.jobspec.fields import added_column_name, check_fields, columns, mapping, optional_text
from tidegate.jobspec.joins import equality_sides
from tidegate.jobspec.parse_events import payload_fields
from tidegate.jobspec.reference_prefix import S3_REFERENCE, s3_reference_root

REFERENCE_FIELDS = ("name", "path", "format", "columns", "keys", "type")
FORMATS = ("csv", "parquet")
SNAPSHOT_COLUMN = "reference_snapshot"  # every output row: the valid-from time of the snapshot joined
_TYPES = {"inner": "inner", "left": "left", "left_outer": "left", "left outer": "left"}


@dataclass(frozen=True)
class ReferenceSpec:
    """A reference table: where its snapshots are, what is read of them, how events match."""

    name: str
    path: str
    format: str
    columns: dict[str, str]  # column → Spark SQL type, in order
    keys: tuple[tuple[str, str], ...]  # (event expression, reference column)
    kind: str = "inner"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "format": self.format, "columns": dict(self.columns),
                "keys": [f"{e} = {self.name}.{c}" for e, c in self.keys], "type": self.kind}  # fmt: skip

    def canonical(self) -> list:
        """What the fingerprint hashes: all of it changes which rows an event joins."""
        return [self.name, self.path, self.format, list(self.columns.items()), self.kind,
                [[canonical_expression(e), c] for e, c in self.keys]]  # fmt: skip

    def describe(self) -> str:
        on = " and ".join(f"{e} = {self.name}.{c}" for e, c in self.keys)
        kind = "left outer join" if self.kind == "left" else "join"
        return f"{kind} reference {self.name} ({self.format} snapshots in {self.path}) on {on}"


def parse_reference(value: Any, payload: Mapping[str, str], builtins: Iterable[str],
                    reserved: frozenset[str]) -> ReferenceSpec | None:  # fmt: skip
    if value is None:
        return None
    section = mapping(value, "reference")
    check_fields(section, REFERENCE_FIELDS, "reference")
    for required in ("name", "path", "columns", "keys"):
        if section.get(required) is None:
            raise ConfigError(f"reference.{required} is missing",
                              "write reference: {name: devices, path: <folder of valid_from=<time>/ snapshots>, "
                              "format: csv, columns: {deviceId: string, site: string}, "
                              "keys: [deviceId = devices.deviceId]}")  # fmt: skip
    name = optional_text(section["name"], "reference.name")
    if name is None:  # given, but blank
        raise ConfigError("reference.name is empty", "name the reference, e.g. name: devices")
    added_column_name(name, "reference.name", reserved | {SNAPSHOT_COLUMN}, payload, "reference", "_ref")
    fmt = (optional_text(section.get("format"), "reference.format") or "csv").lower()
    if fmt not in FORMATS:
        raise ConfigError(f"reference.format is {excerpt(fmt)}", "use csv (files with a header row) or parquet")
    kind_text = optional_text(section.get("type"), "reference.type") or "inner"
    kind = _TYPES.get(kind_text.lower())
    if kind is None:
        raise ConfigError(
            f"reference.type is {excerpt(kind_text)}",
            "use inner (the default: events without a match are dropped) or left (kept, with NULLs)",
        )
    table = payload_fields(section["columns"], "reference.columns")
    keys = _keys(section["keys"], name, table, columns(payload, builtins))
    return ReferenceSpec(name, _path(section["path"]), fmt, table, keys, kind)


def _path(value: Any) -> str:
    text = optional_text(value, "reference.path")
    fix = ("name a folder under the reference folders (TIDEGATE_REFERENCE_DIRS), e.g. var/reference/devices, "
           "or an S3 prefix under one of them, e.g. s3a://bucket/reference/devices")  # fmt: skip
    if text is None or not text.strip():
        raise ConfigError("reference.path is empty", fix)
    if any(ord(c) < 32 for c in text):
        raise ConfigError("reference.path holds control characters", fix)
    if text.strip().lower().startswith(S3_REFERENCE):
        return str(s3_reference_root(text))  # normalised; where it may lie is checked when the spec is loaded
    if "://" in text or text.split("/", 1)[0].endswith(":"):
        raise ConfigError(
            f"reference.path {excerpt(text, PATH_CHARS)} is a URI: reference snapshots are read from local folders "
            "and S3 prefixes (s3a://) only",
            fix,
        )
    if ".." in text.replace("\\", "/").split("/"):
        raise ConfigError(f"reference.path {excerpt(text, PATH_CHARS)} contains '..'", fix)
    return text.strip()


def _keys(value: Any, name: str, table: Mapping[str, str], known: list[str]) -> tuple[tuple[str, str], ...]:
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else None
    first = next(iter(table))
    if not items:
        raise ConfigError(
            f"reference.keys is {excerpt(value)}: a reference join needs at least one equality key",
            f"write keys: [<event field> = {name}.{first}]",
        )
    out = []
    for n, item in enumerate(items):
        where = f"reference.keys[{n}]"
        text, *sides = equality_sides(item, where, f"deviceId = {name}.{first}")
        column = [_reference_column(s, name) for s in sides]
        if column[0] is not None and column[1] is None:
            sides, column = sides[::-1], column[::-1]
        if column[1] is None or column[0] is not None:
            raise ConfigError(
                f"{where}: {excerpt(text)} must compare an event expression with a column of {name}",
                f"write <event expression> = {name}.<column>, e.g. deviceId = {name}.{first}",
            )
        if column[1] not in table:
            raise ConfigError(
                f"{where}: {name}.{column[1]} is not one of reference.columns",
                f"use one of {', '.join(table)}, or add it to reference.columns",
            )
        check_expression(sides[0], where, known)
        out.append((sides[0], column[1]))
    return tuple(out)


def _reference_column(expr: str, name: str) -> str | None:
    """``<name>.<column>`` → column; None for any other expression."""
    toks = token_spans(expr)
    if len(toks) == 3 and toks[0][1] == name and toks[1][1] == ".":
        return toks[2][1].strip("`")
    return None


def check_reference_shape(top: Mapping[str, Any]) -> None:
    """What a job with reference data cannot have yet, each with the field named: the
    reference join enriches events of a per-event step."""
    for key in ("window", "group_by", "aggregates", "analytics", "join", "inputs"):
        if top.get(key) is not None:
            fix = (
                "enrich each event in the first step and window its rows in a step that reads it (steps:)"
                if key in ("window", "group_by", "aggregates")
                else f"remove {key}, or reference"
            )
            raise ConfigError(
                f"{key} cannot be used with reference in one step: the reference join enriches "
                "each event of a per-event step",
                fix,
            )


def check_reference_columns(expr: str | None, where: str, reference: ReferenceSpec | None) -> None:
    """An expression's ``<name>.<field>`` must name one of the reference's columns (the
    expression check lets any struct field through)."""
    if expr is None or reference is None:
        return
    toks = token_spans(expr)
    for i, t in enumerate(toks):
        if t[0] == "word" and t[1] == reference.name and i + 2 < len(toks) and toks[i + 1][1] == ".":
            field = toks[i + 2][1].strip("`")
            if field not in reference.columns:
                raise ConfigError(
                    f"{where}: {reference.name}.{field} is not one of reference.columns",
                    f"use one of {', '.join(reference.columns)}, or add it to reference.columns",
                )
