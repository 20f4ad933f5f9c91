"""``SUM``, ``AVG``, ``MIN``, ``MAX`` and ``COUNT`` ``(expr) OVER ([PARTITION BY k] LIMIT
DURATION d [WHEN c])``: per event, the aggregate of the events of its key at or before it in
analytic order (itself included) with ``S_i − S ≤ d`` where ``c`` holds — Stream Analytics'
aggregates over a duration ("how much history from the current row is included in the group").

NULL values (and NaN, which is how a NULL number reaches the core) are left out, as in any
aggregate: ``SUM``, ``AVG``, ``MIN`` and ``MAX`` of no value are NULL, ``COUNT(expr)`` counts
the values that are not NULL and ``COUNT(*)`` the events. ``SUM`` of whole numbers is a whole
number (``bigint``); of floating-point numbers it is their correctly rounded sum
(``math.fsum``), so a result does not depend on the events before its group: a replay that
starts later gives the same bits. ``AVG`` is a ``double``. History kept: events with
``S ≥ W − d`` where ``c`` holds, as LAG's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from tidegate.errors import ConfigError
from tidegate.eventtime.analytic_functions.base import VALUE, Call, LookBack, Parsed, check_span, checked, register

WIDENED = "widened"  # result: the value's type as Spark's SUM widens it (int → bigint, float → double)


@dataclass(frozen=True)
class OverDuration(LookBack):
    """What the aggregates over a duration share: the group of each event, and the checks."""

    star: ClassVar[bool] = False  # whether (*) is a value: COUNT(*)

    def __post_init__(self) -> None:
        check_span("LIMIT DURATION", self.limit_duration_us, "LIMIT DURATION(minute, 5)")

    @classmethod
    def parse(cls, call: Call) -> Parsed:
        where, args = call.where, call.args
        example = f"{cls.name}(temperature) OVER (PARTITION BY deviceId LIMIT DURATION(minute, 5))"
        if len(args) != 1:
            raise ConfigError(
                f"{where}: {cls.name} over a duration takes 1 argument, got {len(args)}", f"write {example}"
            )
        if args[0] == "*" and not cls.star:
            raise ConfigError(f"{where}: {cls.name}(*) is not supported", f"name the value, e.g. {example}")
        if call.limit_us is None:
            raise ConfigError(
                f"{where}: {cls.name}(…) OVER needs LIMIT DURATION: it is the group's length, and bounds the state "
                "the job keeps",
                f"add it, e.g. {example}",
            )
        limit = call.limit_us
        return Parsed(checked(where, lambda: cls.made(limit, args[0])), None if args[0] == "*" else args[0])

    @classmethod
    def made(cls, limit_us: int, argument: str) -> OverDuration:
        return cls(limit_us)

    @property
    def back(self) -> int:
        return 0  # the event itself is in its group

    def text_args(self, expression, default, written) -> list[str]:
        return [expression or "*"]

    def results(self, system_us, candidates, values, defaults) -> np.ndarray:
        n = len(system_us)
        out = np.empty(n, dtype=object)
        last = np.searchsorted(candidates, np.arange(n), side="right")  # the candidates at or before i
        first = np.searchsorted(system_us[candidates], system_us - self.limit_duration_us, side="left")
        for i in range(n):
            group = values[candidates[first[i] : last[i]]]
            out[i] = self.aggregate([v for v in group if not _null(v)], len(group))
        return out

    def aggregate(self, present: list, events: int):
        """The result of one group: ``present``, its values that are not NULL, of ``events``."""
        raise NotImplementedError


def _null(value) -> bool:
    """NULL, as a value reaches the core: None, or NaN where pandas holds a NULL number."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _sum(values: list):
    if any(isinstance(v, float) for v in values):
        return math.fsum(float(v) for v in values)
    return sum(values)


@register
@dataclass(frozen=True)
class SumOver(OverDuration):
    name = "SUM"
    form = "SUM(expr) OVER (... LIMIT DURATION(...))"
    result = WIDENED
    kind: str = "sum"

    def aggregate(self, present, events):
        return _sum(present) if present else None


@register
@dataclass(frozen=True)
class AvgOver(OverDuration):
    name = "AVG"
    form = "AVG(expr) OVER (... LIMIT DURATION(...))"
    result = "double"
    kind: str = "avg"

    def aggregate(self, present, events):
        return float(_sum(present)) / len(present) if present else None


@register
@dataclass(frozen=True)
class MinOver(OverDuration):
    name = "MIN"
    form = "MIN(expr) OVER (... LIMIT DURATION(...))"
    result = VALUE
    kind: str = "min"

    def aggregate(self, present, events):
        return min(present) if present else None


@register
@dataclass(frozen=True)
class MaxOver(OverDuration):
    name = "MAX"
    form = "MAX(expr) OVER (... LIMIT DURATION(...))"
    result = VALUE
    kind: str = "max"

    def aggregate(self, present, events):
        return max(present) if present else None


@register
@dataclass(frozen=True)
class CountOver(OverDuration):
    name = "COUNT"
    form = "COUNT(expr | *) OVER (... LIMIT DURATION(...))"
    result = "bigint"
    star = True
    kind: str = "count"

    all_events: bool = False  # COUNT(*): every event of the group, NULL or not

    @classmethod
    def made(cls, limit_us: int, argument: str) -> OverDuration:
        return cls(limit_us, all_events=argument == "*")

    def fingerprint_extra(self) -> list:
        return ["*"] if self.all_events else []

    def aggregate(self, present, events):
        return events if self.all_events else len(present)
