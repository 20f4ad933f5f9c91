"""One progress line on stderr: rewritten in place on a terminal; in a log file (not a
terminal) one line now and then instead (no dependency, no log spam)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``label: 42.0% 84,000/200,000 events  61,532 ev/s``, redrawn at most every ``interval_s``
    on a terminal, written as a new line at most every ``log_interval_s`` elsewhere."""

    def __init__(
        self,
        total: int,
        label: str,
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
        interval_s: float = 0.2,
        log_interval_s: float = 5.0,
    ) -> None:
        self.total = total
        self.label = label
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval_s = interval_s if self.tty else log_interval_s
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
            if self.tty:
                print(file=self.stream, flush=True)

    def _draw(self) -> None:
        self._drawn = time.monotonic()
        rate = self.done / max(self.seconds, 1e-9)
        share = f"{100 * self.done / self.total:5.1f}% " if self.total else ""
        line = f"{self.label}: {share}{self.done:,}/{self.total:,} events  {rate:,.0f} ev/s"
        print(f"\r{line} " if self.tty else line, end="" if self.tty else "\n", file=self.stream, flush=True)
