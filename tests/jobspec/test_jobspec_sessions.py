"""A session window's ``cut``: Stream Analytics' by default, the rule before on request — and
the fingerprint that makes a session job rebuild by replay when the default changed its rows."""

from __future__ import annotations

import copy

import pytest
from test_jobspec import DELETE, M, spec_with

from tidegate.errors import ConfigError
from tidegate.eventtime.sessions import EVERY_CHECK_POINT, OVER_MAX_DURATION
from tidegate.eventtime.windows import SessionWindow
from tidegate.jobspec import parse_spec

SESSION = {"kind": "session", "gap": "2m", "max_duration": "30m"}

# Fingerprints as Tidegate 0.7 computed them, before sessions had a cut (every check point cut).
BEFORE = {
    "tumbling": "ef90b6f70376a54fab396d5d6df8130ca1033e503ee5b584ea99d2a211008714",
    "sliding": "312ce61b6f01175e3dcc4fbc073e9ff7aff291cfb8496afb3be201f2ae451400",
    "hopping": "ec42994016063c181143476b413301e8fba7340191e21000e499561f155df41a",
    "session": "ce3aaa837c6a2cedb7f7fc9e6e3da5c57e06455b174f8fea793c0780b207e20a",
}
WINDOWS = {
    "tumbling": None,  # the base spec's 1m tumbling window
    "sliding": {"kind": "sliding", "size": "10m"},
    "hopping": {"kind": "hopping", "size": "5m", "hop": "1m"},
}


def session_spec(**window):
    return parse_spec(spec_with(window=SESSION | window))


def test_a_session_is_cut_as_stream_analytics_cuts_it_unless_asked_otherwise():
    assert session_spec().window == SessionWindow(2 * M, 30 * M, cut=OVER_MAX_DURATION)
    assert session_spec(cut="every_check_point").window.cut == EVERY_CHECK_POINT
    assert session_spec(cut="EVERY_CHECK_POINT").window.cut == EVERY_CHECK_POINT
    for spec in (session_spec(), session_spec(cut="every_check_point", edges="start_inclusive")):
        assert spec.to_dict()["window"]["cut"] == spec.window.cut and parse_spec(spec.to_dict()) == spec
    assert "cut at every check point" in session_spec(cut="every_check_point").describe()


@pytest.mark.parametrize(
    "window, expected",
    [
        ({"cut": "every_checkpoint"}, ["window.cut is 'every_checkpoint'", "over_max_duration", "every_check_point"]),
        ({"cut": 2}, ["window.cut is 2", "over_max_duration (the default) or every_check_point"]),
        ({"kind": "tumbling", "size": "1m", "cut": "every_check_point"}, ["window.cut does not apply to a tumbling"]),
    ],
    ids=["misspelt", "not-text", "not-a-session"],
)
def test_a_bad_cut_is_refused_naming_the_field_and_the_choices(window, expected):
    with pytest.raises(ConfigError) as refused:
        parse_spec(spec_with(window=SESSION | window if window.get("kind") is None else window))
    for text in expected:
        assert text in str(refused.value)


def test_the_new_default_changes_the_fingerprint_of_session_jobs_and_only_theirs():
    """A session job's checkpoint holds rows cut the old way: the changed default must not
    resume it — it rebuilds by replay (semantics §6). Asking for the old rule keeps the
    fingerprint, so such a job resumes where it was; no other window's fingerprint moves."""
    assert session_spec().fingerprint != BEFORE["session"]
    assert session_spec(cut="every_check_point").fingerprint == BEFORE["session"]
    for kind, window in WINDOWS.items():
        spec = parse_spec(spec_with() if window is None else spec_with(window=window))
        assert spec.fingerprint == BEFORE[kind], kind


def test_a_session_step_changes_with_its_cut_too():
    steps = {
        "steps": [
            {"name": "per_minute", "from": "input", "window": {"kind": "tumbling", "size": "1m"},
             "group_by": ["deviceId"], "aggregates": {"events": "count(*)"}},
            {"name": "busy", "from": "per_minute", "window": SESSION, "group_by": ["deviceId"],
             "aggregates": {"minutes": "count(*)"}},
        ],
    }  # fmt: skip
    query = {"window": DELETE, "group_by": DELETE, "aggregates": DELETE, "filter": DELETE}
    base = spec_with(**query, **copy.deepcopy(steps))
    old = spec_with(**query, **copy.deepcopy(steps))
    old["steps"][1]["window"] = SESSION | {"cut": "every_check_point"}
    assert parse_spec(base).fingerprint != parse_spec(old).fingerprint
