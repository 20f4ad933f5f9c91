"""Inputs that read their own logs (docs/reference/jobspec.md, "inputs and join"): each with its own
source, payload, event time and policy, refused at deploy time with the field named when wrong."""

from __future__ import annotations

import copy

import pytest

from tidegate.errors import ConfigError
from tidegate.inputs.kafka.connections import KafkaConnection
from tidegate.inputs.log import input_location
from tidegate.inputs.log_set import LogSet
from tidegate.jobspec import parse_spec

MIN = 60_000_000
TWO_LOGS = {
    "name": "pay",
    "version": 1,
    "inputs": {
        "orders": {
            "source": {"event_log": "var/event-log-orders"},
            "timestamp_by": "eventTime",
            "payload": {"orderId": "string", "amount": "double", "eventTime": "string"},
            "policy": {"late_arrival_tolerance": "1m"},
        },
        "payments": {
            "source": {"kafka": {"topic": "payments"}},
            "timestamp_by": "paidAt",
            "time_format": "yyyy-MM-dd HH:mm:ss",
            "payload": {"orderId": "string", "paid": "double", "paidAt": "string"},
            "policy": {"late_arrival_tolerance": "10s", "out_of_order_tolerance": "5s"},
        },
    },
    "join": {
        "type": "left",
        "left": "orders",
        "right": "payments",
        "keys": ["orders.orderId = payments.orderId"],
        "within": "DATEDIFF(minute, orders, payments) BETWEEN 0 AND 15",
    },
    "select": {"orderId": "orders.orderId", "amount": "orders.amount", "paid": "payments.paid"},
}


def changed(edit) -> dict:
    spec = copy.deepcopy(TWO_LOGS)
    edit(spec)
    return spec


def test_each_input_has_its_own_log_payload_event_time_and_policy():
    spec = parse_spec(TWO_LOGS)
    orders, payments = spec.inputs
    assert spec.own_logs
    assert orders.own.source.event_log == "var/event-log-orders" and payments.own.source.kafka.topic == "payments"
    assert payments.own.timestamp_by == "paidAt" and payments.own.time_format == "yyyy-MM-dd HH:mm:ss"
    assert [p.late_arrival_tolerance_us for p in spec.policies] == [MIN, 10_000_000]
    # the job's columns: every input's fields, in order
    assert list(spec.payload) == ["orderId", "amount", "eventTime", "paid", "paidAt"]
    # look-back: the bound + the largest late tolerance of the inputs + the 5-minute early window
    assert spec.lookback_us == 15 * MIN + MIN + 5 * MIN
    assert "orders: event time eventTime" in spec.describe() and "payments: event time paidAt" in spec.describe()


def test_the_normalised_form_reads_back_and_the_fingerprint_follows_each_inputs_timing():
    spec = parse_spec(TWO_LOGS)
    assert parse_spec(spec.to_dict()) == spec
    other_policy = parse_spec(changed(lambda s: s["inputs"]["payments"]["policy"].update(late_arrival_tolerance="20s")))
    other_log = parse_spec(changed(lambda s: s["inputs"]["orders"]["source"].update(event_log="elsewhere")))
    assert other_policy.fingerprint != spec.fingerprint
    assert other_log.fingerprint == spec.fingerprint  # like the job's source: where, not what


def test_an_input_without_its_own_fields_takes_the_jobs():
    spec = parse_spec(
        {
            "name": "pay",
            "version": 1,
            "payload": {"orderId": "string", "eventTime": "string"},
            "timestamp_by": "eventTime",
            "policy": {"late_arrival_tolerance": "2m"},
            "inputs": {"orders": {"source": {"event_log": "a"}}, "payments": {"source": {"event_log": "b"}}},
            "join": TWO_LOGS["join"],
            "select": {"orderId": "orders.orderId"},
        }
    )
    assert all(
        i.own.timestamp_by == "eventTime" and i.own.policy.late_arrival_tolerance_us == 2 * MIN for i in spec.inputs
    )


def test_the_job_reads_each_inputs_log(tmp_path):
    default = {"default": KafkaConnection("default", "localhost:9092")}
    where = input_location(parse_spec(TWO_LOGS), tmp_path / "event-log", default)
    assert isinstance(where, LogSet) and where.names == ("orders", "payments")
    assert where.parts[0][1].name == "event-log-orders" and where.parts[1][1].topic == "payments"
    assert where.parts[1][1].bootstrap_servers == "localhost:9092" and where.parts[1][1].connection == "default"


@pytest.mark.parametrize(
    "edit, field, message",
    [
        (lambda s: s["select"].update(paid="payments.amount"), "select.paid", "not a column of input payments"),
        (lambda s: s["join"].update(keys=["orders.orderId = payments.paid"]), "join.keys[0]", "is a string but"),
        (
            lambda s: s["inputs"]["payments"]["payload"].update(orderId="bigint"),
            "inputs.payments.payload.orderId",
            "is bigint but inputs.orders.payload.orderId is string",
        ),
        (lambda s: s["inputs"]["payments"].pop("payload"), "inputs.payments.payload", "is missing"),
        (
            lambda s: s["inputs"]["payments"]["policy"].update(late_arrival_tolerance="30d"),
            "inputs.payments.policy.late_arrival_tolerance",
            "is 30d",
        ),
        (
            lambda s: s["inputs"]["payments"].update(source={"event_log": "a", "kafka": {"topic": "t"}}),
            "inputs.payments.source",
            "both event_log and kafka",
        ),
        (
            lambda s: s["inputs"]["payments"].update(source={"kafka": {}}),
            "inputs.payments.source.kafka.topic",
            "missing",
        ),
        (
            lambda s: s["inputs"]["payments"].update(timestamp_by="nope"),
            "inputs.payments.timestamp_by",
            "not a payload field",
        ),
        (
            lambda s: s["inputs"]["payments"].update(time_format="yyyy-MM-dd Y"),
            "inputs.payments.time_format",
            "not a Spark datetime pattern",
        ),
        (lambda s: s.update(timestamp_by="eventTime"), "timestamp_by", "the job has no payload"),
        (lambda s: s["inputs"]["orders"].update(filter="paid > 0"), "inputs.orders.filter", "unknown column paid"),
    ],
    ids=lambda v: v if isinstance(v, str) and ("." in v or v == "timestamp_by") else None,
)
def test_a_bad_input_is_refused_at_deploy_time_naming_the_field(edit, field, message):
    with pytest.raises(ConfigError) as err:
        parse_spec(changed(edit))
    assert field in err.value.problem and message in err.value.problem, err.value.problem
    assert err.value.fix
