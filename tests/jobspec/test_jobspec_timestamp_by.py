"""``timestamp_by`` as Stream Analytics' ``TIMESTAMP BY`` takes it: a payload field or an expression
(DATEADD over epoch numbers, CASE over two fields, nested fields, casts), checked like every spec
expression — the allowlist and the limits — and hashed into the fingerprint."""

from __future__ import annotations

import copy

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec import parse_spec
from tidegate.jobspec.spec_expressions import spec_expressions
from tidegate.jobspec.timestamp_by import nested_fields, time_field

PAYLOAD = {"deviceId": "string", "epochMs": "bigint", "deviceTime": "string", "gatewayTime": "string"}
BASE = {
    "name": "epoch",
    "version": 1,
    "payload": PAYLOAD,
    "timestamp_by": "DATEADD(millisecond, epochMs, '1970-01-01T00:00:00Z')",
    "policy": {"late_arrival_tolerance": "1m"},
    "window": {"kind": "tumbling", "size": "1m"},
    "aggregates": {"n": "count(*)"},
}


def spec(timestamp_by, **changes):
    data = copy.deepcopy(BASE) | {"timestamp_by": timestamp_by} | changes
    return parse_spec(data)


def error(timestamp_by, **changes) -> str:
    with pytest.raises(ConfigError) as info:
        spec(timestamp_by, **changes)
    return str(info.value)


ACCEPTED = [
    # (timestamp_by as written, as the spec keeps it)
    ("deviceTime", "deviceTime"),  # a field, as before
    ("DATEADD(millisecond, epochMs, '1970-01-01T00:00:00Z')",) * 2,  # Stream Analytics' epoch idiom
    ("DATEADD(second, epochMs, '1970-01-01T00:00:00Z')",) * 2,
    (
        "dateadd(MILLISECOND,\n   epochMs, '1970-01-01T00:00:00Z')",
        "dateadd(MILLISECOND, epochMs, '1970-01-01T00:00:00Z')",
    ),
    ("CASE WHEN deviceTime IS NOT NULL THEN deviceTime ELSE gatewayTime END",) * 2,
    ("coalesce(deviceTime, gatewayTime)",) * 2,
    ("CAST(deviceTime AS timestamp)",) * 2,  # Stream Analytics' CAST(x AS datetime)
    ("try_cast(deviceTime AS timestamp)",) * 2,
    ("to_timestamp(deviceTime, 'yyyy-MM-dd HH:mm:ss')",) * 2,
    ("reading.time",) * 2,  # a field inside the JSON object reading
    ("CAST(reading.sensor.time AS timestamp)",) * 2,
    ("coalesce(deviceTime, arrival_time)",) * 2,  # the built-in columns too
]


@pytest.mark.parametrize(("written", "kept"), ACCEPTED, ids=[w for w, *_ in ACCEPTED])
def test_a_field_or_an_expression_is_accepted_and_round_trips(written, kept):
    s = spec(written)
    assert s.timestamp_by == kept
    assert parse_spec(s.to_dict()) == s and parse_spec(s.to_dict()).fingerprint == s.fingerprint
    assert f"event time {kept}" in s.describe()


REFUSED = [
    # (timestamp_by, what the error says: the field, what is wrong, what to do)
    ("epochMs", ["timestamp_by: payload field epochMs is bigint", "DATEADD(millisecond, epochMs"]),
    ("eventTime", ["timestamp_by: 'eventTime' is not a payload field", "or write an expression"]),
    ("DATEADD(millisecond, epochMss, '1970-01-01T00:00:00Z')", ["unknown column epochMss", "did you mean epochMs"]),
    ("reflect('java.lang.System', 'exit', 0)", ["timestamp_by: reflect() is not allowed", "calls Java methods"]),
    ("current_timestamp()", ["timestamp_by: current_timestamp reads the clock", "semantics §2"]),
    ("coalesce(deviceTime, now())", ["timestamp_by: now reads the clock"]),
    ("CASE WHEN deviceTime IS NULL THEN current_timestamp ELSE deviceTime END", ["current_timestamp reads the clock"]),
    (
        "deviceTime.time",
        [
            "reads a field inside deviceTime, which the payload declares as string",
            "get_json_object(deviceTime, '$.field')",
        ],
    ),  # fmt: skip
    ("payload.time", ["timestamp_by: payload is a column of the engine"]),
    ("(SELECT max(t) FROM events)", ["timestamp_by: subqueries are not allowed"]),
    ("concat(deviceTime, '${env:HOME}')", ["timestamp_by: '${' is not allowed"]),
    ("repeat(deviceTime, 100000)", ["timestamp_by: repeat() would build more than 10,000", "TIDEGATE_LIMIT_"]),
    ("count(*)", ["timestamp_by: count() is an aggregate"]),
    ("", ["timestamp_by is ''", "DATEADD(millisecond"]),
    (5, ["timestamp_by is 5"]),
]


@pytest.mark.parametrize(("timestamp_by", "expected"), REFUSED, ids=[str(t) for t, _ in REFUSED])
def test_a_refused_expression_is_named_with_what_is_wrong_and_what_to_do(timestamp_by, expected):
    message = error(timestamp_by)
    for part in expected:
        assert part in message


def test_the_fingerprint_hashes_the_expression_so_a_changed_one_is_a_changed_query():
    ms = spec("DATEADD(millisecond, epochMs, '1970-01-01T00:00:00Z')")
    assert spec("dateadd( MILLISECOND , epochMs,'1970-01-01T00:00:00Z')").fingerprint == ms.fingerprint  # same tokens
    assert spec("DATEADD(second, epochMs, '1970-01-01T00:00:00Z')").fingerprint != ms.fingerprint
    assert spec("DATEADD(millisecond, epochMs, '1970-01-01T00:00:01Z')").fingerprint != ms.fingerprint
    # a field is hashed by its name, as before expressions: no fingerprint of an existing job changed
    field = spec("deviceTime")
    assert field.fingerprint != ms.fingerprint and spec("deviceTime").fingerprint == field.fingerprint


def test_the_expression_is_one_the_engine_checks_again_and_tells_fields_from_nested_objects():
    s = spec("CAST(reading.time AS timestamp)")
    assert ("timestamp_by", "CAST(reading.time AS timestamp)") in [(e.where, e.text) for e in spec_expressions(s)]
    assert "timestamp_by" not in [e.where for e in spec_expressions(spec("deviceTime"))]  # a field is no expression
    assert time_field("deviceTime", PAYLOAD) == "deviceTime" and time_field(s.timestamp_by, PAYLOAD) is None
    assert nested_fields("coalesce(reading.time, reading.sensor.time, deviceTime)", PAYLOAD) == {
        "reading": (("time",), ("sensor", "time"))
    }


def test_an_input_reading_its_own_log_takes_an_expression_too():
    data = {
        "name": "pay",
        "version": 1,
        "inputs": {
            "orders": {
                "source": {"event_log": "var/event-log-orders"},
                "payload": {"orderId": "string", "orderedMs": "bigint"},
                "timestamp_by": "DATEADD(millisecond, orderedMs, '1970-01-01T00:00:00Z')",
            },
            "payments": {
                "source": {"event_log": "var/event-log-payments"},
                "payload": {"orderId": "string", "paidAt": "string"},
                "timestamp_by": "paidAt",
            },
        },
        "join": {
            "left": "orders",
            "right": "payments",
            "keys": ["orders.orderId = payments.orderId"],
            "within": "DATEDIFF(minute, orders, payments) BETWEEN 0 AND 15",
        },  # fmt: skip
        "select": {"orderId": "orders.orderId"},
    }
    s = parse_spec(data)
    assert s.inputs[0].own.timestamp_by.startswith("DATEADD") and s.inputs[1].own.timestamp_by == "paidAt"
    assert "inputs.orders.timestamp_by" in [e.where for e in spec_expressions(s)]
    data["inputs"]["orders"]["timestamp_by"] = "DATEADD(millisecond, paidMs, '1970-01-01T00:00:00Z')"
    with pytest.raises(ConfigError, match="inputs.orders.timestamp_by: unknown column paidMs"):
        parse_spec(data)
    # an input that takes the job's expression must have the fields it reads
    shared = copy.deepcopy(BASE) | {
        "window": None, "aggregates": None,
        "inputs": {"a": {"source": {"event_log": "var/a"}, "payload": {"deviceId": "string"}}, "b": {}},
        "join": {"left": "a", "right": "b", "keys": ["a.deviceId = b.deviceId"],
                 "within": "DATEDIFF(minute, a, b) BETWEEN 0 AND 1"},
        "select": {"d": "a.deviceId"},
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"inputs.a \(the job's timestamp_by\): unknown column epochMs"):
        parse_spec(shared)
