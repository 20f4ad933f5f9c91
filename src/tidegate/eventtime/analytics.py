"""Temporal analytic functions over system time: LAG, LAST and ISFIRST, and when each
event's result is final.

Events of one partition key are taken in **analytic order**: system time ``S``, then, among
equal times, arrival order as Stream Analytics takes them — arrival time, then log
partition, then offset (:func:`analytic_order`). Each of these is recorded with the event,
so equal times are broken the same way by every batching and every replay. Over that order,
for event ``i``:

* ``LAG(expr, n, default) LIMIT DURATION d WHEN c``: the value of the ``n``-th event
  before ``i`` among those where ``c`` holds, if that event has ``S_i − S ≤ d``; else
  ``default``. The event itself never counts (it is "previous").
* ``LAST(expr, default) LIMIT DURATION d WHEN c``: as LAG with ``n = 0`` — the latest event
  at or before ``i`` (``i`` itself included) where ``c`` holds, within ``d``.
* ``ISFIRST(size) WHEN c``: 1 when ``c`` holds for ``i`` and for no earlier event of the
  same interval ``(N·size, (N+1)·size]`` from the epoch — aligned like tumbling windows and
  with their edges (windows.py): an event at exactly 13:00 is in 12:00–13:00 — else 0.
  ``edges=start_inclusive`` makes the intervals ``[N·size, (N+1)·size)``.

Every result depends on the event and the events before it only. Every kept event that
follows has ``S ≥ W`` (see policy.py), and one at ``S = W`` that arrived earlier, or from a
lower log partition, would sort before an event at ``W``; so an event's result is final
once ``S < W``: its
``close_at`` is ``S + 1 µs``, as for a sliding window ending at ``S``. Between batches the
stage keeps the events not yet final and, as history, only the events a future event can
still look back to: for LAG / LAST those with ``S ≥ W − d`` where ``c`` holds; for ISFIRST
those in the interval that holds ``W`` where ``c`` holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Union

import numpy as np

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_duration
from tidegate.eventtime.policy import NONE
from tidegate.eventtime.windows import END_INCLUSIVE, MAX_WINDOW_US, check_edges, edge_shift_us

MAX_ANALYTIC_SPAN_US = MAX_WINDOW_US  # LIMIT DURATION and the ISFIRST period: at most 7 days


def _check_span(where: str, value_us: int, example: str) -> None:
    if value_us <= 0:
        raise ConfigError(f"{where} must be positive, got {format_duration(value_us)}", f"e.g. {example}")
    if value_us > MAX_ANALYTIC_SPAN_US:
        raise ConfigError(
            f"{where} is {format_duration(value_us)}, longer than the 7-day maximum",
            f"use at most 7 days, e.g. {example}: the job keeps (and replays) that much history per key",
        )


@dataclass(frozen=True)
class Lag:
    """``LAG(expr, n[, default]) LIMIT DURATION(d)``: ``n`` events back, no older than ``d``."""

    limit_duration_us: int
    n: int = 1
    kind: str = "lag"

    def __post_init__(self) -> None:
        _check_span("LIMIT DURATION", self.limit_duration_us, "LIMIT DURATION(minute, 10)")
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ConfigError(f"LAG offset is {self.n!r}", "the offset is a whole number of events, 1 or more")

    @property
    def span_us(self) -> int:
        return self.limit_duration_us


@dataclass(frozen=True)
class Last:
    """``LAST(expr[, default]) LIMIT DURATION(d)``: the latest event (itself included) within ``d``."""

    limit_duration_us: int
    kind: str = "last"

    def __post_init__(self) -> None:
        _check_span("LIMIT DURATION", self.limit_duration_us, "LIMIT DURATION(hour, 1)")

    @property
    def span_us(self) -> int:
        return self.limit_duration_us


@dataclass(frozen=True)
class IsFirst:
    """``ISFIRST(unit, size)``: 1 for the first event of each ``(N·size, (N+1)·size]``
    (``[N·size, (N+1)·size)`` with ``edges=start_inclusive``)."""

    size_us: int
    edges: str = END_INCLUSIVE
    kind: str = "isfirst"

    def __post_init__(self) -> None:
        _check_span("ISFIRST period", self.size_us, "ISFIRST(hour, 1)")
        check_edges(self.edges, "ISFIRST edges")

    @property
    def span_us(self) -> int:
        return self.size_us


Analytic = Union[Lag, Last, IsFirst]


def analytic_order(system_us: np.ndarray, arrival_us: np.ndarray, partition: np.ndarray,
                   offset: np.ndarray) -> np.ndarray:
    """Indices that sort events by (system time, arrival time, log partition, offset)."""
    return np.lexsort((np.asarray(offset), np.asarray(partition), np.asarray(arrival_us), np.asarray(system_us)))


def evaluate(
    fn: Analytic,
    system_us: np.ndarray,
    when: np.ndarray | None = None,
    values: Sequence | None = None,
    defaults: Sequence | None = None,
) -> np.ndarray:
    """Each event's result, for events of one partition key already in analytic order.

    ``when``: the WHEN condition per event (None: always true; NULL counts as false).
    ``values`` / ``defaults``: the function's expression and default per event (LAG, LAST).
    Returns an object array (LAG, LAST; a missing default is None) or int64 1/0 (ISFIRST).
    """
    s = np.asarray(system_us, dtype=np.int64)
    n = len(s)
    matching = np.ones(n, dtype=bool) if when is None else np.asarray(when, dtype=bool)
    candidates = np.flatnonzero(matching)
    if isinstance(fn, IsFirst):
        out = np.zeros(n, dtype=np.int64)
        interval = (s[candidates] - edge_shift_us(fn.edges)) // fn.size_us
        first = np.r_[True, interval[1:] != interval[:-1]] if len(candidates) else np.zeros(0, dtype=bool)
        out[candidates[first]] = 1
        return out
    back = fn.n if isinstance(fn, Lag) else 0
    # candidates strictly before i (LAG) or at or before i (LAST); the one `back` from the end
    seen = np.searchsorted(candidates, np.arange(n), side="left" if back else "right")
    pick = seen - max(back, 1)
    found = pick >= 0
    source = np.where(found, candidates[np.clip(pick, 0, None)] if len(candidates) else 0, 0)
    found &= s - s[source] <= fn.limit_duration_us
    vals = np.empty(n, dtype=object)
    given = np.asarray(values if values is not None else [None] * n, dtype=object)
    fallback = np.asarray(defaults if defaults is not None else [None] * n, dtype=object)
    vals[:] = fallback
    vals[found] = given[source[found]]
    return vals


def history_from_us(fn: Analytic, frontier_us: np.ndarray | int) -> np.ndarray:
    """The oldest system time a result not yet final may still look back to, at ``frontier``:
    history before it can be dropped. NONE while the frontier is unknown."""
    now = np.asarray(frontier_us, dtype=np.int64)
    unknown = now == NONE
    safe = np.where(unknown, 0, now)
    if isinstance(fn, IsFirst):  # the interval that holds W: (start, …] holds S ≥ start + 1 µs
        shift = edge_shift_us(fn.edges)
        start = ((safe - shift) // fn.size_us) * fn.size_us + shift
    else:
        start = safe - fn.limit_duration_us
    return np.where(unknown, NONE, start)


@dataclass(frozen=True)
class Step:
    """One analytic step over (history + pending + new) events of one partition key."""

    results: list[np.ndarray]  # per function, per event (analytic order)
    emit: np.ndarray  # bool per event: final in this step, and after ``emit_after``
    keep: np.ndarray  # bool per event: not final yet, or history a later event may need


def step(
    functions: Sequence[Analytic],
    system_us: np.ndarray,
    prev_frontier_us: np.ndarray | int,
    frontier_us: np.ndarray | int,
    whens: Sequence[np.ndarray | None],
    values: Sequence[Sequence | None],
    defaults: Sequence[Sequence | None],
    emit_after_us: np.ndarray | int | None = None,
) -> Step:
    """Advance from ``prev_frontier`` to ``frontier`` (per event or scalar).

    Events are in analytic order. An event is emitted when ``prev ≤ S < frontier`` (its
    ``close_at = S + 1 µs`` lies in ``(prev, frontier]``), except at or before
    ``emit_after_us`` (output before a restart). Every event has ``S ≥ prev`` unless it was
    emitted before and kept as history, so each event is emitted exactly once.
    """
    s = np.asarray(system_us, dtype=np.int64)
    n = len(s)
    prev = np.broadcast_to(np.asarray(prev_frontier_us, dtype=np.int64), (n,))
    now = np.broadcast_to(np.asarray(frontier_us, dtype=np.int64), (n,))
    results = [evaluate(fn, s, w, v, d) for fn, w, v, d in zip(functions, whens, values, defaults)]
    emit = (s >= prev) & (s < now)
    if emit_after_us is not None:
        emit &= s > np.broadcast_to(np.asarray(emit_after_us, dtype=np.int64), (n,))
    keep = s >= now  # not final yet
    for fn, when in zip(functions, whens):
        needed = s >= history_from_us(fn, now)
        keep |= needed if when is None else needed & np.asarray(when, dtype=bool)
    return Step(results, emit, keep)
