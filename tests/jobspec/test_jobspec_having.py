"""``having``: a condition on each window row, after the window (Stream Analytics' HAVING) —
over the row's columns only, through the same checks as every spec expression."""

from __future__ import annotations

import copy

import pytest
from test_jobspec import DELETE, spec_with

from tidegate.errors import ConfigError
from tidegate.jobspec import parse_spec
from tidegate.jobspec.spec_expressions import spec_expressions

HOT = {"having": "avg_temperature > 30 AND events >= 2"}


def test_having_reads_the_window_row_and_round_trips():
    spec = parse_spec(spec_with(**HOT))
    assert spec.having == "avg_temperature > 30 AND events >= 2"
    assert parse_spec(spec.to_dict()) == spec and spec.to_dict()["having"] == spec.having
    assert "having avg_temperature > 30" in spec.describe()
    assert ("having", spec.having, False) in spec_expressions(spec)
    # the window's own columns and the group columns are the row's too
    assert parse_spec(spec_with(having="deviceId <> 'd0' AND window_end > window_start")).having


def test_having_changes_the_fingerprint_and_without_it_nothing_moves():
    base = parse_spec(spec_with())
    assert parse_spec(spec_with(**HOT)).fingerprint != base.fingerprint
    assert parse_spec(spec_with(having="  ")).fingerprint == base.fingerprint  # blank: none
    assert (
        parse_spec(spec_with(having="avg_temperature  >  30 and events >= 2")).fingerprint
        == parse_spec(spec_with(**HOT)).fingerprint
    )


@pytest.mark.parametrize(
    "having, expected",
    [
        (
            "temperature > 30",
            [
                "having: unknown column temperature",
                "having reads a window row's columns, after the window",
                "window_start, window_end, deviceId, events, avg_temperature",
                "aggregate a payload field under aggregates",
                "or keep or drop events before the window with filter",
            ],
        ),
        (
            "avg(temperature) > 30",
            [
                "having: 'avg(temperature) > 30' calls avg, an aggregate",
                "compute it under aggregates",
                "compare it by name here",
            ],
        ),
        ("reflect('java.lang.Runtime', 'exec', 'id') IS NOT NULL", ["having", "reflect"]),
        ("avg_temperature > (SELECT 1)", ["having", "subquer"]),
        (30, ["having is 30, not text"]),
    ],
    ids=["a-payload-field", "an-aggregate", "a-refused-function", "a-subquery", "not-text"],
)
def test_a_bad_having_is_refused_naming_the_field_and_what_to_do(having, expected):
    with pytest.raises(ConfigError) as refused:
        parse_spec(spec_with(having=having))
    for text in expected:
        assert text in str(refused.value), str(refused.value)


def test_having_needs_a_window():
    per_event = spec_with(window=DELETE, group_by=DELETE, aggregates=DELETE, having="temperature > 30")
    with pytest.raises(ConfigError, match="having is set but there is no window.*use filter"):
        parse_spec(per_event)


def test_a_window_step_takes_having_over_its_own_rows():
    steps = {
        "steps": [
            {"name": "per_minute", "from": "input", "window": {"kind": "tumbling", "size": "1m"},
             "group_by": ["deviceId"], "aggregates": {"avg_temperature": "avg(temperature)"},
             "having": "avg_temperature > 30"},
            {"name": "hot_hours", "from": "per_minute", "window": {"kind": "tumbling", "size": "1h"},
             "group_by": ["deviceId"], "aggregates": {"hot_minutes": "count(*)"}, "having": "hot_minutes >= 10"},
        ],
    }  # fmt: skip
    query = {"window": DELETE, "group_by": DELETE, "aggregates": DELETE, "filter": DELETE}
    spec = parse_spec(spec_with(**query, **copy.deepcopy(steps)))
    assert spec.having == "avg_temperature > 30" and spec.steps[0].having == "hot_minutes >= 10"
    assert parse_spec(spec.to_dict()) == spec
    assert spec.emitted.having == "hot_minutes >= 10"
    assert [e.where for e in spec_expressions(spec) if "having" in e.where] == ["having", "steps[1] (hot_hours) having"]
    bad = copy.deepcopy(steps)
    bad["steps"][1]["having"] = "avg_temperature > 30"  # a column of the rows it reads, not of its own
    with pytest.raises(ConfigError, match=r"steps\[1\] \(hot_hours\): having: unknown column avg_temperature"):
        parse_spec(spec_with(**query, **bad))
