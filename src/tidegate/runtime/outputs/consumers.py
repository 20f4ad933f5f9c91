"""Which region's output consumers read (semantics §7): the switch and the rule it keeps.

Part of :class:`tidegate.runtime.jobs.controller.Controller` (a mixin over its ``db``,
``config``, ``actor`` and :meth:`status_of`). Failover (:mod:`tidegate.runtime.procedures.failover`)
and planned stops move consumers through :meth:`ConsumerSwitching.switch_active`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidegate.control.db import ControlDB
from tidegate.errors import ControllerError
from tidegate.eventtime.durations import format_time_us

if TYPE_CHECKING:
    from tidegate.runtime.jobs.config import PlatformConfig
    from tidegate.runtime.jobs.status import JobStatus


class ConsumerSwitching:
    # set by the class this is mixed into (Controller)
    db: ControlDB
    config: PlatformConfig
    actor: str

    if TYPE_CHECKING:
        # provided by StatusReads, beside which Controller mixes this in
        def status_of(self, job: str, region: str) -> JobStatus: ...

    def switch_active(self, job: str, to_region: str, reason: str, *, force: bool = False) -> dict[str, Any]:
        """Point consumers at ``to_region``. Refused unless its duplicate runs, has caught up,
        and its output is final at least as far as the current active region's — consumers
        must find every row they had, and the next ones, in the region they move to."""
        self.config.region(to_region)
        current = self.db.active_region(job)
        if current is not None and current.region == to_region:
            return {"job": job, "active": to_region, "switched": False, "reason": "already active"}
        problems = self.switch_problems(job, to_region)
        if problems and not force:
            self.db.record_operation(
                "switch-active",
                "refused",
                job=job,
                region=to_region,
                actor=self.actor,
                detail={"reason": reason, "problems": problems},
            )
            raise ControllerError(
                f"refusing to move consumers of job {job} to {to_region}: {'; '.join(problems)}",
                f"wait until {to_region} has caught up (tidegate job status {job}), or force the switch",
            )
        expect = current.region if current is not None else None
        if not self.db.set_active_region(job, to_region, reason, expect=expect):
            raise ControllerError(
                f"the active region of job {job} changed while switching",
                "look at tidegate job status and decide again",
            )
        self.db.record_operation(
            "switch-active",
            "done",
            job=job,
            region=to_region,
            actor=self.actor,
            detail={"from": expect, "reason": reason, "forced": bool(problems)},
        )
        from tidegate.runtime.outputs.reader import publish_view

        publish_view(self, job)
        return {
            "job": job,
            "active": to_region,
            "previous": expect,
            "switched": True,
            "reason": reason,
            "forced_over": problems,
        }

    def switch_problems(self, job: str, to_region: str) -> list[str]:
        """Why consumers of ``job`` may not move to ``to_region`` now (empty: they may): its
        duplicate must run caught up, its output final as far as the active region's. Reads only."""
        current = self.db.active_region(job)
        if current is not None and current.region == to_region:
            return []
        target = self.status_of(job, to_region)
        theirs = self.emitted_through(job, to_region)
        ours = self.emitted_through(job, current.region) if current is not None else None
        problems = []
        if target.state != "running" or not target.caught_up:
            problems.append(f"its duplicate is {target.state}{'' if target.caught_up else ', not caught up'}")
        # ours is None without a current region: checking current too only tells the type checker
        if current is not None and ours is not None and (theirs is None or theirs < ours):
            problems.append(
                f"its output is final through {format_time_us(theirs) or 'nothing'}, behind "
                f"{current.region}'s {format_time_us(ours)}"
            )
        return problems

    def consumer_gap(
        self, job: str, since: float, until: float | None = None, *, allowed_delay_s: float | None = None
    ) -> dict[str, Any]:
        """How far the consumer view fell behind the live stream from ``since`` to ``until``
        (default now), and for how long beyond ``allowed_delay_s``
        (:mod:`tidegate.runtime.outputs.consumer_gap`), as a procedure's record keeps it."""
        from tidegate.runtime.outputs.consumer_gap import DEFAULT_ALLOWED_DELAY_S, measure

        allowed = DEFAULT_ALLOWED_DELAY_S if allowed_delay_s is None else float(allowed_delay_s)
        return measure(self.db, job, list(self.config.regions), since, until, allowed_delay_s=allowed).to_dict()

    def emitted_through(self, job: str, region: str) -> int | None:
        """Where the region's output is final (its newest lineage's record), in µs."""
        lineages = self.db.lineages(job, region)
        return lineages[-1].emitted_through_us if lineages else None
