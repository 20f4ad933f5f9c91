"""One progress line on stderr, rewritten in place (no dependency, no log spam)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``label: 42.0% 84,000/200,000 events  61,532 ev/s``, redrawn at most every ``interval_s``."""

    def __init__(self, total: int, label: str, *, enabled: bool = True, stream: TextIO | None = None,
                 interval_s: float = 0.2) -> None:
        self.total = total
        self.label = label
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.interval_s = interval_s
        self.started = time.monotonic()  # measures throughput for the operator; no logic reads it
        self._drawn = 0.0
        self.done = 0

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started

    def update(self, done: int) -> None:
        self.done = done
        if self.enabled and time.monotonic() - self._drawn >= self.interval_s:
            self._draw()

    def finish(self) -> None:
        if self.enabled:
            self._draw()
            print(file=self.stream, flush=True)

    def _draw(self) -> None:
        self._drawn = time.monotonic()
        rate = self.done / max(self.seconds, 1e-9)
        share = f"{100 * self.done / self.total:5.1f}% " if self.total else ""
        print(
            f"\r{self.label}: {share}{self.done:,}/{self.total:,} events  {rate:,.0f} ev/s ",
            end="",
            file=self.stream,
            flush=True,
        )
