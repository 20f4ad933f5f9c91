"""``tidegate query test`` puts a sample's rows in log order before the engine sees them."""

from __future__ import annotations

from tidegate.spark.tools.test_query import as_logged


def test_a_sample_row_arriving_before_the_row_above_it_is_logged_first():
    rows = [(0, 300, None, "a"), (1, 100, None, "b"), (0, 200, None, "c"), (0, 300, None, "d")]
    assert as_logged(rows) == [
        (0, 0, 200, None, "c"),
        (0, 1, 300, None, "a"),
        (0, 2, 300, None, "d"),
        (1, 0, 100, None, "b"),
    ]
