import pytest
from pyspark.sql.types import ArrayType, IntegerType, MapType, StringType, StructField, StructType

from tidegate.spark.tools.test_query import _sortable


def test_rows_of_one_window_are_ordered_by_every_column_spark_can_sort_on():
    text, number = StringType(), IntegerType()
    assert _sortable(text) and _sortable(ArrayType(number))
    assert _sortable(StructType([StructField("a", text), StructField("b", ArrayType(number))]))
    assert not _sortable(MapType(text, number))
    assert not _sortable(ArrayType(MapType(text, number)))
    assert not _sortable(StructType([StructField("a", text), StructField("m", MapType(text, number))]))


def test_a_column_whose_name_holds_a_dot_or_a_backtick_orders_the_rows_as_a_name(spark):
    from types import SimpleNamespace as NS

    from tidegate.spark.tools.test_query import _shown

    # one position for both rows: the columns after it decide, each taken as the name it is
    frame = spark.createDataFrame(
        [(0, 5, 2, "x"), (0, 5, 1, "y")], "partition INT, offset BIGINT, `a.b` INT, `c``d` STRING"
    )
    shown = _shown(frame, NS(window=None, join=None), 10).splitlines()
    assert shown[0].split() == ["partition", "offset", "a.b", "c`d"]
    assert [line.split() for line in shown[1:]] == [["0", "5", "1", "y"], ["0", "5", "2", "x"]]


def test_a_sample_line_that_is_not_json_is_kept_for_the_engine_to_quarantine(tmp_path):
    from tidegate.spark.tools.test_query import read_sample

    sample = tmp_path / "sample.jsonl"
    sample.write_text('{"t": "2026-01-01T00:00:01Z", "v": 1}\nnot json\n')
    rows = read_sample(sample, "t")
    assert [payload for *_, payload in rows] == ['{"t": "2026-01-01T00:00:01Z", "v": 1}', "not json"]
    assert rows[1][:2] == (0, rows[0][1])  # partition 0, at the arrival before it


def test_a_sample_line_that_cannot_name_its_input_is_refused_with_what_to_write(tmp_path):
    from tidegate.errors import ConfigError
    from tidegate.spark.tools.test_query import read_sample

    sample = tmp_path / "sample.jsonl"
    sample.write_text('{"_input": "orders", "t": "2026-01-01T00:00:01Z"}\nnot json\n')
    with pytest.raises(ConfigError) as refused:
        read_sample(sample, {"orders": "t", "payments": "t"})
    assert "row 2 is not a JSON object" in refused.value.problem
    assert "_input: one of orders, payments" in refused.value.fix
