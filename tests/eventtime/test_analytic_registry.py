"""The analytic function registry: one class registered by name is all a new function needs
to be parsed from a spec, evaluated by the core and kept as history by the step (its run on
Spark: tests/spark/pipeline/test_analytic_registry_stage.py)."""

from __future__ import annotations

import numpy as np
import pytest
from test_analytics import golden_events

from support import SEEN_CALL, SEEN_GOLDEN
from tidegate.errors import ConfigError
from tidegate.eventtime import analytics as A
from tidegate.eventtime.analytic_functions import IsFirst, Lag, Last, lookup, registered, unregister
from tidegate.eventtime.policy import NONE
from tidegate.jobspec import parse_spec

MIN = 60_000_000


def spec(analytics: dict):
    return parse_spec(
        {
            "name": "registry",
            "version": 1,
            "payload": {"device": "string", "eventTime": "string", "temperature": "double"},
            "timestamp_by": "eventTime",
            "analytics": analytics,
        }
    )


def test_the_built_in_functions_are_registered_in_the_order_errors_list_them():
    assert registered()[:3] == (Lag, Last, IsFirst)
    assert lookup("lag") is Lag and lookup("NOPE") is None


def test_a_registered_function_parses_round_trips_and_sets_the_look_back(seen):
    s = spec({"n_recent": SEEN_CALL})
    (a,) = s.analytics
    assert isinstance(a.function, seen) and a.span_us == 10 * MIN and a.partition_by == ("device",)
    assert a.text() == SEEN_CALL and parse_spec(s.to_dict()) == s
    assert s.lookback_us == spec({"p": "LAG(temperature) OVER (LIMIT DURATION(minute, 10))"}).lookback_us
    with pytest.raises(ConfigError, match="SEEN takes no arguments"):
        spec({"n_recent": "SEEN(temperature) OVER (LIMIT DURATION(minute, 10))"})


def test_a_registered_function_evaluates_in_the_core_and_its_step_keeps_what_it_looks_back_to(seen):
    (a,) = spec({"n_recent": SEEN_CALL}).analytics
    times, arrival, partition, offset, device, _ = golden_events()
    got = np.empty(len(times), dtype=object)
    for d in np.unique(device):
        rows = np.flatnonzero(device == d)
        order = rows[A.analytic_order(times[rows], arrival[rows], partition[rows], offset[rows])]
        got[order] = A.evaluate(a.function, times[order])
    assert got.tolist() == SEEN_GOLDEN
    s = np.array([0, 5, 30, 59]) * MIN
    st = A.step([a.function], s, NONE, 40 * MIN, [None], [None], [None])
    assert st.emit.tolist() == [True, True, True, False] and st.keep.tolist() == [False, False, True, True]


def test_an_unregistered_name_is_refused_and_the_error_lists_the_registered_forms(seen):
    unregister("SEEN")
    with pytest.raises(ConfigError, match=r"write LAG\(expr\[, n\]\[, default\]\) OVER \(\.\.\.\), LAST"):
        spec({"n_recent": SEEN_CALL})
