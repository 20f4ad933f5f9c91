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

A job may join several tables, listed under ``reference`` and joined in order
(:mod:`tidegate.jobspec.references`): each is parsed here, at ``reference[i]``, its keys reading
the event and the tables before it.

Paths: relative to the working directory, as every path of a spec (decision 0009); where the
folder, its snapshot folders and their files may lead — inside the reference folders, symlinks
followed — is checked when the spec is loaded and again as the job reads them
(:mod:`tidegate.jobspec.folders`). ``path`` may be an S3 prefix, ``s3a://bucket/prefix``, under
an S3 prefix among the reference folders (:mod:`tidegate.inputs.reference_s3`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
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


def parse_reference(value: Any, payload: Mapping[str, str], builtins: Iterable[str], reserved: frozenset[str],
                    where: str = "reference", earlier: Sequence[ReferenceSpec] = (),
                    later: Collection[str] = ()) -> ReferenceSpec | None:  # fmt: skip
    """One table, the mapping at ``where`` (``reference``, or ``reference[i]`` of a list). Its keys
    read the event's fields and the columns of the ``earlier`` tables (joined before it), never a
    table of ``later`` (the names of those joined after it)."""
    if value is None:
        return None
    section = mapping(value, where)
    check_fields(section, REFERENCE_FIELDS, where)
    for required in ("name", "path", "columns", "keys"):
        if section.get(required) is None:
            raise ConfigError(f"{where}.{required} is missing",
                              "write reference: {name: devices, path: <folder of valid_from=<time>/ snapshots>, "
                              "format: csv, columns: {deviceId: string, site: string}, "
                              "keys: [deviceId = devices.deviceId]}")  # fmt: skip
    name = optional_text(section["name"], f"{where}.name")
    if name is None:  # given, but blank
        raise ConfigError(f"{where}.name is empty", "name the reference, e.g. name: devices")
    added_column_name(name, f"{where}.name", reserved | {SNAPSHOT_COLUMN}, payload, "reference", "_ref")
    fmt = (optional_text(section.get("format"), f"{where}.format") or "csv").lower()
    if fmt not in FORMATS:
        raise ConfigError(f"{where}.format is {excerpt(fmt)}", "use csv (files with a header row) or parquet")
    kind_text = optional_text(section.get("type"), f"{where}.type") or "inner"
    kind = _TYPES.get(kind_text.lower())
    if kind is None:
        raise ConfigError(
            f"{where}.type is {excerpt(kind_text)}",
            "use inner (the default: events without a match are dropped) or left (kept, with NULLs)",
        )
    table = payload_fields(section["columns"], f"{where}.columns")
    known = columns(payload, builtins, [r.name for r in earlier])
    keys = _keys(section["keys"], name, table, known, where, earlier, later)
    return ReferenceSpec(name, _path(section["path"], where), fmt, table, keys, kind)


def _path(value: Any, where: str) -> str:
    text = optional_text(value, f"{where}.path")
    fix = ("name a folder under the reference folders (TIDEGATE_REFERENCE_DIRS), e.g. var/reference/devices, "
           "or an S3 prefix under one of them, e.g. s3a://bucket/reference/devices")  # fmt: skip
    if text is None or not text.strip():
        raise ConfigError(f"{where}.path is empty", fix)
    if any(ord(c) < 32 for c in text):
        raise ConfigError(f"{where}.path holds control characters", fix)
    if text.strip().lower().startswith(S3_REFERENCE):
        # normalised; where it may lie is checked when the spec is loaded
        return str(s3_reference_root(text, f"{where}.path"))
    if "://" in text or text.split("/", 1)[0].endswith(":"):
        raise ConfigError(
            f"{where}.path {excerpt(text, PATH_CHARS)} is a URI: reference snapshots are read from local folders "
            "and S3 prefixes (s3a://) only",
            fix,
        )
    if ".." in text.replace("\\", "/").split("/"):
        raise ConfigError(f"{where}.path {excerpt(text, PATH_CHARS)} contains '..'", fix)
    return text.strip()


def _keys(value: Any, name: str, table: Mapping[str, str], known: list[str], where: str,
          earlier: Sequence[ReferenceSpec], later: Collection[str]) -> tuple[tuple[str, str], ...]:  # fmt: skip
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else None
    first = next(iter(table))
    if not items:
        raise ConfigError(
            f"{where}.keys is {excerpt(value)}: a reference join needs at least one equality key",
            f"write keys: [<event field> = {name}.{first}]",
        )
    out = []
    for n, item in enumerate(items):
        at = f"{where}.keys[{n}]"
        text, *sides = equality_sides(item, at, f"deviceId = {name}.{first}")
        column = [_reference_column(s, name) for s in sides]
        if column[0] is not None and column[1] is None:
            sides, column = sides[::-1], column[::-1]
        if column[1] is None or column[0] is not None:
            raise ConfigError(
                f"{at}: {excerpt(text)} must compare an event expression with a column of {name}",
                f"write <event expression> = {name}.<column>, e.g. deviceId = {name}.{first}",
            )
        if column[1] not in table:
            raise ConfigError(
                f"{at}: {name}.{column[1]} is not one of {where}.columns",
                f"use one of {', '.join(table)}, or add it to {where}.columns",
            )
        for table_name, field in _table_columns(sides[0]):
            if table_name in later:
                raise ConfigError(
                    f"{at}: reference {name} is keyed by {table_name}.{field}, a column of {table_name}, "
                    f"which is joined after {name}",
                    f"list {table_name} before {name} under reference (tables are joined in the order listed), "
                    f"or key {name} by the event's fields and the tables listed before it",
                )
        check_expression(sides[0], at, known)
        check_reference_columns(sides[0], at, earlier, len(earlier) + 1 + len(later))
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
            fix = {
                "analytics": "compute the analytic columns in the first step and join the reference in a later"
                " per-event step that reads it (steps: …, reference:); Stream Analytics evaluates LAG, LAST and"
                " ISFIRST before the JOIN, so the result is the same",
                "join": "join the inputs in the first step and the reference in a later per-event step that reads"
                " it (steps: …, reference:)",
                "inputs": "join the inputs in the first step and the reference in a later per-event step that"
                " reads it (steps: …, reference:)",
            }.get(key, "enrich each event in the first step and window its rows in a step that reads it (steps:)")
            raise ConfigError(
                f"{key} cannot be used with reference in one step: the reference join enriches "
                "each event of a per-event step",
                fix,
            )


def check_step_reference_shape(step: Mapping[str, Any]) -> None:
    """A later step that joins reference tables is per event and has no analytic functions.
    Each refused form has an exact two-step equivalent, in Stream Analytics' own order: a
    window aggregates the rows after the join (GROUP BY after JOIN), and analytic functions
    see the rows before it (LAG is evaluated before JOIN)."""
    if step.get("window") is not None:
        raise ConfigError(
            "window cannot be used with reference in one step: the reference join enriches each row it reads",
            "join the reference in one step and window its rows in a step that reads it (from: <that step>)",
        )
    if step.get("analytics") is not None:
        raise ConfigError(
            "analytics cannot be used with reference in one step",
            "compute the analytic columns in one step and join the reference in a step that reads it: "
            "Stream Analytics evaluates LAG, LAST and ISFIRST before the JOIN, so the result is the same",
        )


def check_reference_columns(expr: str | None, where: str, references: Sequence[ReferenceSpec],
                            count: int | None = None) -> None:  # fmt: skip
    """An expression's ``<name>.<field>`` must name one of that reference's columns (the
    expression check lets any struct field through). ``count``: how many tables the job has,
    when ``references`` are only the first of them."""
    if expr is None:
        return
    tables = {r.name: (n, r) for n, r in enumerate(references)}
    for table_name, field in _table_columns(expr):
        n, reference = tables.get(table_name, (0, None))
        if reference is not None and field not in reference.columns:
            section = reference_where(n, len(references) if count is None else count)
            raise ConfigError(
                f"{where}: {reference.name}.{field} is not one of {section}.columns",
                f"use one of {', '.join(reference.columns)}, or add it to {section}.columns",
            )


def reference_where(n: int, count: int) -> str:
    """How errors name table ``n`` of a job's ``count`` tables: ``reference``, or ``reference[n]`` of a list."""
    return "reference" if count == 1 else f"reference[{n}]"


def _table_columns(expr: str) -> list[tuple[str, str]]:
    """Every ``<word>.<field>`` an expression reads, as (word, field)."""
    toks = token_spans(expr)
    return [(t[1], toks[i + 2][1].strip("`")) for i, t in enumerate(toks)
            if t[0] == "word" and i + 2 < len(toks) and toks[i + 1][1] == "."]  # fmt: skip
