"""The one way a spec expression becomes a Spark column.

A spec's expressions are Spark SQL with Stream Analytics' meaning where the two differ —
``DATEDIFF`` counts unit boundaries crossed, ``DATEPART(week, t)`` counts Sunday-started weeks,
``SUBSTRING``, ``CHARINDEX`` and ``LEN`` are T-SQL's (:mod:`tidegate.jobspec.asa_functions`).
Every stage that evaluates a spec expression — filter, select, group_by, aggregates, having,
analytic functions, join and reference keys, an input's filter, steps, the event time — builds
it here, so the stream and the batch path read every expression alike.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from tidegate.jobspec.asa_functions import asa_text


def spec_column(expression: str) -> Column:
    """``expression`` (a spec's Spark SQL) as a column, with Stream Analytics' meaning of its functions."""
    return F.expr(asa_text(expression))
