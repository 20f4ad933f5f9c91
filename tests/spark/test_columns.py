"""Columns built once and reused by every micro-batch (tidegate.spark.columns)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from tidegate.spark.columns import col, cols, reused


def test_a_reused_builder_runs_once_per_arguments_and_hands_back_the_same_object():
    calls = []

    @reused
    def build(name: str, n: int):
        calls.append((name, n))
        return object()

    first = build("a", 1)
    assert build("a", 1) is first
    assert build("a", 2) is not first and build("b", 1) is not first
    assert calls == [("a", 1), ("a", 2), ("b", 1)]


def test_arguments_that_cannot_be_a_key_build_anew_each_call_instead_of_failing():
    calls = []

    @reused
    def build(spec: dict):
        calls.append(dict(spec))
        return object()

    assert build({"a": 1}) is not build({"a": 1})
    assert calls == [{"a": 1}, {"a": 1}]


@pytest.mark.spark
def test_the_same_columns_serve_every_dataframe_they_are_used_in(spark):
    @reused
    def doubled(name: str):
        return (F.col(name) * 2).alias("doubled")

    batches = [spark.createDataFrame([(i,), (i + 1,)], "x long") for i in (1, 10, 100)]
    got = [[r.doubled for r in b.select(doubled("x")).collect()] for b in batches]
    assert got == [[2, 4], [20, 22], [200, 202]]
    assert doubled("x") is doubled("x")
    assert [r.x for r in batches[2].select(*cols(["x"])).collect()] == [100, 101] and col("x") is col("x")
