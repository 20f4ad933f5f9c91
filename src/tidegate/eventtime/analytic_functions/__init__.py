"""The analytic functions, one module each, and their registry (:mod:`.base`).

Importing the package registers the built-in functions, in the order a spec's error lists
them: LAG, LAST, ISFIRST, then the aggregates over a duration
(SUM, AVG, MIN, MAX, COUNT). A new function is one module here — a subclass of
:class:`~tidegate.eventtime.analytic_functions.base.AnalyticFunction` under ``@register`` —
imported below, plus its tests; the job spec's parser, the core's ``step`` and the Spark
stage find it by name.
"""

from tidegate.eventtime.analytic_functions.base import (
    AnalyticFunction,
    Call,
    Parsed,
    forms,
    lookup,
    register,
    registered,
    unregister,
)

# importing a function registers it: this order is the order errors list them in (not sorted)
# isort: off
from tidegate.eventtime.analytic_functions.lag import Lag
from tidegate.eventtime.analytic_functions.last import Last
from tidegate.eventtime.analytic_functions.isfirst import IsFirst
from tidegate.eventtime.analytic_functions.over_duration import AvgOver, CountOver, MaxOver, MinOver, SumOver

# isort: on

__all__ = [
    "AnalyticFunction",
    "AvgOver",
    "CountOver",
    "MaxOver",
    "MinOver",
    "SumOver",
    "Call",
    "IsFirst",
    "Lag",
    "Last",
    "Parsed",
    "forms",
    "lookup",
    "register",
    "registered",
    "unregister",
]
