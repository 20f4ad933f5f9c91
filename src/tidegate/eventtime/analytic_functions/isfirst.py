"""``ISFIRST(size) WHEN c``: 1 when ``c`` holds for this event and for no earlier event of
the same interval ``(N·size, (N+1)·size]`` (aligned like tumbling windows, as in Stream
Analytics; ``[N·size, (N+1)·size)`` with ``edges=start_inclusive``), else 0.
History kept: events in the interval that holds ``W`` where ``c`` holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidegate.errors import ConfigError
from tidegate.eventtime.analytic_functions.base import AnalyticFunction, Call, Parsed, check_span, checked, register
from tidegate.eventtime.windows import END_INCLUSIVE, check_edges, edge_shift_us


@register
@dataclass(frozen=True)
class IsFirst(AnalyticFunction):
    """``ISFIRST(unit, size)``: 1 for the first event of each ``(N·size, (N+1)·size]``
    (``[N·size, (N+1)·size)`` with ``edges=start_inclusive``)."""

    name = "ISFIRST"
    form = "ISFIRST(unit, size[, start_inclusive]) [OVER (...)]"
    result = "bigint"

    size_us: int
    edges: str = END_INCLUSIVE
    kind: str = "isfirst"

    def __post_init__(self) -> None:
        check_span("ISFIRST period", self.size_us, "ISFIRST(hour, 1)")
        check_edges(self.edges, "ISFIRST edges")

    @classmethod
    def parse(cls, call: Call) -> Parsed:
        where, args = call.where, call.args
        if len(args) not in (2, 3):
            raise ConfigError(
                f"{where}: ISFIRST takes 2 arguments (unit, size) and optionally its edges, got {len(args)}",
                "e.g. ISFIRST(hour, 1), or ISFIRST(hour, 1, start_inclusive)",
            )
        if call.limit_us is not None:
            raise ConfigError(
                f"{where}: ISFIRST takes no LIMIT DURATION: its period is its own", "remove LIMIT DURATION"
            )
        size = call.span(args[0], args[1], f"{where} (ISFIRST period)")
        # Stream Analytics' (start, end] unless Spark's [start, end) is asked for, as windows' edges
        edges = args[2].strip().lower() if len(args) == 3 else END_INCLUSIVE
        check_edges(edges, f"{where} (ISFIRST edges, argument 3)")
        return Parsed(checked(where, lambda: cls(size, edges)))

    @property
    def span_us(self) -> int:
        return self.size_us

    def text_args(self, expression, default, written) -> list[str]:
        unit, count = written(self.size_us)
        return [unit, str(count)] + ([] if self.edges == END_INCLUSIVE else [self.edges])

    def results(self, system_us, candidates, values, defaults) -> np.ndarray:
        out = np.zeros(len(system_us), dtype=np.int64)
        interval = (system_us[candidates] - edge_shift_us(self.edges)) // self.size_us
        first = np.r_[True, interval[1:] != interval[:-1]] if len(candidates) else np.zeros(0, dtype=bool)
        out[candidates[first]] = 1
        return out

    def fingerprint_extra(self) -> list:
        return [self.edges]

    def history_start_us(self, now_us: np.ndarray) -> np.ndarray:
        """The interval that holds ``now_us``: ``(start, …]`` holds S ≥ start + 1 µs."""
        shift = edge_shift_us(self.edges)
        return ((now_us - shift) // self.size_us) * self.size_us + shift
