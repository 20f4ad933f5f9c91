"""The built-in column ``headers`` (a Kafka record's headers, ``map<string,string>``): what a
spec may write with it, that it is the engine's name, and which specs read it — only theirs
decode the records' headers."""

from __future__ import annotations

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec import BUILTIN_COLUMNS, ENGINE_COLUMNS, parse_spec
from tidegate.jobspec.expressions import reads_column
from tidegate.jobspec.spec_expressions import reads_headers

BASE = {"name": "tenants", "version": 1, "payload": {"deviceId": "string", "temperature": "double"}}
WINDOW = {"window": {"kind": "tumbling", "size": "1m"}, "aggregates": {"n": "count(*)"}}


@pytest.mark.parametrize(
    "fields",
    [
        {"filter": "headers['trace-id'] IS NOT NULL"},  # a map subscript
        {"filter": "element_at(headers, 'tenant') = 'acme' AND size(headers) > 0"},
        {"filter": "map_contains_key(headers, 'tenant')", "select": {"tenant": "headers['tenant']"}},
        {"timestamp_by": "CAST(headers['sent-at'] AS timestamp)"},
        {"group_by": {"tenant": "headers['tenant']"}} | WINDOW,
        {"analytics": {"previous": "LAG(temperature) OVER (PARTITION BY headers['tenant'] LIMIT DURATION(minute, 5))"}},
    ],
)
def test_expressions_read_headers_by_subscript_or_element_at_and_the_spec_says_it_reads_them(fields):
    spec = parse_spec(BASE | fields)
    assert reads_headers(spec)


def test_a_spec_that_never_names_headers_does_not_read_them():
    assert not reads_headers(parse_spec(BASE | {"filter": "temperature > 30 AND key = 'headers'"}))
    assert not reads_headers(parse_spec(BASE | {"filter": "size(transform(array(1), headers -> headers)) > 0"}))
    assert "headers" in BUILTIN_COLUMNS and "headers" in ENGINE_COLUMNS


@pytest.mark.parametrize(
    ("expr", "reads"),
    [
        ("headers['a'] = 'b'", True),
        ("`headers`['a'] = 'b'", True),
        ("HEADERS['a'] = 'b'", True),  # columns match case-insensitively, as in Spark
        ("rec.headers = 'b'", False),  # a struct field of that name
        ("'headers' = key", False),  # text
        ("x AS headers", False),
    ],
)
def test_which_expressions_read_the_column(expr, reads):
    assert reads_column(expr, "headers") is reads


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"payload": {"headers": "string"}}, "payload.headers: 'headers' is a name the engine uses"),
        (WINDOW | {"aggregates": {"n": "count(headers['x'])"}}, "aggregates.n: unknown column headers"),
        ({"filter": "length(repeat(headers['x'], 100000)) > 0"}, "repeat() would build more than 10,000"),
    ],
)
def test_headers_is_the_engines_name_aggregates_cannot_read_it_and_cost_bounds_hold(fields, words):
    with pytest.raises(ConfigError) as refused:
        parse_spec(BASE | fields)
    assert words in str(refused.value)
