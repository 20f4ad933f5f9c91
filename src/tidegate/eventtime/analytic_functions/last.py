"""``LAST(expr, default) LIMIT DURATION d WHEN c``: as LAG with ``n = 0`` — the latest event
at or before this one (itself included) where ``c`` holds, within ``d``; else ``default``.
History kept: events with ``S ≥ W − d`` where ``c`` holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidegate.eventtime.analytic_functions.base import Call, LookBack, Parsed, check_span, checked, register, value_args


@register
@dataclass(frozen=True)
class Last(LookBack):
    """``LAST(expr[, default]) LIMIT DURATION(d)``: the latest event (itself included) within ``d``."""

    name = "LAST"
    form = "LAST(expr[, default]) OVER (...)"

    kind: str = "last"

    def __post_init__(self) -> None:
        check_span("LIMIT DURATION", self.limit_duration_us, "LIMIT DURATION(hour, 1)")

    @classmethod
    def parse(cls, call: Call) -> Parsed:
        args = value_args(call, "LAST", 2, "LAST(expr[, default])")
        limit = call.limit_us
        assert limit is not None  # value_args refused a call without LIMIT DURATION
        return Parsed(checked(call.where, lambda: cls(limit)), args[0], args[1] if len(args) == 2 else None)

    @property
    def back(self) -> int:
        return 0  # itself included

    def text_args(self, expression, default, written) -> list[str]:
        return [expression or ""] + ([default] if default is not None else [])
