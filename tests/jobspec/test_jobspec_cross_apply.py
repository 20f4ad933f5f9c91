"""``cross_apply``: Stream Analytics' CROSS APPLY GetArrayElements / GetRecordProperties as a
spec field — what it reads, the columns it adds, its bound on rows, and every mistake named
with its fix."""

from __future__ import annotations

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec import parse_spec
from tidegate.jobspec.cross_apply import INDEX_COLUMN

PAYLOAD = {
    "deviceId": "string",
    "eventTime": "string",
    "readings": "array<struct<sensor:string,value:double>>",
    "values": "array<double>",
    "rec": "struct<a:double,b:double>",
    "mixed": "struct<a:double,b:string>",
    "tags": "map<string,string>",
}
BASE = {"name": "batched", "version": 1, "payload": PAYLOAD, "timestamp_by": "eventTime"}
WINDOWED = {
    "window": {"kind": "tumbling", "size": "1m"},
    "group_by": ["deviceId", {"sensor": "a.ArrayValue.sensor"}],
    "aggregates": {"readings": "count(*)", "total": "sum(a.ArrayValue.value)"},
}


def spec(cross_apply, **query):
    return parse_spec(BASE | {"cross_apply": cross_apply} | query)


def test_elements_add_a_column_every_later_field_reads_and_the_spec_round_trips():
    s = spec({"name": "a", "elements": "readings"}, filter="a.ArrayValue.value > 0", **WINDOWED)
    assert (s.cross_apply.kind, s.cross_apply.field, s.cross_apply.max_rows) == ("elements", "readings", 10_000)
    assert s.row_fields["a"] == "struct<ArrayIndex:bigint,ArrayValue:struct<sensor:string,value:double>>"
    assert s.row_fields[INDEX_COLUMN] == "bigint"
    assert parse_spec(s.to_dict()) == s
    assert s.describe().startswith("one row per element of readings as a (at most 10,000); tumbling 1m")


def test_properties_of_a_record_or_a_map_give_name_and_value():
    assert spec({"name": "p", "properties": "rec"}).row_fields["p"] == (
        "struct<PropertyName:string,PropertyValue:double>"
    )
    assert spec({"name": "p", "properties": "tags"}).row_fields["p"] == (
        "struct<PropertyName:string,PropertyValue:string>"
    )


def test_a_payload_type_nests_arrays_maps_and_structs_and_keeps_struct_field_case():
    s = parse_spec(
        BASE | {"payload": {"eventTime": "string", "r": "Array< Struct<Sensor: String, v: DECIMAL(10, 2)> >"}}
    )
    assert s.payload["r"] == "array<struct<Sensor:string,v:decimal(10,2)>>"


def test_the_fingerprint_changes_with_the_field_the_name_and_the_bound_not_without_cross_apply():
    plain = parse_spec(BASE | {"select": {"d": "deviceId"}})
    prints = {
        plain.fingerprint,
        spec({"name": "a", "elements": "readings"}, select={"d": "deviceId"}).fingerprint,
        spec({"name": "b", "elements": "readings"}, select={"d": "deviceId"}).fingerprint,
        spec({"name": "a", "elements": "values"}, select={"d": "deviceId"}).fingerprint,
        spec({"name": "a", "elements": "readings", "max_rows": 5}, select={"d": "deviceId"}).fingerprint,
    }
    assert len(prints) == 5


@pytest.mark.parametrize(
    ("cross_apply", "query", "problem", "fix"),
    [
        # a field the payload does not declare, with the closest one
        ({"name": "a", "elements": "reading"}, {}, "'reading' is not a payload field (did you mean readings?)",
         "declared with an array type"),
        # a record given as an array
        ({"name": "a", "elements": "rec"}, {}, "payload field rec is struct<a:double,b:double>, not an array",
         "use properties: rec"),
        # an array given as a record
        ({"name": "p", "properties": "values"}, {}, "payload field values is array<double>, not a record",
         "use elements: values"),
        # a text field is neither
        ({"name": "a", "elements": "deviceId"}, {}, "payload field deviceId is string, not an array",
         "declare it as an array"),
        ({"name": "a", "elements": "readings", "properties": "rec"}, {}, "has both elements and properties",
         "give one"),
        ({"name": "a"}, {}, "has neither elements nor properties", "give one"),
        ({"name": "a", "element": "readings"}, {}, "unknown field cross_apply.element",
         "did you mean cross_apply.elements?"),
        # the name would hide a payload field, or the engine's column
        ({"name": "deviceId", "elements": "readings"}, {}, "cross_apply.name: deviceId is a payload field",
         "its own name"),
        ({"name": "offset", "elements": "readings"}, {}, "a name the engine uses", "choose another name"),
        ({"name": INDEX_COLUMN, "elements": "readings"}, {}, "a name the engine uses", "choose another name"),
        ({"elements": "readings"}, {}, "cross_apply.name is None", "name the rows' column"),
        # a record whose values have different types has no one PropertyValue type
        ({"name": "p", "properties": "mixed"}, {}, "have different types (double, string)",
         "map<string,string>"),
        ({"name": "a", "elements": "readings", "max_rows": 20_000}, {}, "more than the platform allows (10,000",
         "TIDEGATE_LIMIT_ROWS_PER_EVENT"),
        ({"name": "a", "elements": "readings", "max_rows": 0}, {}, "cross_apply.max_rows", "whole number"),
        ({"name": "a", "elements": "readings"}, {"select": {INDEX_COLUMN: "1"}},
         f"select.{INDEX_COLUMN}: every row carries it already", "another name"),
        ({"name": "a", "elements": "readings"},
         {"analytics": {"prev": "LAG(deviceId) OVER (LIMIT DURATION(minute, 1))"}},
         "cannot be combined with analytics", "remove analytics, or cross_apply"),
        # an expression reads a column cross_apply did not name
        ({"name": "a", "elements": "readings"}, {"select": {"v": "b.ArrayValue"}}, "unknown column b",
         "use the known columns"),
    ],
)  # fmt: skip
def test_mistakes_are_named_with_their_fix(cross_apply, query, problem, fix):
    with pytest.raises(ConfigError) as err:
        spec(cross_apply, **query)
    assert problem in err.value.problem and fix in err.value.fix


def test_steps_are_refused_with_cross_apply():
    with pytest.raises(ConfigError, match="cannot be combined with steps"):
        parse_spec(BASE | {"cross_apply": {"name": "a", "elements": "readings"}, "steps": [
            {"name": "per_minute", "from": "input", **WINDOWED},
            {"name": "per_hour", "from": "per_minute", "window": {"kind": "tumbling", "size": "1h"},
             "aggregates": {"n": "sum(readings)"}},
        ]})  # fmt: skip


@pytest.mark.parametrize("generator", ["explode", "posexplode", "inline", "explode_outer"])
def test_generators_in_expressions_stay_refused_and_point_at_cross_apply(generator):
    with pytest.raises(ConfigError) as err:
        parse_spec(BASE | {"select": {"v": f"{generator}(readings)"}})
    assert "turns one event into several rows" in err.value.problem
    assert "cross_apply: {name: a, elements: <array field>}" in err.value.fix


def test_the_operator_lowers_the_bound_the_default_takes(monkeypatch):
    monkeypatch.setenv("TIDEGATE_LIMIT_ROWS_PER_EVENT", "50")
    assert spec({"name": "a", "elements": "readings"}).cross_apply.max_rows == 50
