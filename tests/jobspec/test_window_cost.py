"""Windowed work is bounded when a spec loads: windows per event, windows open per key; every
interval by the semantics' 7-day maximum."""

from __future__ import annotations

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec import parse_spec


def spec(window: dict, policy: dict | None = None, **more) -> dict:
    out = {
        "name": "w",
        "version": 1,
        "payload": {"d": "string", "t": "string", "v": "double"},
        "timestamp_by": "t",
        "window": window,
        "aggregates": {"n": "count(*)"},
        **more,
    }
    return out | ({"policy": policy} if policy else {})


def refusal(body: dict, env: dict | None = None, monkeypatch=None) -> str:
    with pytest.raises(ConfigError) as err:
        parse_spec(body, origin="job.yaml")
    return str(err.value)


def test_a_hop_of_one_microsecond_over_a_week_is_refused_naming_the_field_and_the_hop_that_would_do():
    message = refusal(spec({"kind": "hopping", "size": "7d", "hop": "1us"}))
    assert message.startswith("job.yaml: window: each event falls in 604,800,000,000 windows")
    assert "make the hop at least" in message and "TIDEGATE_LIMIT_WINDOWS_PER_EVENT" in message


def test_a_one_second_window_that_waits_a_week_for_late_events_would_hold_too_many_open():
    message = refusal(spec({"kind": "tumbling", "size": "1s"}, {"late_arrival_tolerance": "7d"}))
    assert "could hold 604,801 windows open" in message and "TIDEGATE_LIMIT_OPEN_WINDOWS_PER_KEY" in message


@pytest.mark.parametrize(
    "window, field",
    [
        ({"kind": "session", "gap": "40d", "max_duration": "40d"}, "window.gap"),
        ({"kind": "session", "gap": "5m", "max_duration": "400d"}, "window.max_duration"),
        ({"kind": "sliding", "size": "90d"}, "window.size"),
    ],
)
def test_an_interval_longer_than_the_semantics_seven_days_is_refused(window, field):
    message = refusal(spec(window))
    assert message.startswith(f"job.yaml: {field} is ") and "larger than the 7-day maximum" in message


def test_an_operator_raises_a_limit_and_then_the_spec_loads(monkeypatch):
    body = spec({"kind": "hopping", "size": "1h", "hop": "1s"})
    assert "3,600 windows" in refusal(body)
    monkeypatch.setenv("TIDEGATE_LIMIT_WINDOWS_PER_EVENT", "5000")
    assert parse_spec(body).window.hop_us == 1_000_000


def test_a_limit_set_to_something_else_than_a_number_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("TIDEGATE_LIMIT_WINDOWS_PER_EVENT", "²")
    message = refusal(spec({"kind": "tumbling", "size": "1m"}))
    assert "TIDEGATE_LIMIT_WINDOWS_PER_EVENT is '²', not a whole number (it uses '²': only the digits 0-9" in message
    assert "from 1 to 1,000,000,000,000,000 windows per event" in message
    monkeypatch.setenv("TIDEGATE_LIMIT_WINDOWS_PER_EVENT", "0")
    assert "TIDEGATE_LIMIT_WINDOWS_PER_EVENT is '0', out of range" in refusal(spec({"kind": "tumbling", "size": "1m"}))


def test_an_hour_hopping_every_minute_with_the_default_policy_loads():
    assert parse_spec(spec({"kind": "hopping", "size": "1h", "hop": "1m"})).window.size_us == 3_600_000_000
