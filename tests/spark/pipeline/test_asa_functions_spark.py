"""A spec's DATEPART, DATENAME, DATEADD, DAY/MONTH/YEAR, SUBSTRING, CHARINDEX and LEN give
Stream Analytics' (T-SQL's) values — computed by hand below, with Spark's own where it differs —
at year ends, leap days and the Saturday/Sunday edge of a week; Spark's parser reads each as the
spec wrote it; and a job calling them gives the same rows in a stream and on the batch path."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from support import engine_output
from tidegate.eventtime.durations import parse_time_us
from tidegate.jobspec import parse_spec
from tidegate.spark.expression_guard import check_with_spark
from tidegate.spark.pipeline.event_time import tolerant
from tidegate.spark.spec_columns import spec_column

pytestmark = pytest.mark.spark

DATEPARTS = [
    # (part as written, time, Stream Analytics' DATEPART, DATENAME)
    ("year", "2025-12-31 23:59:59", 2025, "2025"),
    ("yyyy", "2026-01-01 00:00:00", 2026, "2026"),
    ("qq", "2026-03-31 23:59:59", 1, "1"),
    ("q", "2026-04-01 00:00:00", 2, "2"),
    ("mm", "2024-02-29 12:00:00", 2, "February"),
    ("month", "2026-01-04 00:00:00", 1, "January"),
    ("dy", "2024-12-31 00:00:00", 366, "366"),  # a leap year's last day
    ("dayofyear", "2024-02-29 00:00:00", 60, "60"),
    ("d", "2024-02-29 00:00:00", 29, "29"),
    ("wk", "2026-01-03 23:59:59", 1, "1"),  # Saturday: still the week of 1 January (a Thursday)
    ("wk", "2026-01-04 00:00:00", 2, "2"),  # Sunday starts week 2 (ISO: week 1, Monday-started)
    ("week", "2024-12-31 00:00:00", 53, "53"),  # ISO: week 1 of 2025
    ("week", "2023-01-01 00:00:00", 1, "1"),  # a Sunday 1 January: week 1 (ISO: week 52 of 2022)
    ("ww", "2023-01-08 00:00:00", 2, "2"),
    ("week", "2024-02-29 00:00:00", 9, "9"),
    ("dw", "2026-01-04 00:00:00", 1, "Sunday"),
    ("weekday", "2026-01-03 00:00:00", 7, "Saturday"),
    ("w", "2026-01-05 00:00:00", 2, "Monday"),
    ("hh", "2026-01-01 23:59:59", 23, "23"),
    ("n", "2026-01-01 23:59:59", 59, "59"),
    ("ss", "2026-01-01 23:59:58.999", 58, "58"),
    ("ms", "2026-01-01 12:00:01.123456", 123, "123"),
    ("mcs", "2026-01-01 12:00:01.123456", 123456, "123456"),
]
ISO_WEEKS = {"2024-12-31 00:00:00": 1, "2023-01-01 00:00:00": 52, "2026-01-04 00:00:00": 1}  # Spark's weekofyear


def test_datepart_and_datename_give_stream_analytics_values(spark):
    row = spark.range(1)
    for part, t, number, name in DATEPARTS:
        ts = f"TIMESTAMP'{t}'"
        got = row.select(spec_column(f"DATEPART({part}, {ts})"), spec_column(f"DATENAME({part}, {ts})")).first()
        assert tuple(got) == (number, name), (part, t)
        if t in ISO_WEEKS and part.startswith("w") and part not in ("w", "weekday"):
            assert row.select(F.expr(f"weekofyear({ts})")).first()[0] == ISO_WEEKS[t] != number


DATEADDS = [
    # (DATEADD's arguments, Stream Analytics' value)
    ("month, 1, TIMESTAMP'2026-01-31 10:00:00'", "2026-02-28 10:00:00"),  # the month's last day
    ("yy, 1, TIMESTAMP'2024-02-29 00:00:00'", "2025-02-28 00:00:00"),  # from a leap day
    ("q, 1, TIMESTAMP'2026-11-30 00:00:00'", "2027-02-28 00:00:00"),
    ("dw, 1, TIMESTAMP'2026-01-03 10:00:00'", "2026-01-04 10:00:00"),  # weekday adds days
    ("dy, -1, TIMESTAMP'2026-01-01 00:00:00'", "2025-12-31 00:00:00"),
    ("wk, 1, TIMESTAMP'2025-12-28 00:00:00'", "2026-01-04 00:00:00"),
    ("ms, 1500, TIMESTAMP'2026-01-01 00:00:00'", "2026-01-01 00:00:01.5"),
    ("mcs, 7, TIMESTAMP'2026-01-01 00:00:00'", "2026-01-01 00:00:00.000007"),
    ("second, 1.7, TIMESTAMP'2026-01-01 00:00:00'", "2026-01-01 00:00:01"),  # the fraction dropped
    ("s, -1.7, TIMESTAMP'2026-01-01 00:00:00'", "2025-12-31 23:59:59"),  # toward zero
]


def test_dateadd_takes_stream_analytics_parts_and_day_month_year_are_spark_s(spark):
    row = spark.range(1)
    for args, want in DATEADDS:
        got = row.select(spec_column(f"DATEADD({args})").cast("string")).first()[0]
        assert got == want, args
    ts = "TIMESTAMP'2024-02-29 23:59:59'"
    assert tuple(row.select(*(spec_column(f"{f}({ts})") for f in ("DAY", "MONTH", "YEAR"))).first()) == (29, 2, 2024)


STRINGS = [
    # (expression, Stream Analytics' value, Spark's function of the same name)
    ("SUBSTRING('abcdefg', 2, 4)", "bcde", "bcde"),  # the reference's example
    ("SUBSTRING('abc', 0, 2)", "a", "ab"),  # a start of 0 shortens the length
    ("SUBSTRING('abc', -1, 3)", "a", "c"),  # Spark counts a negative start from the end
    ("SUBSTRING('abc', -1, 2)", "", "c"),
    ("SUBSTRING('abc', 1, 10)", "abc", "abc"),
    ("SUBSTRING('abc', 4, 1)", "", ""),
    ("CHARINDEX('b', 'abcb')", 2, None),
    ("CHARINDEX('z', 'abc')", 0, None),  # absent
    ("CHARINDEX('b', 'abcb', 3)", 4, None),
    ("CHARINDEX('b', 'abcb', 0)", 2, None),  # Spark's locate finds nothing from 0
    ("CHARINDEX('b', 'abcb', -5)", 2, None),
    ("CHARINDEX('b', 'abcb', 5)", 0, None),
    ("LEN('ab  ')", 2, 4),  # trailing spaces are not counted
    ("LEN('  ab')", 4, 4),
    ("LEN('   ')", 0, 3),
    ("LEN('a\t')", 2, 2),  # a tab is no space
]


def test_substring_charindex_and_len_give_stream_analytics_values(spark):
    row = spark.range(1)
    for text, asa, spark_s in STRINGS:
        assert row.select(spec_column(text)).first()[0] == asa, text
        if spark_s is not None:
            assert row.select(F.expr(text)).first()[0] == spark_s, text


def test_substring_with_a_computed_start_reads_it_once_as_a_literal_start_does(spark):
    starts = [(-2,), (-1,), (0,), (1,), (2,), (3,), (4,), (None,)]
    df = spark.createDataFrame(starts, "n INT").withColumn("s", F.lit("abc"))
    got = {r[0]: r[1] for r in df.select("n", spec_column("SUBSTRING(s, n, 3)")).collect()}
    literal = {n: spark.range(1).select(spec_column(f"SUBSTRING('abc', {n}, 3)")).first()[0] for (n,) in starts[:-1]}
    assert got == literal | {None: None}
    assert (got[-2], got[0], got[1], got[3]) == ("", "ab", "abc", "c")


def test_spark_s_parser_reads_each_as_the_spec_wrote_it(spark):
    for text in ("DATEPART(dw, t)", "DATENAME(mm, t)", "DATEADD(ms, 5, t)", "DATEADD(weekday, 1, t)",
                 "DATEDIFF(mi, t, t)", "CHARINDEX('a', s, 2)", "LEN(s)", "SUBSTRING(s, 0, 2)"):  # fmt: skip
        check_with_spark(spark, text, "select.x")


def test_a_job_calling_them_gives_the_same_rows_in_a_stream_and_on_the_batch_path(spark, tmp_path):
    spec = parse_spec({
        "name": "asa_functions", "version": 1,
        "payload": {"id": "string", "seen": "timestamp", "plate": "string", "n": "int"},
        "timestamp_by": "seen",
        "select": {"id": "id", "week": "DATEPART(wk, seen)", "day": "DATENAME(dw, seen)",
                   "later": "DATEADD(mi, n, seen)", "part": "SUBSTRING(plate, n, 2)",
                   "dash": "CHARINDEX('-', plate)", "chars": "LEN(plate)"},
    })  # fmt: skip
    events = [("a", "2026-01-03T23:59:00Z", "AB-12  ", 0), ("b", "2026-01-04T00:01:00Z", "XY9", 2)]
    raw = [(0, k, parse_time_us(seen), None, json.dumps({"id": i, "seen": seen, "plate": plate, "n": n}))
           for k, (i, seen, plate, n) in enumerate(events)]  # fmt: skip

    def run(root, batches):
        later = F.col("later").cast("string")
        return engine_output(spark, spec, root, batches, "id", "week", "day", later, "part", "dash", "chars")

    batch = run(tmp_path / "batch", [raw])
    assert batch == [
        ("a", 1, "Saturday", "2026-01-03 23:59:00", "A", 3, 5),  # start 0: one character; trailing spaces not counted
        ("b", 2, "Sunday", "2026-01-04 00:03:00", "Y9", 0, 3),
    ]
    assert run(tmp_path / "stream", [[r] for r in raw]) == batch


def test_an_event_time_dateadd_with_an_abbreviated_part_is_bounded_as_a_named_one(spark):
    df = spark.createDataFrame([(1_767_225_600_123,), (10**18,)], "epochMs BIGINT")
    times = [r[0] for r in df.select(spec_column(tolerant("DATEADD(ms, epochMs, '1970-01-01T00:00:00Z')"))).collect()]
    assert str(times[0]) == "2026-01-01 00:00:00.123000" and times[1] is None  # past the bound: NULL, no failure
