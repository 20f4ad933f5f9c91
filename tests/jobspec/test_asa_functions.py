"""A spec's DATEPART, DATENAME, DATEADD, SUBSTRING, CHARINDEX and LEN are Stream Analytics',
written for Spark once per argument; Spark's own forms stay Spark's; a date part Stream Analytics
does not know is refused when the spec is loaded, naming it and the parts there are; jobs whose
SUBSTRING or LEN now reads differently get a new fingerprint, every other keeps its own."""

from __future__ import annotations

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec import canonical_expression, parse_spec
from tidegate.jobspec.asa_dates import DATE_PARTS
from tidegate.jobspec.asa_functions import asa_text
from tidegate.jobspec.expressions import check_expression

WEEK = (
    "element_at(transform(array(named_struct('a0', (t))),"
    " v_ -> int((dayofyear(v_.a0) + dayofweek(trunc(v_.a0, 'YEAR')) - 2) div 7 + 1)), 1)"
)
REWRITTEN = [
    # (spec text, as the engine evaluates it)
    ("DATEPART(year, t)", "year((t))"),
    ("DATEPART(DW, t)", "dayofweek((t))"),  # 1 = Sunday in both
    ("DATEPART(wk, t)", WEEK),  # T-SQL's weeks: Sunday-started, week 1 holds 1 January
    ("DATEPART(ms, t)", "(cast(date_part('SECOND', (t)) * 1000 AS int) % 1000)"),
    ("datepart('WEEK', t)", "datepart('WEEK', t)"),  # Spark's quoted field: ISO's week, Spark's to read
    ("DATENAME(month, t)", "date_format((t), 'MMMM')"),
    ("DATENAME(w, t)", "date_format((t), 'EEEE')"),
    ("DATENAME(yyyy, t)", "cast(year((t)) AS string)"),
    ("DATEADD(ms, n, t)", "timestampadd(MILLISECOND, (n), (t))"),
    ("DATEADD(weekday, 1, t)", "timestampadd(DAY, (1), (t))"),
    ("dateadd(t, 3)", "dateadd(t, 3)"),  # Spark's days
    ("DATEDIFF(mi, a, b)", "timestampdiff(MINUTE, date_trunc('MINUTE', (a)), date_trunc('MINUTE', (b)))"),
    ("SUBSTRING(s, 2, 4)", "substring((s), 2, (4))"),  # from position 1 on: Spark's
    ("SUBSTRING(s, 0, 2)", "substring((s), 1, (2) - 1)"),  # a start before 1 shortens the length
    ("SUBSTRING(s, -1, 3)", "substring((s), 1, (3) - 2)"),
    ("SUBSTRING(s, n, 3)",
     "element_at(transform(array(named_struct('a0', (s), 'a1', (n), 'a2', (3))), v_ -> substring(v_.a0,"
     " if(v_.a1 < 1, 1, v_.a1), if(v_.a1 < 1, try_add(v_.a2, try_subtract(v_.a1, 1)), v_.a2))), 1)"),
    ("substring(s, 2)", "substring(s, 2)"),  # Spark's two-argument form
    ("substr(s, 0, 2)", "substr(s, 0, 2)"),  # Spark's by its other name
    ("CHARINDEX('b', s)", "locate(('b'), (s))"),
    ("CHARINDEX('b', s, n)", "locate(('b'), (s), greatest((n), 1))"),  # a start below 1: the beginning
    ("LEN(s) > 2", "length(rtrim((s))) > 2"),
    ("length(s)", "length(s)"),  # Spark's, trailing spaces counted
    ("LEN(SUBSTRING(s, 0, LEN(s)))", "length(rtrim((substring((s), 1, (length(rtrim((s)))) - 1))))"),  # nested
    ("'LEN(s)'", "'LEN(s)'"),  # text is text
]  # fmt: skip


@pytest.mark.parametrize(("text", "engine"), REWRITTEN, ids=[t for t, _ in REWRITTEN])
def test_stream_analytics_functions_are_written_as_spark_evaluates_them(text, engine):
    assert asa_text(text) == engine


@pytest.mark.parametrize("word", sorted(DATE_PARTS))
def test_every_stream_analytics_date_part_and_abbreviation_is_read_in_every_date_function(word):
    for text in (f"DATEPART({word}, t)", f"DATENAME({word}, t)", f"DATEADD({word}, 1, t)", f"DATEDIFF({word}, t, t)"):
        assert check_expression(text, "select.x", ["t"]) == [text.split("(")[0].lower()]
        assert asa_text(text) != text


REFUSED = [
    # (expression, what the error names)
    ("DATEPART(fortnight, t)", "DATEPART's first argument 'fortnight' is not a Stream Analytics date part"),
    ("DATEPART(nanosecond, t)", "'nanosecond' is not a Stream Analytics date part"),  # Spark holds microseconds
    ("DATEADD(ns, 1, t)", "DATEADD's first argument 'ns'"),
    ("DATEDIFF(weeks, a, t)", "DATEDIFF's first argument 'weeks'"),
    ("DATENAME('month', t)", "DATENAME's first argument \"'month'\""),  # a part is a word, not text
    ("DATENAME(a, t)", "DATENAME's first argument 'a'"),  # a column is no part, even a known one
]


@pytest.mark.parametrize(("text", "named"), REFUSED, ids=[t for t, _ in REFUSED])
def test_a_date_part_stream_analytics_does_not_know_is_refused_naming_it_and_the_parts(text, named):
    with pytest.raises(ConfigError) as err:
        check_expression(text, "select.x", ["t", "a"])
    assert named in err.value.problem and err.value.problem.startswith("select.x: ")
    assert "year (yy, yyyy)" in err.value.fix and "microsecond (mcs)" in err.value.fix


def test_spark_s_own_date_part_with_a_quoted_field_and_two_argument_forms_are_not_refused():
    assert check_expression("datepart('YEAR', t) + dateadd(d, 2) - datediff(d, t)", "select.x", ["t", "d"])


def test_a_job_whose_substring_or_len_reads_differently_gets_a_new_fingerprint_and_no_other_job_does():
    assert canonical_expression("LEN(s)") == "len_asa ( s )"
    assert canonical_expression("SUBSTRING(s, n, 2)") == "substring_asa ( s , n , 2 )"
    assert canonical_expression("SUBSTRING(s, 0, 2)") == "substring_asa ( s , 0 , 2 )"
    # from position 1 on, and in Spark's other forms, the meaning is Spark's: fingerprints as before
    assert canonical_expression("SUBSTRING(s, 2, 4)") == "substring ( s , 2 , 4 )"
    assert canonical_expression("substring(s, 2)") == "substring ( s , 2 )"
    assert canonical_expression("length(s)") == "length ( s )"
    # functions Spark had no meaning for (an error there) need no new fingerprint
    assert canonical_expression("DATEPART(week, t)") == "datepart ( week , t )"
    base = {"name": "d", "version": 1, "payload": {"s": "string", "t": "timestamp"}, "timestamp_by": "t"}
    trimmed = parse_spec(base | {"select": {"x": "LEN(s)"}})
    assert trimmed.fingerprint != parse_spec(base | {"select": {"x": "length(s)"}}).fingerprint
    assert parse_spec(trimmed.to_dict()).fingerprint == trimmed.fingerprint


def test_a_spec_may_call_charindex_and_datename_which_spark_has_not():
    spec = parse_spec({
        "name": "d", "version": 1, "payload": {"s": "string", "t": "timestamp"}, "timestamp_by": "t",
        "select": {"at": "CHARINDEX('-', s, 2)", "month": "DATENAME(mm, t)", "week": "DATEPART(wk, t)"},
    })  # fmt: skip
    assert spec.fingerprint


def test_timestamp_by_reads_stream_analytics_date_parts_in_dateadd():
    spec = parse_spec({
        "name": "d", "version": 1, "payload": {"epochMs": "bigint"},
        "timestamp_by": "DATEADD(ms, epochMs, '1970-01-01T00:00:00Z')",
    })  # fmt: skip
    assert spec.timestamp_by == "DATEADD(ms, epochMs, '1970-01-01T00:00:00Z')"
