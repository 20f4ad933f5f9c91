"""``LAG(expr, n, default) LIMIT DURATION d WHEN c``: the value of the ``n``-th event before
this one among those where ``c`` holds, if that event has ``S_i − S ≤ d``; else ``default``.
The event itself never counts (it is "previous"). History kept: events with ``S ≥ W − d``
where ``c`` holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidegate.errors import ConfigError
from tidegate.eventtime.analytic_functions.base import Call, LookBack, Parsed, check_span, checked, register, value_args


@register
@dataclass(frozen=True)
class Lag(LookBack):
    """``LAG(expr, n[, default]) LIMIT DURATION(d)``: ``n`` events back, no older than ``d``."""

    name = "LAG"
    form = "LAG(expr[, n][, default]) OVER (...)"

    n: int = 1
    kind: str = "lag"

    def __post_init__(self) -> None:
        check_span("LIMIT DURATION", self.limit_duration_us, "LIMIT DURATION(minute, 10)")
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ConfigError(f"LAG offset is {self.n!r}", "the offset is a whole number of events, 1 or more")

    @classmethod
    def parse(cls, call: Call) -> Parsed:
        args = value_args(call, "LAG", 3, "LAG(expr[, n][, default])")
        n = 1
        if len(args) >= 2:
            if not args[1].isdigit():
                raise ConfigError(f"{call.where}: LAG offset {args[1]!r} is not a whole number", "write e.g. LAG(t, 2)")
            n = int(args[1])
        limit = call.limit_us
        assert limit is not None  # value_args refused a call without LIMIT DURATION
        return Parsed(checked(call.where, lambda: cls(limit, n)), args[0], args[2] if len(args) == 3 else None)

    @property
    def back(self) -> int:
        return self.n

    @property
    def fingerprint_n(self) -> int:
        return self.n

    def text_args(self, expression, default, written) -> list[str]:
        args = [expression or ""]
        if self.n != 1 or default is not None:
            args.append(str(self.n))
        return args + ([default] if default is not None else [])
