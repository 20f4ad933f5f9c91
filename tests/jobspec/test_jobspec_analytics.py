"""The ``analytics`` section: what it reads, what it refuses (with the field), and what
follows from it — look-back, fingerprint, the normalised form."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec import load_spec, parse_spec

JOBS = Path(__file__).resolve().parents[2] / "jobs"
MIN = 60_000_000
BASE = {
    "name": "rise",
    "version": 1,
    "payload": {"deviceId": "string", "eventTime": "string", "temperature": "double"},
    "timestamp_by": "eventTime",
    "over": "deviceId",
    "policy": {"late_arrival_tolerance": "2m"},
}


def spec(analytics, **more):
    return parse_spec(BASE | {"analytics": analytics} | more)


def test_the_examples_compute_what_their_descriptions_say():
    rise = load_spec(JOBS / "temperature_rise.yaml")
    (lag,) = rise.analytics
    assert (lag.function.kind, lag.function.n, lag.span_us, lag.expression) == ("lag", 1, 10 * MIN, "temperature")
    assert lag.partition_by == ("deviceId",) and rise.filter == "temperature - previous_temperature > 5"
    assert rise.lookback_us == (10 + 2 + 5) * MIN and rise.needs_lookback
    first = load_spec(JOBS / "first_reading_per_hour.yaml")
    assert first.analytics[0].function.kind == "isfirst" and first.lookback_us == (60 + 2 + 5) * MIN


def test_the_largest_span_of_the_query_decides_the_look_back():
    s = spec(
        {
            "a": "LAG(temperature, 2, 0.0) OVER (LIMIT DURATION(minute, 10))",
            "b": "LAST(temperature) OVER (LIMIT DURATION(hh, 1) WHEN temperature > 30)",
            "c": "ISFIRST(mi, 15)",
        }
    )
    assert s.span_us == 60 * MIN and s.lookback_us == (60 + 2 + 5) * MIN


@pytest.mark.parametrize(
    "text",
    [
        "LAG(temperature) OVER (PARTITION BY deviceId LIMIT DURATION(minute, 10))",
        "lag( temperature ,3,  -1.5 ) over ( partition by deviceId limit duration ( second , 90 ) when temperature>0 )",
        "LAST(eventTime, 'none') OVER (PARTITION BY deviceId LIMIT DURATION(day, 7) WHEN temperature IS NOT NULL)",
        "ISFIRST(hour, 1) OVER (PARTITION BY deviceId WHEN temperature > 30)",
        "ISFIRST(ms, 500)",
        "ISFIRST(hour, 1, start_inclusive) OVER (PARTITION BY deviceId)",
    ],
)
def test_each_form_round_trips_through_to_dict_with_its_fingerprint(text):
    s = spec({"x": text})
    again = parse_spec(s.to_dict())
    assert again == s and again.fingerprint == s.fingerprint


def test_the_fingerprint_follows_the_function_and_leaves_specs_without_analytics_as_they_were():
    lag = "LAG(temperature) OVER (PARTITION BY deviceId LIMIT DURATION(minute, 10))"
    s = spec({"x": lag})
    assert spec({"x": lag.replace("10", "11")}).fingerprint != s.fingerprint
    assert spec({"x": lag.replace("minute, 10", "second, 600")}).fingerprint == s.fingerprint
    assert spec({"x": lag.replace("(temperature)", "(temperature, 2)")}).fingerprint != s.fingerprint
    assert "analytics" not in parse_spec(BASE | {"select": ["deviceId"]}).to_dict()


def test_isfirst_edges_follow_stream_analytics_unless_spark_s_are_asked_for_and_change_the_fingerprint():
    sa, spark_edges = spec({"x": "ISFIRST(hour, 1)"}), spec({"x": "ISFIRST(hour, 1, START_INCLUSIVE)"})
    assert sa.analytics[0].function.edges == "end_inclusive"
    assert spark_edges.analytics[0].function.edges == "start_inclusive"
    assert spec({"x": "ISFIRST(hour, 1, end_inclusive)"}).fingerprint == sa.fingerprint
    assert spark_edges.fingerprint != sa.fingerprint
    assert spark_edges.to_dict()["analytics"]["x"] == "ISFIRST(hour, 1, start_inclusive)"


def test_filter_and_select_read_the_analytic_columns():
    s = spec(
        {"prev": "LAG(temperature) OVER (LIMIT DURATION(minute, 1))"},
        filter="temperature > prev",
        select={"rise": "temperature - prev"},
    )
    assert s.select == (("rise", "temperature - prev"),)


@pytest.mark.parametrize(
    "analytics, more, message",
    [
        (
            {"a": "LAG(temperature) OVER (LIMIT DURATION(day, 8))"},
            {},
            "analytics.a: LIMIT DURATION is 8d, longer than the 7-day maximum",
        ),
        ({"a": "ISFIRST(hour, 200)"}, {}, "analytics.a: ISFIRST period is 8d8h, longer than the 7-day maximum"),
        (
            {"a": "LAG(temperature, 1, 'cold') OVER (LIMIT DURATION(minute, 1))"},
            {},
            "analytics.a: the default 'cold' is a string but temperature is a number",
        ),
        (
            {"a": "LAG(temprature) OVER (LIMIT DURATION(minute, 1))"},
            {},
            "analytics.a (expression): unknown column temprature",
        ),
        (
            {"a": "LAG(temperature) OVER (LIMIT DURATION(minute, 1) WHEN deviceId)"},
            {},
            "analytics.a: WHEN deviceId is a string, not a condition",
        ),
        ({"a": "LAG(temperature) OVER (PARTITION BY deviceId)"}, {}, "analytics.a: LAG needs LIMIT DURATION"),
        ({"a": "LAG(temperature, 0) OVER (LIMIT DURATION(minute, 1))"}, {}, "analytics.a: LAG offset is 0"),
        ({"a": "ISFIRST(fortnight, 1)"}, {}, "'fortnight' is not a time unit"),
        ({"a": "ISFIRST(hour, 1, start)"}, {}, "analytics.a (ISFIRST edges, argument 3) is 'start'"),
        ({"a": "ISFIRST(hour, 1, start_inclusive, 2)"}, {}, "ISFIRST takes 2 arguments (unit, size) and optionally"),
        ({"a": "LAG(rand()) OVER (LIMIT DURATION(minute, 1))"}, {}, "rand() is not allowed"),
        (
            {"a": "ISFIRST(hour, 1) OVER (PARTITION BY deviceId)", "b": "ISFIRST(hour, 2)"},
            {},
            "the functions partition by different keys",
        ),
        ({"temperature": "ISFIRST(hour, 1)"}, {}, "analytics.temperature: temperature is a payload field"),
        ({"a": "upper(deviceId)"}, {}, "is not an analytic function call"),
        ({"a": "avg(temperature)"}, {}, "AVG(…) OVER needs LIMIT DURATION"),
        (
            {"a": "ISFIRST(hour, 1)"},
            {"window": {"kind": "tumbling", "size": "1m"}, "aggregates": {"n": "count(*)"}},
            "analytics cannot be used with a window in one step",
        ),
    ],
)
def test_mistakes_are_refused_when_the_spec_is_loaded_naming_the_field(analytics, more, message):
    with pytest.raises(ConfigError) as err:
        spec(analytics, **more)
    assert message in str(err.value)


def test_a_percentile_watermark_is_an_option_that_changes_the_fingerprint_and_round_trips():
    plain = parse_spec(BASE | {"select": ["deviceId"]})
    early = parse_spec(BASE | {"select": ["deviceId"], "watermark": {"percentile": 95}})
    assert early.watermark_percentile == 95.0 and plain.watermark_percentile is None
    assert early.fingerprint != plain.fingerprint and "watermark" not in plain.to_dict()
    assert parse_spec(early.to_dict()) == early and "percentile watermark 95 %" in early.describe()
    for bad in (0, 100, "95", True, {"percentile": 95}):
        with pytest.raises(ConfigError, match="watermark.percentile is"):
            parse_spec(BASE | {"watermark": {"percentile": bad}})
    with pytest.raises(ConfigError, match="watermark"):
        parse_spec(BASE | {"watermark": {"percentil": 95}})
