"""The pieces of a Stream Analytics expression the translator recognises, and the Spark SQL
generator that writes a spec expression (``DATEADD`` and ``DATEDIFF`` in Stream Analytics' form,
which the spec reads so)."""

from __future__ import annotations

from typing import Any

from sqlglot import exp
from sqlglot.dialects.spark import Spark

from tidegate.jobspec.functions import AGGREGATE_FUNCTIONS, SCALAR_FUNCTIONS

REFUSED_CALLS = {  # Stream Analytics' functions without a Spark function of their name: what to write
    "getarrayelement": "element_at(a, i + 1)",
    "getarraylength": "size(a)",
    "getrecordpropertyvalue": "r.name",
    "topone": "max_by(struct(…), x) under aggregates",
    "collecttop": "CollectTop(n, x) OVER (ORDER BY k) in a windowed SELECT",
    "collect": "collect_list(struct(…)) under aggregates",
    "udf": "a Spark built-in (a spec calls no user functions)",
}
SPARK_NAMES = frozenset(n.lower() for n in SCALAR_FUNCTIONS | AGGREGATE_FUNCTIONS)


class SparkAsa(Spark.Generator):  # type: ignore[misc,valid-type]
    """Spark SQL, with ``DATEADD`` and ``DATEDIFF`` in Stream Analytics' form, which the spec
    reads so (sqlglot's own Spark forms count days)."""

    TRANSFORMS = {
        **Spark.Generator.TRANSFORMS,
        exp.DateAdd: lambda self, e: self.func("DATEADD", e.unit, e.expression, e.this),
        exp.DateDiff: lambda self, e: self.func("DATEDIFF", e.unit, e.expression, e.this),
    }


def is_timestamp(node: Any) -> bool:
    """``System.Timestamp()``."""
    return (
        isinstance(node, exp.Dot)
        and isinstance(node.this, exp.Identifier)
        and node.this.name.lower() == "system"
        and isinstance(node.expression, exp.Anonymous)
        and str(node.expression.this).lower() == "timestamp"
    )


def anonymous_aggregate(node: exp.Expr) -> bool:
    return isinstance(node, exp.Anonymous) and str(node.this).lower() in AGGREGATE_FUNCTIONS


NUMERIC_PARENTS = (exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Stddev, exp.Variance, exp.Add, exp.Sub, exp.Mul, exp.Div)
