"""``cross_apply``: one event to many rows, Stream Analytics' ``CROSS APPLY``.

* ``cross_apply: {name: a, elements: readings}`` — ``GetArrayElements(readings) AS a``: one
  row per element of the array field ``readings``, with ``a.ArrayIndex`` (0-based) and
  ``a.ArrayValue`` (the element; ``a.ArrayValue.value`` for an array of records);
* ``cross_apply: {name: p, properties: rec}`` — ``GetRecordProperties(rec) AS p``: one row per
  property of the record (a ``struct`` or ``map<string,T>`` field), with ``p.PropertyName`` and
  ``p.PropertyValue``.

An empty or NULL array or record gives no row. The rows are made after the policy has judged
the event (semantics §2: the policy judges events, not rows); each keeps its event's time,
partition and offset, and :data:`INDEX_COLUMN` (its position in the array or record) makes
``(partition, offset, index)`` its identity. Every later field — filter, select, window,
group_by, aggregates — reads the new column. An event with more than ``max_rows`` elements
goes to quarantine (:data:`TOO_MANY_ROWS`), never cut short: ``max_rows`` is the spec's, at
most the platform's ``TIDEGATE_LIMIT_ROWS_PER_EVENT`` (:mod:`tidegate.jobspec.limits`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidegate.errors import ConfigError, excerpt
from tidegate.jobspec.fields import ENGINE_COLUMNS, added_column_name, check_fields, mapping
from tidegate.jobspec.hints import did_you_mean
from tidegate.jobspec.limits import SpecLimits, limit_fix
from tidegate.jobspec.nested_types import struct_fields
from tidegate.jobspec.numbers import whole_number

ELEMENTS, PROPERTIES = "elements", "properties"  # GetArrayElements, GetRecordProperties
INDEX_COLUMN = "cross_apply_index"  # a row's position in its event's array or record: with partition, offset its id
TOO_MANY_ROWS = "too_many_rows"  # the quarantine reason of an event over max_rows
STEPS_REFUSED = (
    "cross_apply cannot be combined with steps: a later step reads rows keyed by their event",
    "remove steps, or cross_apply (and split the work into two jobs)",
)
_FIELDS = ("name", ELEMENTS, PROPERTIES, "max_rows")
# the query sections cross_apply cannot yet be combined with, and why
_NOT_WITH = {
    "join": "a join pairs events",
    "inputs": "inputs are a join's",
    "analytics": "LAG, LAST and ISFIRST look back over events",
    "reference": "reference data joins events",
}


@dataclass(frozen=True)
class CrossApplySpec:
    """Which field turns into rows, how (``kind``: :data:`ELEMENTS` or :data:`PROPERTIES`), the
    name the rows' column takes, and the most rows one event may give."""

    name: str
    field: str
    kind: str
    column_type: str  # the Spark type of the rows' column, a struct (its two fields as Stream Analytics names them)
    max_rows: int

    def canonical(self) -> list[Any]:
        """What the fingerprint hashes: the kind, field and bound (the bound decides which events
        are quarantined), and the name (expressions read it)."""
        return [self.kind, self.field, self.name, self.max_rows]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, self.kind: self.field, "max_rows": self.max_rows}

    def describe(self) -> str:
        what = "element" if self.kind == ELEMENTS else "property"
        return f"one row per {what} of {self.field} as {self.name} (at most {self.max_rows:,})"


def parse_cross_apply(value: Any, top: Mapping[str, Any], payload: Mapping[str, str], limits: SpecLimits):
    """``cross_apply`` of the spec's top level ``top`` over ``payload``; None when absent."""
    if value is None:
        return None
    section = mapping(value, "cross_apply")
    check_fields(section, _FIELDS, "cross_apply")
    for other, why in _NOT_WITH.items():
        if top.get(other) is not None:
            raise ConfigError(f"cross_apply cannot be combined with {other}: {why}, not the rows of one",
                              f"remove {other}, or cross_apply (and split the work into two jobs)")  # fmt: skip
    kinds = [k for k in (ELEMENTS, PROPERTIES) if section.get(k) is not None]
    if len(kinds) != 1:
        raise ConfigError(
            "cross_apply has both elements and properties"
            if kinds
            else "cross_apply has neither elements nor properties",
            "give one: elements: <array field> (GetArrayElements) or properties: <record field> (GetRecordProperties)",
        )
    kind = kinds[0]
    where = f"cross_apply.{kind}"
    field = section[kind]
    if not isinstance(field, str) or field not in payload:
        raise ConfigError(f"{where}: {excerpt(field)} is not a payload field" + did_you_mean(str(field), payload),
                          f"name a payload field declared with an {'array' if kind == ELEMENTS else 'struct or map'}"
                          " type, e.g. readings: array<double>")  # fmt: skip
    name = section.get("name")
    if not isinstance(name, str):
        raise ConfigError(f"cross_apply.name is {excerpt(name)}", "name the rows' column, e.g. name: a")
    added_column_name(
        name, "cross_apply.name", ENGINE_COLUMNS | {INDEX_COLUMN}, payload, "cross-applied column", "_row"
    )
    max_rows = limits.rows_per_event
    if section.get("max_rows") is not None:
        max_rows = whole_number(section["max_rows"], "cross_apply.max_rows", 1, 10**15, "rows one event may give")
        if max_rows > limits.rows_per_event:
            raise ConfigError(f"cross_apply.max_rows is {max_rows:,}, more than the platform allows"
                              f" ({limits.rows_per_event:,} rows per event)",
                              "write a smaller bound, or leave it out for the platform's; "
                              + limit_fix("rows_per_event"))  # fmt: skip
    return CrossApplySpec(name, field, kind, _column_type(kind, field, payload[field], where), max_rows)


def _column_type(kind: str, field: str, typ: str, where: str) -> str:
    """The struct each row's column holds: (ArrayIndex, ArrayValue) or (PropertyName, PropertyValue)."""
    if kind == ELEMENTS:
        if not typ.startswith("array<"):
            raise ConfigError(f"{where}: payload field {field} is {typ}, not an array",
                              f"declare it as an array (e.g. {field}: array<double>), or use properties: {field}"
                              " for the fields of a record")  # fmt: skip
        return f"struct<ArrayIndex:bigint,ArrayValue:{typ[6:-1]}>"
    if typ.startswith("map<string,"):
        return f"struct<PropertyName:string,PropertyValue:{typ[11:-1]}>"
    if typ.startswith("struct<"):
        kinds = {t for _, t in struct_fields(typ)}
        if len(kinds) > 1:
            raise ConfigError(f"{where}: the fields of {field} have different types ({', '.join(sorted(kinds))}),"
                              " and every PropertyValue has one",
                              f"declare {field} as map<string,string> to read every value as text")  # fmt: skip
        return f"struct<PropertyName:string,PropertyValue:{kinds.pop()}>"
    raise ConfigError(f"{where}: payload field {field} is {typ}, not a record",
                      f"declare it as struct<name:type,…> or map<string,T>, or use elements: {field}"
                      " for an array")  # fmt: skip


def check_select_names(select: tuple[tuple[str, str], ...], cross_apply: CrossApplySpec | None) -> None:
    """A per-event row carries :data:`INDEX_COLUMN` beside the selected columns: none takes its name."""
    if cross_apply is not None and INDEX_COLUMN in dict(select):
        raise ConfigError(f"select.{INDEX_COLUMN}: every row carries it already (its place in its event's"
                          f" {cross_apply.field})", "give the column another name")  # fmt: skip


def row_fields(payload: Mapping[str, str], cross_apply: CrossApplySpec | None) -> dict[str, str]:
    """What a row of the query has besides the engine's columns: the payload fields, and with
    ``cross_apply`` its column and :data:`INDEX_COLUMN`."""
    if cross_apply is None:
        return dict(payload)
    return {**payload, cross_apply.name: cross_apply.column_type, INDEX_COLUMN: "bigint"}
