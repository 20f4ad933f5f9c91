"""``TopOne`` in a windowed SELECT becomes ``max_by``/``min_by`` over a struct of its keys, ties
broken by log position; what it cannot be is refused at its line and column."""

from __future__ import annotations

import pytest

from tidegate.asa.translate import translate
from tidegate.errors import ConfigError

QUERY = "SELECT d, {call} AS t INTO o FROM i TIMESTAMP BY e GROUP BY d, TumblingWindow(minute, 1)"


def aggregate(call: str, payloads=None) -> str:
    (t,) = translate(QUERY.format(call=call), "q.asaql", payloads=payloads)
    return t.steps[0].fields["aggregates"]["t"]


def test_topone_desc_is_max_by_and_asc_min_by_each_tied_by_the_log_position():
    assert aggregate("TopOne(v) OVER (ORDER BY v DESC, w DESC)") == "max_by(v, struct(v, w, -partition, -offset))"
    assert aggregate("TopOne(e) OVER (ORDER BY v)") == "min_by(e, struct(v, partition, offset))"


def test_topone_without_an_argument_is_the_whole_event_the_side_file_describes():
    got = aggregate("TopOne() OVER (ORDER BY v DESC)", payloads={"I": ["d", "e", "v"]})
    assert got == "max_by(struct(`d`, `e`, `v`), struct(v, -partition, -offset))"


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        ("TopOne() OVER (ORDER BY v DESC)", "TopOne() returns the whole event"),
        ("TopOne(v) OVER (ORDER BY v ASC, w DESC)", "ordered ASC by one key and DESC by another"),
        ("CollectTop(2) OVER (ORDER BY v DESC)", "CollectTop(…) OVER (…) is not supported"),
        ("TopOne(v) OVER (PARTITION BY d ORDER BY v LIMIT DURATION(minute, 1))", "TopOne over a duration"),
    ],
)
def test_what_topone_cannot_be_is_refused_with_its_line_and_column(call, problem):
    with pytest.raises(ConfigError) as err:
        translate(QUERY.format(call=call), "q.asaql")
    assert str(err.value).startswith("q.asaql:1:") and problem in str(err.value)


def test_a_payload_field_with_a_backquote_stays_one_quoted_name():
    got = aggregate("TopOne() OVER (ORDER BY v DESC)", payloads={"i": ["a`b", "v"]})
    assert got == "max_by(struct(`a``b`, `v`), struct(v, -partition, -offset))"
