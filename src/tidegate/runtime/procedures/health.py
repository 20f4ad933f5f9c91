"""Is a region's duplicate healthy enough to serve consumers? (semantics §7 failover)

A duplicate is unhealthy when its driver is not running, when it has made no progress —
no micro-batch recorded for ``stalled_after_s`` while the log holds events it has not
read (a job merely waiting for data is not stalled) —, or when its watermark delay has stayed
above ``max_delay_s`` for every batch of the last ``for_s`` seconds (one slow batch is
noise; a delay that holds is a region falling behind). The verdict is a pure function of
the job's status and recorded batches, so the health watch and its tests agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Health:
    healthy: bool
    reason: str


def assess(
    status,
    batches: Sequence,
    now: float,
    *,
    max_delay_s: float,
    for_s: float,
    stalled_after_s: float,
    pending_events: int,
) -> Health:
    """``status``: a JobStatus; ``batches``: its run's recorded batches, oldest first;
    ``pending_events``: what the log holds beyond the run's last batch."""
    if status.state != "running":
        return Health(False, f"the driver is {status.state}" + (f": {status.detail}" if status.detail else ""))
    last = batches[-1].processed_at if batches else status.started_at
    if last is not None and now - last > stalled_after_s and pending_events > 0:
        return Health(
            False,
            f"no micro-batch for {now - last:.0f} s with {pending_events} events waiting "
            f"(stalled after {stalled_after_s:.0f} s)",
        )
    recent = [b for b in batches if b.processed_at >= now - for_s]
    delays = [b.watermark_delay_us / 1e6 for b in recent if b.watermark_delay_us is not None]
    spans_window = bool(batches) and batches[0].processed_at <= now - for_s
    if delays and spans_window and min(delays) > max_delay_s:
        return Health(
            False,
            f"watermark delay above {max_delay_s:.0f} s for {for_s:.0f} s "
            f"(at least {min(delays):.0f} s in every batch)",
        )
    return Health(True, "running and keeping up")


def assess_region(
    controller,
    job: str,
    region: str,
    *,
    max_delay_s: float = 300.0,
    for_s: float = 120.0,
    stalled_after_s: float = 120.0,
) -> Health:
    import json
    import time

    status = controller.status_of(job, region)
    batches = (
        []
        if status.run_id is None
        else controller.db.batch_metrics(job, region, run_id=status.run_id, since=time.time() - 2 * for_s - 60)
    )
    pending = 0
    if batches and batches[-1].end_offsets:
        _, spec = controller.spec(job, status.version)
        from tidegate.inputs.log import open_log

        log = open_log(controller.input_of(spec))
        read = {int(p): o for p, o in json.loads(batches[-1].end_offsets).items()}
        pending = sum(max(0, log.end_offset(p) - read.get(p, 0)) for p in range(log.partitions))
    return assess(
        status,
        batches,
        time.time(),
        max_delay_s=max_delay_s,
        for_s=for_s,
        stalled_after_s=stalled_after_s,
        pending_events=pending,
    )
