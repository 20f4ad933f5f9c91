"""What an analytic function declares, and the registry the parser, the core and the Spark stage look it up in.

An analytic function is one frozen config class, a subclass of :class:`AnalyticFunction`,
in one module of this package, registered by name (:func:`register`). It declares:

* its name as a spec writes it (``LAG``) and its written form, for errors;
* how a call's arguments are read and checked (:meth:`AnalyticFunction.parse`, from the
  :class:`Call` the job spec's parser splits out) and written back
  (:meth:`~AnalyticFunction.text_args`);
* its span, which bounds the look-back (:attr:`~AnalyticFunction.span_us`), and the
  oldest history a result not yet final may still need (:meth:`~AnalyticFunction.history_start_us`);
* its result per event in analytic order (:meth:`~AnalyticFunction.results`) — the pure
  core, plain numpy;
* its output type (:attr:`~AnalyticFunction.result`): the type of its value expression,
  or a Spark SQL type the stage gives the column.

The Spark stage runs the core per partition key, so it needs nothing more: it evaluates a
function's value, default and WHEN where a spec gives them and types the column by
``result``. Nothing here imports pyspark or the job spec package.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar, TypeVar

import numpy as np

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_duration
from tidegate.eventtime.windows import MAX_WINDOW_US

MAX_ANALYTIC_SPAN_US = MAX_WINDOW_US  # LIMIT DURATION and the ISFIRST period: at most 7 days
VALUE = "value"  # result: the type of the function's value expression


def check_span(where: str, value_us: int, example: str) -> None:
    if value_us <= 0:
        raise ConfigError(f"{where} must be positive, got {format_duration(value_us)}", f"e.g. {example}")
    if value_us > MAX_ANALYTIC_SPAN_US:
        raise ConfigError(
            f"{where} is {format_duration(value_us)}, longer than the 7-day maximum",
            f"use at most 7 days, e.g. {example}: the job keeps (and replays) that much history per key",
        )


@dataclass(frozen=True)
class Call:
    """One call as the job spec's parser splits it: what :meth:`AnalyticFunction.parse` reads."""

    where: str  # the field, for errors: ``analytics.prev_temperature``
    args: list[str]  # the arguments as written (Spark SQL text), none empty
    limit_us: int | None  # OVER's LIMIT DURATION in µs; None when absent
    span: Callable[[str, str, str], int]  # (unit, count, where) → µs, the spec's time units


@dataclass(frozen=True)
class Parsed:
    """What a call gives: the function's config and the Spark SQL parts it evaluates per event."""

    function: AnalyticFunction
    expression: str | None = None  # the value looked up (None: the function takes none)
    default: str | None = None  # when no event qualifies (None: NULL)


class AnalyticFunction:
    """The base of every analytic function's frozen config (see the module docstring)."""

    name: ClassVar[str]  # as a spec writes it, upper case: LAG
    form: ClassVar[str]  # how a call is written, for errors: LAG(expr[, n][, default]) OVER (...)
    result: ClassVar[str] = VALUE  # VALUE, or the Spark SQL type of the column (ISFIRST: bigint)
    kind: str  # lower case, what the fingerprint holds: each function's dataclass field (lag)

    @classmethod
    def parse(cls, call: Call) -> Parsed:
        """Read and check a call's arguments; a ConfigError names ``call.where`` and the fix."""
        raise NotImplementedError

    @property
    def span_us(self) -> int:
        """How far back a result may look: the job's look-back includes it."""
        raise NotImplementedError

    @property
    def limit_us(self) -> int | None:
        """The LIMIT DURATION its call is written with (None: it takes none)."""
        return None

    @property
    def fingerprint_n(self) -> int | None:
        """The count argument the fingerprint holds (LAG's offset); None for others."""
        return None

    def fingerprint_extra(self) -> list:
        """What else the fingerprint holds of the function (ISFIRST: its intervals' edges, so a
        changed convention is a changed query); nothing for most."""
        return []

    def text_args(
        self, expression: str | None, default: str | None, written: Callable[[int], tuple[str, int]]
    ) -> list[str]:
        """The call's arguments, normalised; ``written`` gives a span as (unit, count)."""
        raise NotImplementedError

    def results(self, system_us: np.ndarray, candidates: np.ndarray, values: np.ndarray,
                defaults: np.ndarray) -> np.ndarray:  # fmt: skip
        """Each event's result, events of one key in analytic order. ``candidates``: the
        indices of the events where WHEN holds; ``values`` / ``defaults``: object arrays."""
        raise NotImplementedError

    def history_start_us(self, now_us: np.ndarray) -> np.ndarray:
        """The oldest system time a result not yet final may still look back to at frontier
        ``now`` (known, never NONE): history before it can be dropped."""
        raise NotImplementedError


F = TypeVar("F")


@dataclass(frozen=True)
class LookBack(AnalyticFunction):
    """What LAG and LAST share: a value looked up among earlier events of the key, no older
    than ``limit_duration_us`` (their LIMIT DURATION, their span); ``back`` events back."""

    limit_duration_us: int

    @property
    def back(self) -> int:
        raise NotImplementedError

    @property
    def span_us(self) -> int:
        return self.limit_duration_us

    @property
    def limit_us(self) -> int:
        return self.limit_duration_us

    def results(self, system_us, candidates, values, defaults) -> np.ndarray:
        return look_back(system_us, candidates, self.back, self.limit_duration_us, values, defaults)

    def history_start_us(self, now_us: np.ndarray) -> np.ndarray:
        return now_us - self.limit_duration_us


def checked(where: str, make: Callable[[], F]) -> F:
    """``make()``, with the field named in front of a ConfigError it raises."""
    try:
        return make()
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc.problem}", exc.fix) from None


def look_back(system_us: np.ndarray, candidates: np.ndarray, back: int, limit_us: int, values: np.ndarray,
              defaults: np.ndarray) -> np.ndarray:  # fmt: skip
    """The value of the candidate ``back`` before each event (``back = 0``: the latest at or
    before it, itself included) if within ``limit_us``; else the default."""
    s = system_us
    n = len(s)
    # candidates strictly before i (LAG) or at or before i (LAST); the one `back` from the end
    seen = np.searchsorted(candidates, np.arange(n), side="left" if back else "right")
    pick = seen - max(back, 1)
    found = pick >= 0
    source = np.where(found, candidates[np.clip(pick, 0, None)] if len(candidates) else 0, 0)
    found &= s - s[source] <= limit_us
    vals = np.empty(n, dtype=object)
    vals[:] = defaults
    vals[found] = values[source[found]]
    return vals


def value_args(call: Call, name: str, most: int, written: str) -> list[str]:
    """The checks LAG and LAST share: 1 to ``most`` arguments, a value that is not ``*``, and a
    LIMIT DURATION."""
    args, where = call.args, call.where
    if not 1 <= len(args) <= most:
        raise ConfigError(f"{where}: {name} takes 1 to {most} arguments, got {len(args)}", f"write {written}")
    if args[0] == "*":
        raise ConfigError(f"{where}: {name}(*) is not supported", "name the value to look up, e.g. LAG(temperature)")
    if call.limit_us is None:
        raise ConfigError(
            f"{where}: {name} needs LIMIT DURATION: how far back it may look bounds the state the job keeps",
            f"add it, e.g. {name}({args[0]}) OVER (PARTITION BY deviceId LIMIT DURATION(minute, 10))",
        )
    return args


# -- the registry ----------------------------------------------------------------------
_REGISTRY: dict[str, type[AnalyticFunction]] = {}

A = TypeVar("A", bound=type[AnalyticFunction])


def register(cls: A) -> A:
    """Make ``cls`` callable from a spec under ``cls.name`` (a class decorator)."""
    key = cls.name.upper()
    if key in _REGISTRY and _REGISTRY[key] is not cls:
        raise ValueError(f"analytic function {key} is registered already")
    _REGISTRY[key] = cls
    return cls


def unregister(name: str) -> None:
    _REGISTRY.pop(name.upper(), None)


def lookup(name: str) -> type[AnalyticFunction] | None:
    """The function a spec calls as ``name`` (any case), or None."""
    return _REGISTRY.get(name.upper())


def registered() -> tuple[type[AnalyticFunction], ...]:
    """Every function, in the order registered."""
    return tuple(_REGISTRY.values())


def forms() -> str:
    """How each function is written, for an error: ``A, B or C``."""
    written = [cls.form for cls in registered()]
    return written[0] if len(written) == 1 else ", ".join(written[:-1]) + " or " + written[-1]


def as_object_array(given: Sequence | None, n: int) -> np.ndarray:
    return np.asarray(given if given is not None else [None] * n, dtype=object)
