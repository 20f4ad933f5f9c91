"""When a region's duplicate stops being fit to serve consumers (the failover trigger)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from tidegate.runtime.procedures.health import assess

NOW = 10_000.0


def status(state="running", detail=None, started_at=NOW - 3_600):
    return NS(state=state, detail=detail, started_at=started_at)


def batches(*pairs):
    """(seconds before now, watermark delay in s) per batch, oldest first."""
    return [NS(processed_at=NOW - ago, watermark_delay_us=None if d is None else int(d * 1e6)) for ago, d in pairs]


@pytest.mark.parametrize(
    "st, bs, pending, healthy, words",
    [
        (status(), batches((30, 20), (10, 25)), 0, True, "keeping up"),
        (status("lost", "killed"), batches((30, 20)), 0, False, "the driver is lost: killed"),
        # no batch for 200 s while 500 events wait: stuck
        (status(), batches((300, 20), (200, 20)), 500, False, "no micro-batch for 200 s with 500 events waiting"),
        # no batch for 200 s but nothing to read: merely waiting for data
        (status(), batches((300, 20), (200, 20)), 0, True, "keeping up"),
        # delay above 60 s in every batch of the last 120 s, and the history covers 120 s
        (status(), batches((200, 90), (100, 80), (50, 95), (5, 70)), 0, False, "watermark delay above 60 s for 120 s"),
        # one slow batch is noise
        (status(), batches((200, 10), (100, 80), (50, 10), (5, 12)), 0, True, "keeping up"),
        # a delay that has not held for the whole window yet (history shorter than for_s)
        (status(), batches((50, 95), (5, 90)), 0, True, "keeping up"),
    ],
)
def test_health_verdicts(st, bs, pending, healthy, words):
    h = assess(st, bs, NOW, max_delay_s=60, for_s=120, stalled_after_s=120, pending_events=pending)
    assert h.healthy is healthy
    assert words in h.reason
