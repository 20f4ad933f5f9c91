from pyspark.sql.types import ArrayType, IntegerType, MapType, StringType, StructField, StructType

from tidegate.spark.tools.test_query import _sortable


def test_rows_of_one_window_are_ordered_by_every_column_spark_can_sort_on():
    text, number = StringType(), IntegerType()
    assert _sortable(text) and _sortable(ArrayType(number))
    assert _sortable(StructType([StructField("a", text), StructField("b", ArrayType(number))]))
    assert not _sortable(MapType(text, number))
    assert not _sortable(ArrayType(MapType(text, number)))
    assert not _sortable(StructType([StructField("a", text), StructField("m", MapType(text, number))]))
