"""Expressions in a job spec may call only Spark SQL functions on Tidegate's allowlist.

A spec's ``filter``, ``select``, ``group_by`` and ``aggregates`` are Spark SQL run by the
engine. Spark SQL can call Java (``reflect``, ``java_method``), fail a job on purpose, read
files, draw random numbers, or hide a call in a comment or a subquery; a spec must not. The
check runs when the spec is parsed, without a JVM, so it must see every call Spark would see:
any case, spacing, backquotes, qualified names, nested calls, lambdas, raw strings.
"""

from __future__ import annotations

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec import parse_spec

JAVA = "'java.lang.System', 'exit', 0"
PAYLOAD = {"deviceId": "string", "eventTime": "string", "temperature": "double", "tags": "string"}


def per_event(**fields) -> dict:
    return {"name": "expr-test", "version": 1, "payload": dict(PAYLOAD), "timestamp_by": "eventTime", **fields}


def windowed(**fields) -> dict:
    return per_event(window={"kind": "tumbling", "size": "1m"}, **{"aggregates": {"events": "count(*)"}, **fields})


def error_of(data: dict) -> str:
    with pytest.raises(ConfigError) as info:
        parse_spec(data, origin="job.yaml")
    message = str(info.value)
    assert message.startswith("job.yaml: ") and " — " in message  # where, problem — fix
    return message


# every place a spec holds an expression: (field path in the message, spec with the expression)
PLACES = {
    "filter": lambda e: ("filter", per_event(filter=f"{e} IS NULL")),
    "select": lambda e: ("select.x", per_event(select={"x": e})),
    "group_by": lambda e: ("group_by[0].g", windowed(group_by=[{"g": e}])),
    "aggregates": lambda e: ("aggregates.a", windowed(aggregates={"a": f"max({e})"})),
}


@pytest.mark.parametrize("function", ["reflect", "java_method", "try_reflect"])
@pytest.mark.parametrize("place", list(PLACES))
def test_a_call_into_java_is_refused_in_every_expression_field_naming_the_function_and_field(place, function):
    where, data = PLACES[place](f"{function}({JAVA})")
    message = error_of(data)
    assert f"{where}: {function}() is not allowed" in message
    assert "Java" in message


@pytest.mark.parametrize(
    "expr, refused",
    [
        (f"REFLECT({JAVA}) IS NULL", "reflect"),  # any case
        (f"Java_Method \n ({JAVA}) IS NULL", "java_method"),  # space and a line break before (
        (f"`reflect`({JAVA}) IS NULL", "reflect"),  # a backquoted function name
        (f"system.builtin.reflect({JAVA}) IS NULL", "system.builtin.reflect"),  # qualified
        (f"`system`.`builtin`.`reflect`({JAVA}) IS NULL", "system.builtin.reflect"),
        (f"upper(cast(java_method({JAVA}) AS string)) = 'X'", "java_method"),  # nested
        (f"size(transform(array(1), x -> reflect({JAVA}))) > 0", "reflect"),  # inside a lambda
        (f"identifier('reflect')({JAVA}) IS NULL", "identifier"),  # a name computed from a string
        ("raise_error('stop the job') IS NULL", "raise_error"),
        ("assert_true(temperature > 0) IS NULL", "assert_true"),
        ("input_file_name() = ''", "input_file_name"),
        ("rand() > 0.5", "rand"),  # a replay would not repeat it
        ("uuid() = deviceId", "uuid"),
        ("xpath_string(deviceId, '/a') = ''", "xpath_string"),
        ("from_protobuf(cast(deviceId AS binary), 'M', '/etc/desc') IS NULL", "from_protobuf"),  # reads a file
        ("size(explode(array(1))) > 0", "explode"),  # a generator: one event, many rows
        ("my_udf(deviceId) = 1", "my_udf"),  # not a Spark built-in: a UDF or catalog function
    ],
)
def test_a_refused_call_is_found_however_it_is_written(expr, refused):
    message = error_of(per_event(filter=expr))
    assert f"filter: {refused}() is not " in message


def test_a_call_hidden_by_a_raw_string_is_found():
    # Spark reads r'\' as the one-character string \ (no escapes in raw strings), so what
    # follows is code, not the rest of a string
    data = per_event(filter="deviceId = r'\\' OR reflect(deviceId, deviceId) IS NULL")
    assert "filter: reflect() is not allowed" in error_of(data)


def test_a_call_hidden_behind_a_comment_is_refused():
    # with a payload field named reflect, reflect/**/(...) still calls the function in Spark
    data = per_event(filter=f"reflect/**/({JAVA}) IS NULL", payload={**PAYLOAD, "reflect": "string"})
    message = error_of(data)
    assert "filter: comments" in message and "/*" in message


@pytest.mark.parametrize(
    "expr",
    [
        "temperature > 0 -- and the rest is ignored by Spark",
        "temperature > 0 /*+ a hint */",
        "temperature --5 > 0",  # Spark reads -- as a comment, not as minus minus
    ],
)
def test_comments_are_refused_because_spark_would_read_less_than_was_checked(expr):
    assert "filter: comments" in error_of(per_event(filter=expr))


@pytest.mark.parametrize(
    "expr",
    [
        "temperature IN (SELECT max(temperature) FROM readings)",
        "EXISTS (SELECT 1)",
        "deviceId = (TABLE devices)",
        "deviceId IN (VALUES ('a'), ('b'))",
    ],
)
def test_subqueries_are_refused(expr):
    assert "filter: subqueries are not allowed" in error_of(per_event(filter=expr))


@pytest.mark.parametrize(
    "data, where, function",
    [
        (per_event(filter="avg(temperature) > 0"), "filter", "avg"),
        (per_event(select={"m": "max(temperature)"}), "select.m", "max"),
        (windowed(group_by=[{"n": "count(*)"}]), "group_by[0].n", "count"),
    ],
)
def test_aggregate_functions_belong_under_aggregates_only(data, where, function):
    message = error_of(data)
    assert f"{where}: {function}() is an aggregate function" in message and "aggregates" in message


@pytest.mark.parametrize(
    "expr",
    ["row_number() OVER (ORDER BY offset)", "sum(temperature) OVER (PARTITION BY deviceId)"],
)
def test_window_functions_and_over_clauses_are_refused(expr):
    message = error_of(per_event(select={"w": expr}))
    assert "select.w: " in message and ("OVER" in message or "row_number()" in message)


def test_an_aggregate_needs_an_aggregate_function_not_just_any_call():
    message = error_of(windowed(aggregates={"u": "upper(deviceId)"}))
    assert "aggregates.u: 'upper(deviceId)' is not an aggregate" in message and "count" in message


def test_a_misspelt_function_gets_the_closest_allowed_name():
    message = error_of(per_event(filter="uper(deviceId) = 'X'"))
    assert "filter: uper() is not a function Tidegate allows" in message and "did you mean upper?" in message


@pytest.mark.parametrize(
    "expr",
    [
        "deviceId = 'reflect(1)' OR deviceId = \"java_method('x')\"",  # calls inside strings are text
        "`reflect` > 0",  # a column named reflect (backquoted, no call)
        "deviceId LIKE ANY ('dev-00%', 'dev-01%')",  # ANY here is not the aggregate
        "cast(temperature AS decimal(10, 2)) > 0 AND try_cast(deviceId AS int) IS NULL",  # types, not calls
        "temperature::decimal(10,2) > 0",
        "coalesce(nullif(temperature, 0), abs(temperature), 1) > 0",
        "date_trunc('MINUTE', to_timestamp(eventTime)) < current_timestamp()",
        "if(temperature > 30, upper(deviceId), lower(deviceId)) RLIKE '^DEV'",
        "size(filter(split(tags, ','), t -> t != '')) > 0 AND exists(split(tags, ','), t -> t = 'x')",
        "regexp_replace(deviceId, '--', '') != '' AND deviceId != '/* no comment */'",
    ],
)
def test_allowed_spark_sql_still_parses(expr):
    data = per_event(filter=expr, payload={**PAYLOAD, "reflect": "double"})
    assert parse_spec(data).filter


@pytest.mark.parametrize(
    "aggregate",
    [
        "count(*) FILTER (WHERE temperature > 30)",
        "percentile_cont(0.5) WITHIN GROUP (ORDER BY temperature)",
        "approx_percentile(temperature, 0.95)",
        "max(temperature) - min(temperature)",
        "round(avg(temperature), 1)",
        "count(DISTINCT deviceId)",
    ],
)
def test_aggregates_take_spark_aggregate_functions(aggregate):
    assert parse_spec(windowed(aggregates={"a": aggregate})).aggregates == (("a", aggregate),)


# -- held to Spark itself ----------------------------------------------------------------

# Spark's parser builds these from syntax (cast(x AS t), TIMESTAMPADD(…)), not from its registry
PARSER_FORMS = {"try_cast", "timestampadd", "timestampdiff"}
CORPUS = [
    f"REFLECT({JAVA}) IS NULL",
    f"Java_Method \n ({JAVA}) IS NULL",
    f"`reflect`({JAVA}) IS NULL",
    f"upper(cast(java_method({JAVA}) AS string)) = 'X'",
    f"size(transform(array(1), x -> reflect({JAVA}))) > 0",
    "deviceId = r'\\' OR reflect(deviceId, deviceId) IS NULL",
    "R'abc' = deviceId AND r\"a\\\" = deviceId",
    "deviceId = 'reflect(1)' OR deviceId = \"java_method('x')\" OR `reflect` > 0",
    "deviceId LIKE ANY ('dev-00%', 'dev-01%') AND deviceId LIKE ('a%')",
    "cast(t AS decimal(10, 2)) > 0 AND try_cast(d AS int) IS NULL AND t::decimal(10,2) > cast(t AS varchar(10))",
    "cast(x AS array<decimal(10,2)>) IS NULL AND cast(x AS struct<a: decimal(10,2), b: string>) IS NULL",
    "if(t > 30, upper(d), lower(d)) RLIKE '^DEV' AND coalesce(nullif(t, 0), abs(t), 1) > 0",
    "size(filter(split(tags, ','), t -> t != '')) > 0 AND exists(split(tags, ','), t -> t = 'x')",
    "count(*) FILTER (WHERE filter(xs, x -> x > 0) IS NOT NULL)",
    "percentile_cont(0.5) WITHIN GROUP (ORDER BY t) + round(avg(t), 1) + count(DISTINCT d)",
    "extract(YEAR FROM a) + position('a' IN d) + length(trim(BOTH 'x' FROM d)) + length(substring(d FROM 1 FOR 2))",
    "timestampadd(MINUTE, 5, a) > a AND timestampdiff(SECOND, a, a) = 0 AND overlay(d PLACING 'x' FROM 2) = d",
    "CASE (x) WHEN (1) THEN (2) ELSE (3) END = 1 AND x BETWEEN (1) AND (2) AND NOT (x IN (1, 2))",
    "date_trunc('MINUTE', current_timestamp) <= a + INTERVAL 5 MINUTES AND current_date() = current_date",
    "first(t) IGNORE NULLS + any(t > 0) + some(t > 0) + every(t > 0) + aggregate(xs, 0, (acc, x) -> acc + x)",
    "`upper`(d) = left(d, 2) || right(d, 2) || string(1) || named_struct('a', 1).a || map('a', 1)['a']",
    "x DIV 2 + div(x, 2) + e() + pi() + 1e3reflect(1)",
]


@pytest.mark.spark
@pytest.mark.parametrize("expr", CORPUS)
def test_every_call_sparks_parser_finds_is_one_the_check_found(spark, expr):
    """The check runs without Spark; its tokenizer must not miss a call Spark would make."""
    from tidegate.jobspec.expressions import function_calls

    parser = spark._jsparkSession.sessionState().sqlParser()
    found, stack = set(), [parser.parseExpression(expr)]
    while stack:
        node = stack.pop()
        if node.getClass().getSimpleName() == "UnresolvedFunction":
            found.add(node.nameParts().mkString(".").lower())
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
    missed = found - set(function_calls(expr))
    assert missed <= {"between"}  # x BETWEEN a AND b: syntax, and an allowed function


@pytest.mark.spark
def test_the_allowlist_names_only_spark_built_ins_of_the_right_kind(spark):
    from tidegate.jobspec.functions import _REFUSED, AGGREGATE_FUNCTIONS, SCALAR_FUNCTIONS

    registry = spark._jvm.org.apache.spark.sql.catalyst.analysis.FunctionRegistry.builtin()
    groups = {}
    names = registry.listFunction().iterator()
    while names.hasNext():
        fid = names.next()
        groups[fid.funcName()] = registry.lookupFunction(fid).get().getGroup() or ""
    assert not (SCALAR_FUNCTIONS - PARSER_FORMS) - set(groups)  # no UDF or catalog function by accident
    assert not set(_REFUSED) - {"identifier"} - set(groups)
    assert {groups[n] for n in AGGREGATE_FUNCTIONS} == {"agg_funcs"}
    not_scalar = ("agg_funcs", "window_funcs", "generator_funcs")
    assert not {n for n in SCALAR_FUNCTIONS - PARSER_FORMS if groups[n] in not_scalar}
    assert not (SCALAR_FUNCTIONS | AGGREGATE_FUNCTIONS) & set(_REFUSED)
