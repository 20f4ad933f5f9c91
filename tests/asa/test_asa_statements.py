"""The statements of a query, with or without ``;`` between them, and the ``WITH`` steps each
reads, directly or through another step."""

from __future__ import annotations

import pytest

from tidegate.asa.dialect import parse_query
from tidegate.asa.statements import statement_steps, steps_read


def refuse(node, problem, fix):
    return AssertionError(problem)


def test_a_select_after_a_statement_begins_the_next_with_or_without_a_semicolon():
    text = "SELECT a INTO x FROM i\nSELECT b INTO y FROM i; SELECT c INTO z FROM (SELECT c FROM i) s\n"
    assert [s.args["into"].this.name for s in parse_query(text, "q")] == ["x", "y", "z"]


def test_a_select_after_union_all_or_inside_brackets_continues_its_statement():
    text = "WITH s AS (SELECT a FROM i) SELECT a INTO x FROM s UNION ALL SELECT a FROM j\nSELECT b INTO y FROM i"
    first, second = parse_query(text, "q")
    assert first.key == "union" and second.args["into"].this.name == "y"


def test_each_statement_reads_the_steps_it_names_and_the_steps_those_read():
    text = (
        "WITH a AS (SELECT v FROM i TIMESTAMP BY t), b AS (SELECT d, COUNT(*) AS n FROM a GROUP BY d, "
        "TumblingWindow(minute, 1)), c AS (SELECT v FROM j)\n"
        "SELECT * INTO o1 FROM b\nSELECT * INTO o2 FROM c\nSELECT * INTO o3 FROM i\n"
    )
    selects, steps = statement_steps(parse_query(text, "q"), refuse)
    assert [name for name, _, _ in steps] == ["a", "b", "c"]
    read = [(s.args["into"].this.name, needed) for s, needed in steps_read(selects, steps, refuse)]
    assert read == [("o1", {"a", "b"}), ("o2", {"c"}), ("o3", set())]


def test_more_outputs_than_a_stream_analytics_job_has_are_refused_at_the_first_one_too_many():
    text = "".join(f"SELECT v INTO o{i} FROM i\n" for i in range(61))
    selects, steps = statement_steps(parse_query(text, "q"), refuse)
    with pytest.raises(AssertionError, match="61 SELECT … INTO, more than 60"):
        steps_read(selects, steps, refuse)
