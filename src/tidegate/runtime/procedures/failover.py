"""Failing consumers over from a region that is failing or gone (semantics §7).

A planned switch (:meth:`Controller.switch_active`) is refused unless the partner's output
is final at least as far as the active region's: consumers must find every row they had.
That rule protects a switch between two healthy regions; it must not keep consumers on a
region that is gone. A failing region that is still there (its driver restarted by
keep-running, or slow) keeps the rule, but the partner gets the same bounded wait to meet it
before the switch is refused. Here, when the active region is lost (its driver dead, or its storage
gone), consumers move to the survivor once the survivor's output is final past the lost
region's last final point (as the control database recorded it), waiting for that — the
duplicates are seconds apart — up to a bound. Past the bound the switch happens anyway,
recorded as *catching up* through that point: a region whose storage is gone serves
nobody, and the survivor's rows up to there follow as it catches up, none doubled.

Failing over is idempotent: a request for a region consumers no longer read is a no-op
that says where they read now.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from tidegate.errors import TidegateError
from tidegate.eventtime.durations import format_time_us

WAIT_S = 120.0
LOCK_SLACK_S = 600.0  # the steps around a procedure's restart: switches, checks, the record


def lock_ttl_s(timeout_s: float) -> float:
    """How long a procedure whose restart may take ``timeout_s`` to catch up holds the job's
    procedure lock: twice that and :data:`LOCK_SLACK_S`, so the lock outlasts a slow procedure
    with room to spare yet frees the job once one died without ending. Failovers and drills
    take it alike."""
    return 2 * timeout_s + LOCK_SLACK_S


@dataclass(frozen=True)
class FailoverResult:
    job: str
    from_region: str
    to_region: str
    switched: bool
    reason: str
    waited_s: float = 0.0
    catching_up_through_us: int | None = None  # the survivor was still behind this point at the switch

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def region_gone(controller, job: str, region: str) -> str | None:
    """Why ``region`` cannot serve ``job``'s consumers any more, or None while it can."""
    lost = storage_lost(controller.config.region(region), job)
    if lost:
        return lost
    status = controller.status_of(job, region)
    if not status.alive:
        return f"its driver is {status.state}"
    return None


def storage_lost(region, job: str) -> str | None:
    """Why ``job``'s place in ``region``'s storage cannot be read, or None while it can. On an
    S3 root the store must answer: a stopped or unreachable store fails the look-up within its
    :class:`~tidegate.storage.s3.S3Settings` bounds (attempts × timeouts), which is the loss."""
    try:
        store = region.store()
        if not store.exists(store.path_of(region.job_root(job))):
            return "its storage is gone"
    except (OSError, TidegateError) as failed:
        detail = str(failed).splitlines()[0][:200] if str(failed) else type(failed).__name__
        return f"its storage does not answer ({detail})"
    return None


def fail_over(
    controller,
    job: str,
    from_region: str,
    reason: str,
    *,
    wait_s: float = WAIT_S,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> FailoverResult:
    """Move ``job``'s consumers off ``from_region`` to its partner."""
    db = controller.db
    to_region = controller.config.partner(from_region).name
    active = db.active_region(job)
    if active is None:
        raise TidegateError(
            f"job {job} has no active region: nothing to fail over",
            f"deploy and start it first (tidegate job start {job} --region {to_region})",
        )
    if active.region != from_region:
        return FailoverResult(
            job,
            from_region,
            active.region,
            False,
            f"consumers already read {active.region} (since "
            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(active.since))}: {active.reason}); "
            "nothing to fail over",
        )
    gone = region_gone(controller, job, from_region)
    if gone is None:  # a failing but present region: the planned switch's rules hold — and the
        # duplicates are seconds apart, so the partner gets up to ``wait_s`` to meet them
        started = monotonic()
        while controller.switch_problems(job, to_region) and monotonic() - started < wait_s:
            sleep(1.0)
        switched = controller.switch_active(job, to_region, reason)  # still refused past the bound
        return FailoverResult(
            job, from_region, to_region, bool(switched.get("switched")), reason, round(monotonic() - started, 1)
        )
    survivor = controller.status_of(job, to_region)
    if not survivor.alive:
        raise TidegateError(
            f"cannot fail {job} over from {from_region} ({gone}): {to_region} is {survivor.state} too",
            f"start it (tidegate job start {job} --region {to_region} --mode last-stopped); consumers stay put",
        )
    lost_final = controller.emitted_through(job, from_region)
    started = monotonic()
    while True:
        theirs = controller.emitted_through(job, to_region)
        if lost_final is None or (theirs is not None and theirs >= lost_final):
            behind = None
            break
        if monotonic() - started >= wait_s:
            behind = lost_final
            break
        sleep(1.0)
    waited = monotonic() - started
    why = f"{reason}: {from_region} lost ({gone})"
    if behind is not None:
        why += f"; {to_region} catching up through {format_time_us(behind)}"
    controller.switch_active(job, to_region, why, force=True)
    db.record_operation(
        "failover",
        "done",
        job=job,
        region=to_region,
        actor=controller.actor,
        detail={
            "from": from_region,
            "gone": gone,
            "waited_s": round(waited, 1),
            "lost_final_us": lost_final,
            "catching_up_through_us": behind,
        },
    )
    return FailoverResult(job, from_region, to_region, True, why, waited, behind)


def assess(
    controller, job: str, from_param: str, reason: str, *, only_if_unhealthy: bool, max_delay_s: float, for_s: float
) -> dict:
    """Whether a failover request should act; ``act`` False with ``say`` telling why not:
    the region is healthy (with ``only_if_unhealthy``), consumers already moved off it, or
    another procedure owns the job right now (it decides; this request joins it)."""
    from tidegate.runtime.procedures.health import assess_region

    active = controller.db.active_region(job)
    failing = active.region if from_param == "active" and active else from_param
    base = {"job": job, "from": failing, "to": controller.config.partner(failing).name}
    running = controller.db.procedure_lock(job)
    if running is not None:
        return {
            **base,
            "act": False,
            "say": f"{running.kind} of {job} is already running (procedure "
            f"{running.procedure_id}): this request joins it and does nothing",
        }
    if active is not None and active.region != failing:
        return {
            **base,
            "act": False,
            "say": f"consumers of {job} already read {active.region} ({active.reason}): "
            f"{failing} was failed over before; nothing to do",
        }
    health = assess_region(controller, job, failing, max_delay_s=max_delay_s, for_s=for_s, stalled_after_s=for_s)
    say = f"{job} in {failing}: {'healthy' if health.healthy else 'UNHEALTHY'} — {health.reason}"
    if health.healthy and only_if_unhealthy:
        return {**base, "act": False, "say": say}
    return {**base, "act": True, "say": say, "health": health.reason, "reason": f"{reason}: {failing} {health.reason}"}


def begin(controller, assessed: dict, *, ttl_s: float, wait_s: float = WAIT_S) -> dict:
    """Take the job's procedure lock as a ``failover`` and move consumers; the procedure id
    and what happened. Raises ProcedureBusy when another procedure holds the job."""
    job = assessed["job"]
    procedure = controller.db.begin_procedure(
        "failover", job, assessed["from"], ttl_s=ttl_s, detail=assessed.get("reason")
    )
    try:
        result = fail_over(controller, job, assessed["from"], assessed["reason"], wait_s=wait_s)
    except TidegateError as exc:
        controller.db.finish_procedure(procedure, "failed", detail=str(exc))
        raise
    basis = estimate_restore(controller, job, assessed["from"])
    return {
        "procedure": procedure,
        **result.to_dict(),
        "estimate_s": basis and basis["seconds"],
        "estimate_basis": basis,
    }


def estimate_restore(controller, job: str, region: str) -> dict | None:
    """The basis of the estimate of restoring ``region`` after consumers moved off it: a
    ``last-stopped`` start (its checkpoint resumed, or — its storage gone — the replay of its
    history), term by term (:mod:`tidegate.runtime.estimates.recovery`); None when the model
    cannot make one."""
    from tidegate.runtime.estimates.recovery import estimate
    from tidegate.runtime.jobs import planning

    try:
        _, spec = controller.spec(job)
        plan = planning.plan(controller, job, region, "last-stopped", spec=spec, accept_partial=True)
        return estimate(controller, job, region, plan, spec).basis()
    except TidegateError:  # no estimate is no reason to leave consumers on a failing region
        return None
