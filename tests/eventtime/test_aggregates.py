"""Mergeable aggregates: parts of any cut of the events merge to the one-pass value, and an
aggregate registered alone is one the window stage keeps as parts."""

from __future__ import annotations

import numpy as np
import pytest

from tidegate.eventtime import aggregates as G

VALUES = [3.0, None, -1.5, 7.25, None, 2.0, 0.0]


@pytest.mark.parametrize(
    "name, expect",
    [
        ("count", 5),
        ("sum", 10.75),
        ("min", -1.5),
        ("max", 7.25),
        ("avg", 10.75 / 5),
    ],
)
def test_parts_of_any_cut_merge_to_the_one_pass_value(name, expect):
    agg = G.lookup(name.upper())
    assert G.value_of(agg, G.parts_of(agg, VALUES)) == expect
    rng = np.random.default_rng(5)
    for _ in range(20):
        cuts = sorted(rng.choice(range(1, len(VALUES)), size=rng.integers(0, 4), replace=False))
        pieces = np.split(np.array(VALUES, dtype=object), cuts)
        merged = G.parts_of(agg, list(pieces[0]))
        for piece in pieces[1:]:
            merged = G.merge(merged, G.parts_of(agg, list(piece)))
        assert G.value_of(agg, merged) == pytest.approx(expect)


def test_count_of_star_counts_every_event_and_nothing_gives_null():
    count, avg = G.lookup("count"), G.lookup("avg")
    assert G.value_of(count, G.parts_of(count, [None, None])) == 0
    assert G.value_of(count, G.parts_of(count, [None, None], star=True)) == 2
    assert G.value_of(avg, G.parts_of(avg, [None])) is None
    assert G.value_of(G.lookup("max"), G.parts_of(G.lookup("max"), [])) is None


def test_a_registered_aggregate_is_kept_as_parts():
    """(Read without a Spark session: which aggregates merge is decided from the spec.)"""
    from tidegate.eventtime.windows import TumblingWindow
    from tidegate.spark.pipeline.window_partials import partials_for

    window, payload = TumblingWindow(size_us=60_000_000), {"v": "double"}
    assert partials_for(window, [("top", "max_by_parts(v)")], payload) is None
    G.register(G.Mergeable("max_by_parts", parts=("max",), value=("max",)))
    try:
        (p,) = partials_for(window, [("top", "max_by_parts(v)")], payload)
        assert (p.function, p.column, p.aggregate.parts) == ("max_by_parts", "v", ("max",))
    finally:
        G.unregister("max_by_parts")
