"""What one expression may build for one event: bounds composed through nesting, against the limits."""

from __future__ import annotations

import pytest
import sqlglot

from tidegate.errors import ConfigError
from tidegate.jobspec.expression_bounds import rule_name as _rule_name
from tidegate.jobspec.expression_cost import RULES, check_cost
from tidegate.jobspec.functions import ASA_FUNCTIONS, SCALAR_FUNCTIONS
from tidegate.jobspec.limits import SpecLimits

LIMITS = SpecLimits()


def bound(expr: str, limits: SpecLimits = LIMITS):
    return check_cost(sqlglot.parse_one(expr, read="spark"), "select.x", expr, limits)


def refusal(expr: str, limits: SpecLimits = LIMITS) -> str:
    with pytest.raises(ConfigError) as err:
        bound(expr, limits)
    return str(err.value)


# expression → (copies of the event's text, characters from literals and counts)
@pytest.mark.parametrize(
    "expr, copies, built",
    [
        ("text", 1, 0),
        ("concat(a, b)", 1, 0),  # two fields of one payload: together at most the payload
        ("concat(a, a)", 2, 0),
        ("concat(a, '-', a)", 2, 1),
        ("repeat('ab', 100)", 0, 200),
        ("repeat(repeat('a', 10000), 16)", 0, 160_000),
        ("repeat(text, 3)", 3, 0),
        ("upper(text)", 3, 0),  # a character's upper case may be three (ß → SS, ŉ → ʼN)
        ("to_json(named_struct('t', text))", 6, 64),  # \u0000 escapes: six characters for one
        ("regexp_replace(text, '(.)', '$1$1')", 3, 0),
        ("regexp_replace(text, 'a', 'xyz')", 4, 3),
        ("lpad(text, 20, '0')", 0, 80),
        ("left(concat(a, a, a), 10)", 0, 40),
        ("transform(split(tags, ','), t -> concat(t, '!'))", 2, 1),  # one '!' per piece: one per character, and one
        ("transform(split(tags, ','), t -> concat(t, t))", 2, 0),
        ("array_repeat('x', 100)", 0, 100),
        ("format_string('%5s|%5s', a, b)", 8, 81),  # each %s: its argument's text form, a container's brackets too
    ],
)
def test_the_bound_composes_through_every_nesting(expr, copies, built):
    got = bound(expr).chars
    assert (got.copies, got.const) == (copies, built)


def test_the_five_level_repeat_of_the_review_is_refused_at_its_third_level():
    message = refusal("repeat(repeat(repeat(repeat(repeat('a',10000),16),16),16),16)")
    assert "could build 2,560,000 characters from its literals and counts, more than 1,000,000" in message


@pytest.mark.parametrize(
    "expr, says",
    [
        ("array_repeat(array_repeat(deviceId, 10000), 10000)", "copies of the event"),
        ("array_repeat(array_repeat('x', 10000), 10000)", "100,000,000 characters"),
        ("format_string('%1$2000000000s', 'a')", "a width of 2,000,000,000"),
        ("format_string('" + "%1$s" * 40 + "', text)", "copies of the event"),
        ("regexp_replace(x, '(.)', repeat('$1', 5000))", "replacement as a string literal"),
        ("regexp_replace(x, '(.)', '" + "$1" * 70 + "')", "copies of the event"),
        ("lpad(d, 10, repeat(text, 100))", "copies of the event"),  # the padding is built, then cut
        ("repeat(text, cast(n AS int))", "repeat() takes its count as an integer literal"),
        ("repeat(text, 100000)", "more than 10,000"),
        ("sequence(1, 2000000000)", "more than 10,000"),
        ("concat_ws(text, split(tags, ','))", "separator computed from the event"),
        ("array_join(split(tags, ''), text)", "separator computed from the event"),
        ("replace(text, '', tags)", "square of the event"),
        ("levenshtein(text, tags)", "grows with the event"),
        ("levenshtein(left(a, 10000), left(b, 10000))", "10,000,000 cells"),
    ],
)
def test_what_passes_a_limit_is_refused_naming_the_field_and_the_fix(expr, says):
    message = refusal(expr)
    assert message.startswith("select.x: ") and says in message and " — " in message
    assert len(message) < 2_000


def test_an_operator_can_raise_a_limit_and_only_then_the_expression_loads():
    expr = "concat(repeat(text, 40), repeat(text, 40))"
    assert "TIDEGATE_LIMIT_COPIES_OF_THE_EVENT" in refusal(expr)
    assert bound(expr, SpecLimits(copies_of_the_event=100)).chars.copies == 80


def test_every_function_on_the_allowlist_has_its_own_rule():
    """A function with no rule would be bounded as the sum of its arguments: right for many,
    wrong for a builder. So each one is named in a rule, and a new one cannot slip in."""
    structural = {"Paren", "Reduce"}  # div parses as an operator in brackets; reduce is refused whole
    missing = []
    for name in sorted((SCALAR_FUNCTIONS | ASA_FUNCTIONS) - {"between"}):  # BETWEEN is syntax: a predicate
        for args in ("a, b, c", "a, b", "a", "", "a, x -> x", "a AS string", "year FROM a"):
            try:
                tree = sqlglot.parse_one(f"{name}({args})", read="spark")
                break
            except (sqlglot.errors.SqlglotError, IndexError):  # a form of too few arguments
                continue
        else:
            missing.append(f"{name} (unparsed)")
            continue
        if _rule_name(tree) not in RULES and _rule_name(tree) not in structural:
            missing.append(f"{name} → {_rule_name(tree)}")
    assert missing == []
