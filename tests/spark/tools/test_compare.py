"""Two outputs compared key by key, as the benchmarks score a region against the batch path."""

from __future__ import annotations

import pytest

from tidegate.spark.tools.compare import keyed_difference

pytestmark = [pytest.mark.spark]

COLUMNS = "window_end string, deviceId string, events long, avg double"
KEYS = ["window_end", "deviceId"]


def test_keys_missing_extra_doubled_and_differing_are_counted_apart(spark):
    reference = spark.createDataFrame(
        [("w1", "a", 3, 1.0), ("w1", "b", 2, 2.0), ("w2", "a", 1, 0.1 + 0.2), ("w2", "b", 4, 4.0)], COLUMNS
    )
    candidate = spark.createDataFrame(
        [
            ("w1", "a", 3, 1.0),
            ("w1", "a", 3, 1.0),  # doubled
            ("w1", "b", 5, 2.0),  # differs
            ("w2", "a", 1, 0.3),  # the same after rounding: another summation order
            ("w3", "a", 1, 1.0),  # extra; (w2, b) is missing
        ],
        COLUMNS,
    )
    assert keyed_difference(reference, candidate, KEYS) == {
        "rows": 5,
        "missing": 1,
        "extra": 1,
        "duplicated": 1,
        "differing": 1,
    }


def test_an_output_equal_to_its_reference_has_no_difference_whatever_its_column_order(spark):
    reference = spark.createDataFrame([("w1", "a", 3, 1.0), ("w1", "b", 2, 2.0)], COLUMNS)
    candidate = reference.select("avg", "deviceId", "events", "window_end")
    assert keyed_difference(reference, candidate, KEYS) == {
        "rows": 2,
        "missing": 0,
        "extra": 0,
        "duplicated": 0,
        "differing": 0,
    }
