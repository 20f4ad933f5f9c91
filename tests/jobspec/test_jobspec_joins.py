"""The ``inputs`` and ``join`` sections: what they read, what they refuse at deploy time
(with the field), and what follows from them — look-back, fingerprint, the normalised form."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec import load_spec, parse_spec

JOBS = Path(__file__).resolve().parents[2] / "jobs"
MIN = 60_000_000
BASE = {
    "name": "pay",
    "version": 1,
    "payload": {"kind": "string", "orderId": "string", "ref": "bigint", "amount": "double", "eventTime": "string"},
    "timestamp_by": "eventTime",
    "policy": {"late_arrival_tolerance": "1m"},
    "inputs": {"orders": {"filter": "kind = 'order'"}, "payments": {"filter": "kind = 'payment'"}},
    "select": {"id": "orders.orderId", "paid": "payments.amount"},
}
JOIN = {
    "left": "orders",
    "right": "payments",
    "keys": ["orders.orderId = payments.orderId"],
    "within": "DATEDIFF(minute, orders, payments) BETWEEN 0 AND 15",
}


def spec(join=None, **more):
    return parse_spec(BASE | {"join": JOIN | (join or {})} | more)


def test_the_example_joins_orders_with_payments_within_15_minutes_and_reads_back_that_far():
    job = load_spec(JOBS / "order_payments.yaml")
    assert [(i.name, i.filter) for i in job.inputs] == [("orders", "kind = 'order'"), ("payments", "kind = 'payment'")]
    j = job.join
    assert (j.left, j.right, j.keys, j.join.kind) == (
        "orders",
        "payments",
        (("orders.orderId", "payments.orderId"),),
        "left",
    )
    assert (j.join.lo_us, j.join.hi_us) == (0, 15 * MIN)
    assert job.needs_lookback and job.lookback_us == (15 + 1 + 5) * MIN  # bound + late + early


def test_the_normalised_form_reads_back_to_the_same_spec_and_the_fingerprint_follows_the_logic():
    job = spec({"type": "left_outer"})
    assert parse_spec(job.to_dict()) == job
    assert job.fingerprint != spec().fingerprint  # inner vs left outer
    assert spec({"within": "DATEDIFF(mi, orders, payments) BETWEEN 0 AND 16"}).fingerprint != spec().fingerprint
    assert spec({"within": "datediff(second, orders, payments) between 0 and 900"}).fingerprint == spec().fingerprint
    renamed = parse_spec(BASE | {"join": JOIN, "name": "other", "version": 7})
    assert renamed.fingerprint == spec().fingerprint


def test_the_bound_written_right_to_left_is_turned_around_and_keys_may_be_written_either_way():
    s = spec(
        {
            "within": "DATEDIFF(minute, payments, orders) BETWEEN -15 AND 5",
            "keys": ["payments.orderId = orders.orderId"],
        }
    )
    assert (s.join.join.lo_us, s.join.join.hi_us) == (-5 * MIN, 15 * MIN)
    assert s.join.keys == (("orders.orderId", "payments.orderId"),)
    assert s.span_us == 20 * MIN  # max(hi, 0) − min(lo, 0)


@pytest.mark.parametrize(
    "change, field, message",
    [
        # a join without a time bound would hold both inputs forever
        ({"join": {k: v for k, v in JOIN.items() if k != "within"}}, "join.within", "join.within is missing"),
        # keys of types that never compare equal
        (
            {"join": JOIN | {"keys": ["orders.orderId = payments.ref"]}},
            "join.keys[0]",
            "orders.orderId is a string but payments.ref is a number",
        ),
        ({"join": JOIN | {"keys": []}}, "join.keys", "at least one equality key"),
        (
            {"join": JOIN | {"keys": ["orders.orderId = orders.ref"]}},
            "join.keys[0]",
            "must compare a orders expression",
        ),
        ({"join": JOIN | {"keys": ["orders.nope = payments.orderId"]}}, "join.keys[0]", "orders.nope is not a column"),
        (
            {"join": JOIN | {"within": "DATEDIFF(minute, orders, payments) BETWEEN 15 AND 0"}},
            "join.within",
            "low end is above its high end",
        ),
        (
            {"join": JOIN | {"within": "DATEDIFF(day, orders, payments) BETWEEN 0 AND 8"}},
            "join.within",
            "longer than the 7-day maximum",
        ),
        (
            {"join": JOIN | {"within": "DATEDIFF(fortnight, orders, payments) BETWEEN 0 AND 1"}},
            "join.within",
            "'fortnight' is not a time unit",
        ),
        (
            {"join": JOIN | {"within": "DATEDIFF(minute, orders, refunds) BETWEEN 0 AND 1"}},
            "join.within",
            "not the join's inputs",
        ),
        ({"join": JOIN | {"within": "orders within 15 minutes"}}, "join.within", "cannot read"),
        ({"join": JOIN | {"right": "orders"}}, "join.right", "the same input as join.left"),
        ({"join": JOIN | {"left": "order"}}, "join.left", "'order' is not an input"),
        ({"join": JOIN | {"type": "full"}}, "join.type", "'full'"),
        ({"join": JOIN, "select": None}, "select", "select is missing"),
        ({"join": JOIN, "select": {"id": "orderId"}}, "select.id", "unknown column orderId"),
        ({"join": JOIN, "select": {"offset": "orders.offset"}}, "select.offset", "engine uses for its own column"),
        (
            {"join": JOIN, "window": {"kind": "tumbling", "size": "1m"}, "aggregates": {"n": "count(*)"}},
            "window",
            "cannot be used in a join step",
        ),
        ({"join": JOIN, "over": "orderId"}, "over", "cannot be used in a join step"),
        ({"join": None}, "inputs", "inputs are set but join is not"),
        ({"join": JOIN, "inputs": {"orders": {}}}, "inputs", "inputs names 1 input"),
        (
            {"join": JOIN, "inputs": BASE["inputs"] | {"orders": {"policy": {"late_arrival_tolerance": "30d"}}}},
            "inputs.orders.policy.late_arrival_tolerance",
            "is 30d",
        ),
        (
            {"join": JOIN, "inputs": BASE["inputs"] | {"orders": {"over": "orderId"}}},
            "inputs.orders.over",
            "cannot be used in a join job yet",
        ),
        (
            {"join": JOIN, "inputs": {"orders": {"filter": "kindd = 'o'"}, "payments": {}}},
            "inputs.orders.filter",
            "unknown column kindd",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and "." in v or v in ("select", "window", "over", "inputs") else None,
)
def test_a_bad_join_is_refused_at_deploy_time_naming_the_field(change, field, message):
    with pytest.raises(ConfigError) as err:
        parse_spec(BASE | change)
    assert field in err.value.problem and message in err.value.problem, err.value.problem
    assert err.value.fix


def test_a_join_filter_and_select_read_either_side_by_name():
    s = spec(
        filter="payments.amount IS NULL OR payments.amount < orders.amount",
        select={"id": "orders.orderId", "late_by": "payments.system_time - orders.system_time"},
    )
    assert s.filter == "payments.amount IS NULL OR payments.amount < orders.amount"
    assert [n for n, _ in s.select] == ["id", "late_by"]
    assert "orders join payments on orders.orderId = payments.orderId" in s.describe()
