"""``SUM``, ``AVG``, ``MIN``, ``MAX`` and ``COUNT`` ``(expr) OVER ([PARTITION BY k] LIMIT
DURATION d [WHEN c])``: per event, the aggregate of the events of its key at or before it in
analytic order (itself included) with ``S_i − S ≤ d`` where ``c`` holds — Stream Analytics'
aggregates over a duration ("how much history from the current row is included in the group").

NULL values (and NaN, which is how a NULL number reaches the core) are left out, as in any
aggregate: ``SUM``, ``AVG``, ``MIN`` and ``MAX`` of no value are NULL, ``COUNT(expr)`` counts
the values that are not NULL and ``COUNT(*)`` the events. ``SUM`` of whole numbers is a whole
number (``bigint``); of floating-point numbers it is their exact sum, correctly rounded (as
``math.fsum``), and ``AVG`` (a ``double``) the exact mean, correctly rounded — so a result
does not depend on the events before its group: a replay that starts later gives the same bits.

Each key's groups slide forward with its events, so every function takes one pass: SUM, AVG
and COUNT subtract two prefix sums held as exact integers (a double is a whole multiple of
2⁻¹⁰⁷⁴), MIN and MAX keep a monotonic queue. MIN and MAX of a record compare it field by field,
NULL smallest, as Spark orders structs: that is how Stream Analytics' ``TopOne`` over a
duration is written (:mod:`tidegate.asa.top`). ``MAX(expr, n)`` and ``MIN(expr, n)`` are the
group's ``n`` largest (smallest) values, as an array from the extreme on, as DuckDB writes them:
Stream Analytics' ``CollectTop`` over a duration; they keep the group's values sorted as it
slides. History kept: events with ``S ≥ W − d`` where ``c`` holds, as LAG's.
"""

from __future__ import annotations

import bisect
import math
import operator
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from tidegate.errors import ConfigError
from tidegate.eventtime.analytic_functions.base import VALUE, Call, LookBack, Parsed, check_span, checked, register

WIDENED = "widened"  # result: the value's type as Spark's SUM widens it (int → bigint, float → double)
ARRAY = "array"  # result: an array of the value's type (MAX(expr, n))
MAX_TOP = 1_000  # values MAX(expr, n) and MIN(expr, n) return at most


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
        last = np.searchsorted(candidates, np.arange(n), side="right")  # the candidates at or before i
        first = np.searchsorted(system_us[candidates], system_us - self.limit_duration_us, side="left")
        present = np.array([not _null(v) for v in values[candidates]], dtype=bool)
        return self.groups(first, last, values[candidates], present)

    def groups(self, first: np.ndarray, last: np.ndarray, values: np.ndarray, present: np.ndarray) -> np.ndarray:
        """Each event's result, its group the candidates ``first[i]:last[i]`` (both never
        decrease with ``i``); ``values`` of the candidates, ``present`` where not NULL."""
        raise NotImplementedError


def _null(value) -> bool:
    """NULL, as a value reaches the core: None, or NaN where pandas holds a NULL number."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _ordered(value):
    """``value`` as MIN and MAX compare it: a record (a struct reaches the core as a dict) field
    by field in its fields' order, a NULL field smaller than any value, as Spark orders structs;
    any other value as it is."""
    if isinstance(value, dict):
        return tuple((0,) if _null(v) else (1, _ordered(v)) for v in value.values())
    return value


_SCALE = 1074  # every finite double is a whole multiple of 2**-1074


def _exact_sums(values: np.ndarray, present: np.ndarray) -> tuple[list[int], int] | None:
    """(prefix sums of the values as exact integers, the scale they carry: 0 for whole numbers,
    ``_SCALE`` for floating-point ones), or None for values they cannot hold (decimals, ±inf).
    A group's sum is the difference of two prefixes: exact, whatever came before the group."""
    kept = [v for v, p in zip(values, present, strict=True) if p]
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in kept):
        scale, exact = 0, [int(v) if p else 0 for v, p in zip(values, present, strict=True)]
    elif all(isinstance(v, (float, np.floating, int, np.integer)) and math.isfinite(v) for v in kept):
        scale, exact = _SCALE, [_scaled(v) if p else 0 for v, p in zip(values, present, strict=True)]
    else:
        return None
    prefix = [0]
    for v in exact:
        prefix.append(prefix[-1] + v)
    return prefix, scale


def _scaled(value) -> int:
    numerator, denominator = float(value).as_integer_ratio()  # the denominator is a power of 2
    return numerator << (_SCALE - (denominator.bit_length() - 1))


def _counts(present: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(present, dtype=np.int64)])


@dataclass(frozen=True)
class _Summed(OverDuration):
    """SUM and AVG: the group's exact sum, from two prefix sums."""

    def groups(self, first, last, values, present):
        out = np.empty(len(first), dtype=object)
        counts = _counts(present)
        sums = _exact_sums(values, present)
        for i, (lo, hi) in enumerate(zip(first, last, strict=True)):
            count = int(counts[hi] - counts[lo])
            if not count:
                out[i] = None
            elif sums is None:  # values no exact integer holds: each group summed on its own
                out[i] = self.value(math.fsum(float(v) for v in values[lo:hi][present[lo:hi]]), count, None)
            else:
                out[i] = self.value(sums[0][hi] - sums[0][lo], count, sums[1])
        return out

    def value(self, total, count: int, scale: int | None):
        """A group's result from its sum ``total`` — exact, in units of 2**-scale, or (scale
        None) a float already rounded — of ``count`` values."""
        raise NotImplementedError


@dataclass(frozen=True)
class _Extreme(OverDuration):
    """MIN and MAX: the group's extreme, kept in a monotonic queue as the group slides; with
    ``top``, its ``top`` extremes, from a sorted copy of the group."""

    better: ClassVar[Callable[..., Any]]  # whether a value beats another: operator.lt for MIN
    top: int | None = None  # MAX(expr, n): the n largest, as an array

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.top is not None and (isinstance(self.top, bool) or not 1 <= self.top <= MAX_TOP):
            raise ConfigError(
                f"{self.name}'s number of values is {self.top!r}",
                f"write a whole number from 1 to {MAX_TOP:,}, e.g. {self.name}(temperature, 3)",
            )

    @classmethod
    def parse(cls, call: Call) -> Parsed:
        if len(call.args) != 2:
            return super().parse(call)
        value, count = call.args
        if not count.isdigit():
            raise ConfigError(
                f"{call.where}: {cls.name}'s number of values {count!r} is not a whole number",
                f"write e.g. {cls.name}({value}, 3) OVER (PARTITION BY deviceId LIMIT DURATION(minute, 5))",
            )
        super().parse(Call(call.where, [value], call.limit_us, call.span))  # the checks MAX(expr) takes
        limit = call.limit_us
        assert limit is not None  # the checks refused a call without LIMIT DURATION
        return Parsed(checked(call.where, lambda: cls(limit, int(count))), value)

    @property
    def result(self) -> str:  # type: ignore[override]  # a property: MAX(expr) is a value, MAX(expr, n) an array
        return VALUE if self.top is None else ARRAY

    @property
    def fingerprint_n(self) -> int | None:
        return self.top

    def text_args(self, expression, default, written) -> list[str]:
        return [expression or "*"] + ([] if self.top is None else [str(self.top)])

    def groups(self, first, last, values, present):
        keys = [_ordered(v) for v in values]  # what is compared: a record field by field
        if self.top is not None:
            return self._tops(first, last, values, present, keys, self.top)
        out = np.empty(len(first), dtype=object)
        queue: deque[int] = deque()  # the group's candidates that may still be its extreme, worsening
        pushed = 0
        for i, (lo, hi) in enumerate(zip(first, last, strict=True)):
            while pushed < hi:
                if present[pushed]:
                    while queue and not self.better(keys[queue[-1]], keys[pushed]):
                        queue.pop()
                    queue.append(pushed)
                pushed += 1
            while queue and queue[0] < lo:
                queue.popleft()
            out[i] = values[queue[0]] if queue else None
        return out

    def _tops(self, first, last, values, present, keys, n: int) -> np.ndarray:
        """Each group's ``n`` extremes, best first; NULL for a group of no value. Equal values
        are in candidate order (a record that holds its log position has no equal)."""
        out = np.empty(len(first), dtype=object)
        group: list[tuple[Any, int]] = []  # the group's present candidates, sorted by (key, index)
        pushed = dropped = 0
        largest = self.better is operator.gt
        for i, (lo, hi) in enumerate(zip(first, last, strict=True)):
            for j in range(pushed, hi):
                if present[j]:
                    bisect.insort(group, (keys[j], j if not largest else -j))
            pushed = max(pushed, hi)
            for j in range(dropped, lo):
                if present[j]:
                    del group[bisect.bisect_left(group, (keys[j], j if not largest else -j))]
            dropped = max(dropped, lo)
            best = group[-n:][::-1] if largest else group[:n]
            out[i] = [values[abs(j)] for _, j in best] if best else None
        return out


@register
@dataclass(frozen=True)
class SumOver(_Summed):
    name = "SUM"
    form = "SUM(expr) OVER (... LIMIT DURATION(...))"
    result = WIDENED
    kind: str = "sum"

    def value(self, total, count, scale):
        return total / (1 << scale) if scale else total


@register
@dataclass(frozen=True)
class AvgOver(_Summed):
    name = "AVG"
    form = "AVG(expr) OVER (... LIMIT DURATION(...))"
    result = "double"
    kind: str = "avg"

    def value(self, total, count, scale):
        return total / count if scale is None else total / (count << scale)


@register
@dataclass(frozen=True)
class MinOver(_Extreme):
    name = "MIN"
    form = "MIN(expr[, n]) OVER (... LIMIT DURATION(...))"
    kind: str = "min"

    better = staticmethod(operator.lt)


@register
@dataclass(frozen=True)
class MaxOver(_Extreme):
    name = "MAX"
    form = "MAX(expr[, n]) OVER (... LIMIT DURATION(...))"
    kind: str = "max"

    better = staticmethod(operator.gt)


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

    def groups(self, first, last, values, present):
        if self.all_events:
            return (last - first).astype(object)
        counts = _counts(present)
        return (counts[last] - counts[first]).astype(object)
