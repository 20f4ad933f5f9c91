"""A spec expression read as a parse tree: what it may be made of, and how much it may build.

Job specs are written by job authors, not administrators, and their expressions run inside
the platform's Spark sessions. Finding calls in the token stream
(:mod:`tidegate.jobspec.expressions`) says which functions an expression calls; this module
says what the expression *is*. It parses the text with a Spark SQL grammar (sqlglot's
``spark`` dialect: pure Python, so the controller and Airflow check specs without a JVM) and
holds every node of the tree to two rules:

* **What it is made of.** Every node is of a kind on :data:`ALLOWED_NODES`: columns,
  literals, operators, calls of functions, casts, ``CASE``, lambdas and the few clauses an
  aggregate takes (``FILTER (WHERE …)``, ``WITHIN GROUP (ORDER BY …)``, ``DISTINCT``).
  Anything that reads beyond the event — a subquery in any form (``SELECT``, ``FROM``-first,
  ``TABLE``, ``VALUES``, ``EXISTS``, ``IN (…)``), a table or file, a table-valued function,
  a window (``OVER``), a parameter or a session variable — is refused, naming the field, the
  construct and what to write instead. Text the grammar cannot read is refused too: what is
  not understood is not run.
* **How much it builds and how long it runs.** One event must not make a gigabyte or keep a
  core busy for minutes: :mod:`tidegate.jobspec.expression_cost` bounds what the expression
  builds, all nesting composed, and the work of its patterns and edit distances
  (:mod:`tidegate.jobspec.regex_cost`), against the operator's limits
  (:mod:`tidegate.jobspec.limits`). Here, the folds (``aggregate``, ``reduce``), whose
  accumulator can double per element, are refused, and a lambda's body computes from its own
  parameters and literals only, with no builder or lambda inside it.

The grammar is not Spark's own, so it is never the only gate: the token checks of
:mod:`tidegate.jobspec.expressions` run first (and refuse ``${``, comments and the words
that start a query), and every Spark session Tidegate builds parses each expression again
with Spark's parser before it runs (:mod:`tidegate.spark.expression_guard`) and turns
variable substitution and SQL on files off (:mod:`tidegate.spark.session`).
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from tidegate.errors import ConfigError, excerpt
from tidegate.jobspec.expression_cost import check_cost
from tidegate.jobspec.functions import check_function
from tidegate.jobspec.limits import SpecLimits, spec_limits

# -- what an expression may be made of ---------------------------------------------------
ALLOWED_NODES: tuple[type[exp.Expr], ...] = (
    exp.Column,
    exp.Identifier,
    exp.Literal,
    exp.Null,
    exp.Boolean,
    exp.Star,
    exp.Var,
    exp.DataType,
    exp.DataTypeParam,
    exp.ColumnDef,  # cast(x AS struct<a: decimal(10, 2)>)
    exp.Interval,
    exp.Bracket,
    exp.Tuple,
    exp.In,
    exp.Between,
    exp.Lambda,
    exp.Filter,
    exp.Where,  # count(*) FILTER (WHERE …)
    exp.WithinGroup,
    exp.Order,
    exp.Ordered,  # percentile_cont(0.5) WITHIN GROUP (ORDER BY t)
    exp.IgnoreNulls,
    exp.RespectNulls,
    exp.Distinct,
    exp.Any,  # x LIKE ANY ('a%', 'b%'); over a query it is refused below
    exp.JSONPath,
    exp.JSONPathPart,  # get_json_object(x, '$.a'): the path literal, read
    exp.Binary,
    exp.Unary,  # operators, comparisons, field access, parentheses, NOT, minus
    exp.Func,  # calls: their names are held to tidegate.jobspec.functions' allowlist
)  # EXISTS (…) over a query is refused through the query inside it; exists(xs, x -> …) is a call
# kinds refused although a base kind above would admit them, with what each is in words
_REFUSED_NODES: tuple[tuple[type[exp.Expr], str], ...] = (
    (exp.Query, "a subquery"),
    (exp.Subquery, "a subquery"),
    (exp.Table, "a table or file"),
    (exp.From, "a FROM clause"),
    (exp.UDTF, "a table-valued function"),
    (exp.Window, "a window function (OVER …)"),
    (exp.Placeholder, "a parameter"),
    (exp.Parameter, "a parameter"),
    (exp.SessionParameter, "a session variable"),
)
_SUBQUERY_FIX = (
    "compute from the event's own columns; a job reads its events, never tables or files"
    " (to enrich events, join another input); a payload field named like a keyword is written `in backticks`"
)


def check_tree(expr: str, where: str, limits: SpecLimits | None = None) -> None:
    """Parse ``expr`` (field ``where``) and hold its tree to this module's two rules.
    Raises ConfigError naming the field, the construct and the fix."""
    tree = _parse(expr, where)
    for node in tree.walk():
        _check_node(node, where, expr)
    for node in tree.find_all(exp.Lambda):
        _check_lambda(node, where, expr)
    check_cost(tree, where, expr, limits or spec_limits())


def _parse(expr: str, where: str) -> exp.Expr:
    try:
        tree = sqlglot.parse_one(expr, read="spark")
    except SqlglotError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(
            f"{where}: cannot read {excerpt(expr)} as a Spark SQL expression ({first[:200]})",
            "write one Spark SQL expression over the event's columns; check brackets, quotes and commas",
        ) from None
    if tree is None:
        raise ConfigError(f"{where}: the expression is empty", "write a Spark SQL expression, e.g. temperature > 30")
    return tree


def _check_node(node: exp.Expr, where: str, expr: str) -> None:
    for kind, what in _REFUSED_NODES:
        if isinstance(node, kind):
            raise ConfigError(
                f"{where}: {what} is not allowed in {excerpt(expr)}: subqueries are not allowed", _SUBQUERY_FIX
            )
    if isinstance(node, exp.Any) and not isinstance(node.this, (exp.Tuple, exp.Paren, exp.Literal)):
        raise ConfigError(
            f"{where}: ANY over a query is not allowed in {excerpt(expr)}: subqueries are not allowed", _SUBQUERY_FIX
        )
    if isinstance(node, exp.In) and (node.args.get("query") is not None or node.args.get("unnest") is not None):
        raise ConfigError(
            f"{where}: IN over a query is not allowed in {excerpt(expr)}: subqueries are not allowed", _SUBQUERY_FIX
        )
    if not isinstance(node, ALLOWED_NODES) or isinstance(node, exp.Alias):
        raise ConfigError(
            f"{where}: {_kind(node)} is not allowed in {excerpt(expr)}",
            "spec expressions are computed from the event's columns: operators, casts, CASE and"
            " Spark's built-in functions (docs/reference/jobspec.md, 'Functions')",
        )
    if isinstance(node, exp.Anonymous):  # a call the grammar does not know by name
        check_function(node.name.lower(), where, aggregates=True)
    if isinstance(node, exp.Reduce):
        raise ConfigError(
            f"{where}: aggregate()/reduce() is not allowed in {excerpt(expr)}: its accumulator can grow without bound"
            " (concat(acc, acc) doubles it per element)",
            "use the array functions that return one value: array_max, array_min, array_join, size, filter, exists",
        )


def _kind(node: exp.Expr) -> str:
    words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", type(node).__name__).lower()
    return f"{excerpt(words)} ({node.sql(dialect='spark')[:60]!r})"


def _check_lambda(node: exp.Lambda, where: str, expr: str) -> None:
    params = {p.name.lower() for p in node.expressions}
    body = node.this
    for inner in body.walk():
        if inner is body and isinstance(inner, exp.Lambda):
            continue
        if (
            isinstance(inner, exp.Lambda)
            or isinstance(
                inner, (exp.GenerateSeries, exp.Repeat, exp.Pad, exp.Space, exp.ArrayInsert, exp.Split, exp.Transform)
            )
            or (isinstance(inner, exp.Anonymous) and inner.name.lower() in ("array_repeat", "str_to_map"))
        ):
            raise ConfigError(
                f"{where}: a lambda may not build arrays or strings or hold another lambda in {excerpt(expr)}:"
                " applied per element, it multiplies what one event builds",
                "compute each element from the lambda's own parameters, e.g. transform(xs, x -> x * 2)",
            )
        root = inner.parts[0].name if isinstance(inner, exp.Column) and inner.parts else ""
        if isinstance(inner, exp.Column) and root.lower() not in params:
            raise ConfigError(
                f"{where}: the lambda in {excerpt(expr)} reads the column {excerpt(root)};"
                " a lambda's body reads only its own parameters",
                "compute the column's part outside the lambda, or filter first and compare after",
            )
