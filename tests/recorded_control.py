"""The control database as the catch-up model reads it (``recorded_samples``), from rows a
test writes or a walk-through recorded: runs, batch metrics and rehearsals' estimates."""

from __future__ import annotations

import json
from types import SimpleNamespace as NS


class Recorded:
    """The queries recorded_samples makes of the control database."""

    def __init__(self, runs, batches, estimates=()):
        self._runs, self._batches, self._estimates = runs, batches, list(estimates)

    def runs(self, job, kind=None, limit=None):
        assert kind is None  # restarts and rehearsals alike
        return self._runs

    def batch_metrics(self, job, run_id=None, limit=None, first=False):
        rows = sorted((m for m in self._batches if run_id is None or m.run_id == run_id), key=lambda m: m.processed_at)
        return rows[:limit] if first else rows[-limit:]

    def estimates(self, job):
        return self._estimates


def rehearsal_estimate(run_id, catch_up_speedup, startup_speedup=None):
    return NS(
        kind="rehearsal",
        details=json.dumps(
            {"run_id": run_id, "catch_up_speedup": catch_up_speedup, "startup_speedup": startup_speedup}
        ),
    )


def recorded_at(starts, speedups: dict, at: float) -> Recorded:
    """A recorded walk-through as the control database showed it at time ``at``. ``starts``:
    (run, kind, requested, caught up, [(processed at, events, seconds), …]); ``speedups``: each
    rehearsal's (start-up, catch-up) speedup, recorded once it caught up."""
    caught = {i: done for i, _, _, done, _ in starts}
    runs = [
        NS(id=i, kind=kind, requested_at=req, caught_up_at=done if done < at else None)
        for i, kind, req, done, _ in reversed(starts)
        if req < at
    ]
    batches = [
        NS(run_id=i, batch_id=b, processed_at=when, batch_seconds=s, input_events=n)
        for i, *_, rows in starts
        for b, (when, n, s) in enumerate(rows)
        if when < at
    ]
    return Recorded(
        runs,
        batches,
        [rehearsal_estimate(r, catch_up, startup) for r, (startup, catch_up) in speedups.items() if caught[r] < at],
    )
