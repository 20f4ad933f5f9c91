"""Spark's own parser reads every spec expression before a query runs: the last gate.

A spec's expressions were checked when it was loaded, without a JVM, on a grammar that is
not Spark's (:mod:`tidegate.jobspec.expression_tree`). Where that grammar and Spark's read
the same text differently, Spark's reading is the one that runs, so every Spark session
that runs a spec parses each expression again with Spark's parser and walks Catalyst's
tree before anything is planned:

* no plan inside an expression — a subquery in any form (``ScalarSubquery``, ``Exists``,
  ``ListQuery``, ``LateralSubquery``…: Catalyst's ``PlanExpression``), so no table, file or
  table-valued function can be read;
* every function called is on :mod:`tidegate.jobspec.functions`' allowlist (aggregates only
  in the ``aggregates`` field), named as Spark resolves it.

The session itself runs with variable substitution and SQL on files off
(:mod:`tidegate.spark.session`), so even a text that passed both would neither be rewritten
with ``${…}`` values nor read a path as a table.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from tidegate.errors import ConfigError
from tidegate.jobspec import JobSpec
from tidegate.jobspec.functions import check_function
from tidegate.jobspec.spec_expressions import spec_expressions
from tidegate.spark.gateway import jvm_class

_PLAN_EXPRESSION = "org.apache.spark.sql.catalyst.expressions.PlanExpression"
_PARSER_FORMS = frozenset(("try_cast", "timestampadd", "timestampdiff"))  # syntax in Spark, calls on the allowlist


def check_spec_with_spark(spark: SparkSession, spec: JobSpec) -> None:
    """Parse every expression of ``spec`` with ``spark``'s parser and refuse what must not run.
    Raises ConfigError naming the field and the construct."""
    for item in spec_expressions(spec):
        check_with_spark(spark, item.text, item.where, aggregates=item.aggregates)


def check_with_spark(spark: SparkSession, expr: str, where: str, *, aggregates: bool = False) -> list[str]:
    """Parse ``expr`` with Spark's parser; returns the functions it calls (lower-cased)."""
    plan_expression = jvm_class(spark, "java.lang.Class").forName(_PLAN_EXPRESSION)
    parser = spark._jsparkSession.sessionState().sqlParser()
    try:
        root = parser.parseExpression(expr)
    except Exception as exc:  # py4j's error carries Spark's ParseException text
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"{where}: Spark cannot parse {expr!r} ({first[:200]})",
            "write one Spark SQL expression over the event's columns",
        ) from None
    calls: list[str] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if plan_expression.isInstance(node):
            raise ConfigError(
                f"{where}: Spark reads a subquery ({node.getClass().getSimpleName()}) in {expr!r}: subqueries"
                " are not allowed",
                "compute from the event's own columns; a job reads its events, never tables or files",
            )
        if node.getClass().getSimpleName() == "UnresolvedFunction":
            name = node.nameParts().mkString(".").lower()
            if "." in name:
                raise ConfigError(
                    f"{where}: {name}() is not allowed: a qualified function name can name a catalog function",
                    "call Spark's built-in functions by their plain name",
                )
            if name not in _PARSER_FORMS:
                check_function(name, where, aggregates)
            calls.append(name)
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
    return calls
