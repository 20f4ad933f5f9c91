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

Each function is one module of :mod:`tidegate.eventtime.analytic_functions`, looked up by
name in its registry; this module holds what they share: the order, evaluating a function,
what history it keeps, and the step.

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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tidegate.eventtime.analytic_functions import AnalyticFunction, IsFirst, Lag, Last
from tidegate.eventtime.analytic_functions.base import MAX_ANALYTIC_SPAN_US, as_object_array
from tidegate.eventtime.policy import NONE

Analytic = AnalyticFunction  # any registered function: Lag, Last, IsFirst, …
__all__ = [
    "MAX_ANALYTIC_SPAN_US",
    "Analytic",
    "IsFirst",
    "Lag",
    "Last",
    "Step",
    "analytic_order",
    "evaluate",
    "history_from_us",
    "step",
]


def analytic_order(
    system_us: np.ndarray, arrival_us: np.ndarray, partition: np.ndarray, offset: np.ndarray
) -> np.ndarray:
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
    return fn.results(s, candidates, as_object_array(values, n), as_object_array(defaults, n))


def history_from_us(fn: Analytic, frontier_us: np.ndarray | int) -> np.ndarray:
    """The oldest system time a result not yet final may still look back to, at ``frontier``:
    history before it can be dropped. NONE while the frontier is unknown."""
    now = np.asarray(frontier_us, dtype=np.int64)
    unknown = now == NONE
    safe = np.where(unknown, 0, now)
    start = fn.history_start_us(safe)
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
    results = [evaluate(fn, s, w, v, d) for fn, w, v, d in zip(functions, whens, values, defaults, strict=True)]
    emit = (s >= prev) & (s < now)
    if emit_after_us is not None:
        emit &= s > np.broadcast_to(np.asarray(emit_after_us, dtype=np.int64), (n,))
    keep = s >= now  # not final yet
    for fn, when in zip(functions, whens, strict=True):
        needed = s >= history_from_us(fn, now)
        keep |= needed if when is None else needed & np.asarray(when, dtype=bool)
    return Step(results, emit, keep)
