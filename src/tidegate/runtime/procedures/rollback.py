"""Rolling a failed upgrade back (semantics §7): a new version that does not become healthy in
time, or whose output fails its completeness check, gives way to the previous one.

A version that did not become healthy: the previous version continues from where the output
is final — a start in ``last-stopped`` mode with the previous version's logic. Its
fingerprint differs from the failed lineage's, so it replays from that lineage's last final
point in a fresh lineage of its own; the reader's spans make the hand-over gapless and
duplicate-free, whether the failed version emitted nothing (the cut is then where the
previous version stopped) or some windows (which stay as they were emitted: nothing proved
them wrong).

A version whose output failed its check (``discard_output``): what it emitted is wrong, so
the previous version resumes from where *it* stopped — a replay from the failed version's
first output time (:func:`failed_output_from`), whose new lineage ends the failed lineages'
spans there, so no reader sees a row of the failed version again. Consumers stay on, or
move to, a region that runs; they are never moved to the region being rolled back.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from tidegate.errors import TidegateError


@dataclass(frozen=True)
class Rollback:
    job: str
    region: str
    failed_version: int | None
    restored_version: int
    run_id: int
    checkpoint: str
    caught_up: bool
    consumers_read: str | None
    why: str
    seconds: float
    resumed_from_us: int | None = None  # the previous version's first output time; None: where the output was final
    discarded_lineages: tuple[str, ...] = ()  # the failed version's lineages no reader sees any more

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"discarded_lineages": list(self.discarded_lineages)}


def roll_back(
    controller,
    job: str,
    region: str,
    previous_version: int,
    why: str,
    *,
    timeout_s: float = 1800.0,
    discard_output: bool = False,
) -> Rollback:
    """Stop what runs of the failed version in ``region``, start ``previous_version`` — from
    where the output is final, or with ``discard_output`` from where the failed version's
    output began — wait (bounded) until it has caught up, and keep consumers on a running
    region. Recorded as the operation ``rollback``."""
    from tidegate.runtime.procedures.failover import fail_over

    started = time.monotonic()
    failed = controller.status_of(job, region)
    discarded, resume_at = (
        failed_output_from(controller.db, job, region, failed.version) if discard_output else ((), None)
    )
    active = controller.db.active_region(job)
    if resume_at is not None and active is not None and active.region == region:
        # the output consumers read is wrong and is about to be replayed: they read the partner meanwhile
        try:
            fail_over(controller, job, region, f"rollback of {job} in {region}: {why}", wait_s=60.0)
        except TidegateError:
            pass  # the partner cannot serve either: consumers stay, the record says where they read
    result = _restart_previous(controller, job, region, previous_version, failed.version, why, resume_at)
    caught_up = True
    try:
        controller.wait_for(
            job,
            region,
            lambda s: s.state == "running" and s.caught_up,
            timeout_s,
            f"version {previous_version} caught up after the rollback",
        )
    except TidegateError:
        caught_up = False
    active = controller.db.active_region(job)
    if active is not None and active.region == region and not caught_up:
        try:
            fail_over(controller, job, region, f"rollback of {job} in {region} has not caught up")
        except TidegateError:
            pass  # the partner cannot serve either: consumers stay, the record says so
    active = controller.db.active_region(job)
    done = Rollback(
        job,
        region,
        failed.version,
        previous_version,
        result.run_id,
        result.plan.checkpoint,
        caught_up,
        active.region if active else None,
        why,
        round(time.monotonic() - started, 1),
        resume_at,
        discarded,
    )
    controller.db.record_operation(
        "rollback",
        "done" if caught_up else "failed",
        job=job,
        region=region,
        actor=controller.actor,
        detail=done.to_dict(),
    )
    return done


def failed_output_from(db, job: str, region: str, failed_version: int | None) -> tuple[tuple[str, ...], int | None]:
    """The failed version's latest lineages in ``region`` (those after the last lineage of
    another version) and where the first of them began its output: where the version
    before it stopped. ``None`` when it began with the log, or hands over by input position
    (a per-event job): the previous version then continues where the output is final."""
    ids: list[str] = []
    begins = None
    for lineage in reversed(db.lineages(job, region)):
        if lineage.version != failed_version:
            break
        ids.insert(0, lineage.id)
        begins = lineage.output_from_us if lineage.windowed else None
    return (tuple(ids), begins) if begins is not None else ((), None)


def _restart_previous(
    controller,
    job: str,
    region: str,
    previous_version: int,
    failed_version: int | None,
    why: str,
    resume_at_us: int | None = None,
    attempts: int = 5,
):
    """Stop the failed version — also when its driver is already dead: the stop makes the
    deployment's desired state 'stopped', so the supervisor no longer restarts it — and
    start the previous one. A supervisor's restart already under way when the stop landed
    can still start a driver of the failed version; it is stopped in turn, and the start
    tried again."""
    for attempt in range(attempts):
        controller.stop(job, region, grace_s=10, force=True, reason=f"rollback: {why}")
        try:
            mode = "last-stopped" if resume_at_us is None else "custom"
            return controller.start(
                job,
                region,
                version=previous_version,
                mode=mode,
                at=resume_at_us,
                keep_running=True,
                context={"rollback_of": failed_version, "why": why},
            )
        except TidegateError:
            if not controller.status_of(job, region).alive or attempt == attempts - 1:
                raise
            time.sleep(1.0)
    raise AssertionError("unreachable")
