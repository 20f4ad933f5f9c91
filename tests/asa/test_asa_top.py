"""``TopOne`` in a windowed SELECT becomes ``max_by``/``min_by`` over a struct of its keys, ties
broken by log position, and ``CollectTop(n)`` the first n of the window's events sorted the same
way; what they cannot be is refused at its line and column."""

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


def test_collecttop_sorts_the_windows_events_by_the_keys_and_log_position_and_ranks_the_first_n():
    ranked = "(top_, rank_) -> named_struct('rank', CAST(rank_ + 1 AS BIGINT), 'value', top_.v)"
    events = "array_sort(collect_list(named_struct('o', struct(v, {position}), 'v', {value})))"
    assert aggregate("CollectTop(3, e) OVER (ORDER BY v)") == (
        f"transform(slice({events.format(position='partition, offset', value='e')}, 1, 3), {ranked})"
    )
    whole = aggregate("CollectTop(2) OVER (ORDER BY v DESC)", payloads={"I": ["d", "v"]})
    events = events.format(position="-partition, -offset", value="struct(`d`, `v`)")
    assert whole == f"transform(slice(reverse({events}), 1, 2), {ranked})"


def test_topone_without_an_argument_is_the_whole_event_the_side_file_describes():
    got = aggregate("TopOne() OVER (ORDER BY v DESC)", payloads={"I": ["d", "e", "v"]})
    assert got == "max_by(struct(`d`, `e`, `v`), struct(v, -partition, -offset))"


PER_EVENT = "SELECT d, {call} AS t INTO o FROM i TIMESTAMP BY e"  # a SELECT without a window


@pytest.mark.parametrize(
    ("query", "call", "problem"),
    [
        (QUERY, "TopOne() OVER (ORDER BY v DESC)", "TopOne() returns the whole event"),
        (QUERY, "TopOne(v) OVER (ORDER BY v ASC, w DESC)", "ordered ASC by one key and DESC by another"),
        (QUERY, "CollectTop(2) OVER (ORDER BY v DESC)", "CollectTop(n) returns the whole event"),
        (QUERY, "CollectTop(0, v) OVER (ORDER BY v)", "number of events is not a whole number literal from 1 to 1,000"),
        (QUERY, "CollectTop(v, v) OVER (ORDER BY v)", "number of events is not a whole number literal"),
        (QUERY, "CollectTop(1001, v) OVER (ORDER BY v)", "from 1 to 1,000"),
        (
            QUERY,
            "CollectTop(2, v) OVER (ORDER BY v ASC, w DESC)",
            "CollectTop ordered ASC by one key and DESC by another",
        ),
        (
            QUERY,
            "CollectTop(2, v) OVER (PARTITION BY d ORDER BY v LIMIT DURATION(minute, 1))",
            "analytic function in a windowed",
        ),
        (
            QUERY,
            "TopOne(v) OVER (PARTITION BY d ORDER BY v LIMIT DURATION(minute, 1))",
            "analytic function in a windowed",
        ),
        (
            PER_EVENT,
            "CollectTop(2, v) OVER (PARTITION BY d ORDER BY v ASC, w DESC LIMIT DURATION(minute, 1))",
            "CollectTop ordered ASC by one key and DESC",
        ),
        (PER_EVENT, "CollectTop(0, v) OVER (ORDER BY v LIMIT DURATION(minute, 1))", "from 1 to 1,000"),
        (PER_EVENT, "CollectTop(2) OVER (ORDER BY v LIMIT DURATION(minute, 1))", "CollectTop(n) returns the whole"),
        (PER_EVENT, "CollectTop(2, v) OVER (PARTITION BY d ORDER BY v)", "CollectTop on each event without LIMIT"),
        (
            PER_EVENT,
            "TopOne(v) OVER (ORDER BY v ASC, w DESC LIMIT DURATION(minute, 1))",
            "ordered ASC by one key and DESC",
        ),
        (PER_EVENT, "TopOne() OVER (ORDER BY v LIMIT DURATION(minute, 1))", "TopOne() returns the whole event"),
        (PER_EVENT, "TopOne(v) OVER (ORDER BY v)", "TopOne on each event without LIMIT DURATION"),
        (PER_EVENT, "LAG(v) OVER (PARTITION BY d ORDER BY v LIMIT DURATION(minute, 1))", "ORDER BY in OVER"),
    ],
)
def test_what_topone_and_collecttop_cannot_be_is_refused_with_its_line_and_column(query, call, problem):
    with pytest.raises(ConfigError) as err:
        translate(query.format(call=call), "q.asaql")
    assert str(err.value).startswith("q.asaql:1:") and problem in str(err.value)


def test_a_payload_field_with_a_backquote_stays_one_quoted_name():
    got = aggregate("TopOne() OVER (ORDER BY v DESC)", payloads={"i": ["a`b", "v"]})
    assert got == "max_by(struct(`a``b`, `v`), struct(v, -partition, -offset))"


def test_topone_over_a_duration_is_the_extreme_record_of_key_nullness_key_position_and_value():
    (t,) = translate(PER_EVENT.format(call="TopOne(v) OVER (PARTITION BY d ORDER BY v DESC LIMIT DURATION(minute, 5))"),
                     "q.asaql")  # fmt: skip
    step = t.steps[0].fields
    assert step["analytics"] == {
        "t": "MAX(named_struct('n0', isnotnull(v), 'k0', v, 'p', -partition, 'o', -offset, 'v', v)) "
        "OVER (PARTITION BY d LIMIT DURATION(minute, 5))"
    }
    assert step["select"] == {"d": "d", "t": "t.v"}
    (asc,) = translate(
        PER_EVENT.format(call="TopOne() OVER (ORDER BY v, w LIMIT DURATION(hour, 1) WHEN v > 0)"),
        "q.asaql",
        payloads={"i": ["d", "v", "w"]},
    )
    assert asc.steps[0].fields["analytics"]["t"] == (
        "MIN(named_struct('n0', isnotnull(v), 'k0', v, 'n1', isnotnull(w), 'k1', w, 'p', partition, 'o', offset, "
        "'v', struct(`d`, `v`, `w`))) OVER (LIMIT DURATION(hour, 1) WHEN v > 0)"
    )


def test_collecttop_over_a_duration_is_the_n_extreme_records_numbered_from_1():
    (t,) = translate(
        PER_EVENT.format(call="CollectTop(3, v) OVER (PARTITION BY d ORDER BY v DESC LIMIT DURATION(minute, 5))"),
        "q.asaql",
    )
    step = t.steps[0].fields
    assert step["analytics"] == {
        "t": "MAX(named_struct('n0', isnotnull(v), 'k0', v, 'p', -partition, 'o', -offset, 'v', v), 3) "
        "OVER (PARTITION BY d LIMIT DURATION(minute, 5))"
    }
    assert step["select"] == {
        "d": "d",
        "t": "TRANSFORM(t, (top_, rank_) -> STRUCT(CAST(rank_ + 1 AS BIGINT) AS rank, top_.v AS value))",
    }
