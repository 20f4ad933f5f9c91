"""Patterns are refused before they can backtrack for ever in Java's engine."""

from __future__ import annotations

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec.regex_cost import check_pattern, like_pattern, pattern_problem


@pytest.mark.parametrize(
    "pattern, says",
    [
        ("(a|a)*b", "branches can start alike"),
        ("(a|ab)+c", "branches can start alike"),
        ("(\\w|\\d)+x", "branches can start alike"),  # one character each: not merged into [\w\d]
        ("([a-z]|x)*y", "branches can start alike"),
        ("(a+)+$", "repetition inside a repetition"),
        ("(a*)*b", "match nothing"),
        ("(\\w+\\s?)+$", "repetition inside a repetition"),
        ("(x+x+)+y", "repetition inside a repetition"),
        ("(a?)*", "match nothing"),
        (".*a.*b", "power 3"),
        ("(.*a){12}", "power"),
        ("\\d+\\d+\\d+x", "power"),
        ("(a)\\1", "linear-time engine"),
        ("a(?=b)", "linear-time engine"),
        ("(?<!a)b", "linear-time engine"),
        ("a*+b", "linear-time engine"),
        ("(?>a+)b", "linear-time engine"),
    ],
)
def test_a_pattern_that_backtracks_without_bound_is_refused_with_the_reason(pattern, says):
    assert says in pattern_problem(pattern)


@pytest.mark.parametrize(
    "pattern",
    [
        "^dev-[0-9]+$",
        "(a|b)+x",
        "([|]|a)+",
        "[^]|]+(c|d)*",
        "([0-9]+)-([0-9]+)",
        ".*error.*",  # what follows the last repetition never fails: a search is quadratic at most
        "^(\\w+)@(\\w+)\\.(\\w+)$",  # repetitions that cannot take each other's characters
        "\\d+\\.\\d+",
        "(\\d{1,3}\\.){3}\\d{1,3}",
        "[a-z]+",
        "\\p{L}+",
        "(?i)temp(erature)?",
    ],
)
def test_the_patterns_people_write_are_accepted(pattern):
    assert pattern_problem(pattern) == ""


@pytest.mark.parametrize(
    "like, accepted",
    [("%error%", True), ("abc%", True), ("a%b", True), ("%a%b%c%", False), ("%a_b%c%d%", False)],
)
def test_a_like_pattern_is_held_to_the_same_rules_as_the_regular_expression_spark_makes_of_it(like, accepted):
    assert (pattern_problem(like_pattern(like)) == "") is accepted


def test_a_pattern_computed_from_the_event_is_refused():
    with pytest.raises(ConfigError, match="takes its pattern as a string literal"):
        check_pattern(None, "rlike()", "filter", "text rlike deviceId")


def test_the_refusal_quotes_an_excerpt_of_a_long_pattern():
    with pytest.raises(ConfigError) as err:
        check_pattern("(a|a)*" + "b" * 100_000, "rlike()", "filter", "x rlike '…'")
    assert len(str(err.value)) < 2_000
