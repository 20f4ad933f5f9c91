"""Stopping a job in a region: gracefully, then by force, and never the last healthy duplicate.

Part of :class:`tidegate.runtime.jobs.controller.Controller` (a mixin over its ``db``,
``config``, ``actor``, ``now`` and the status reads of :class:`StatusReads`, beside which it is
mixed in). A stop a retried step already asked for is waited for, not asked again
(:func:`tidegate.runtime.jobs.adoption.adopt_stop`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tidegate.control.db import ControlDB
from tidegate.errors import ControllerError
from tidegate.runtime.jobs.adoption import adopt_stop
from tidegate.runtime.jobs.liveness import LIVE, RunState
from tidegate.runtime.jobs.process import driver_here

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

    from tidegate.jobspec import JobSpec
    from tidegate.runtime.jobs.config import PlatformConfig
    from tidegate.runtime.jobs.status import JobStatus


class Stopping:
    # set by the class this is mixed into (Controller)
    db: ControlDB
    config: PlatformConfig
    actor: str
    now: Callable[[], float]

    if TYPE_CHECKING:
        # provided by StatusReads and Controller, beside which this is mixed in
        def status_of(self, job: str, region: str) -> JobStatus: ...
        def reconcile(self, job: str, region: str) -> JobStatus: ...
        def _existing_run(self, run_id: int) -> Row: ...
        def _mark_lost(self, run: Row, why: str) -> str: ...
        def spec(self, job: str, version: int | None = None) -> tuple[int, JobSpec]: ...

    def stop(
        self, job: str, region: str, *, grace_s: float = 60.0, force: bool = False, wait: bool = True, reason: str = ""
    ) -> JobStatus:
        """Graceful stop: the driver finishes its micro-batch, commits and exits. After
        ``grace_s`` it is stopped hard (the unfinished batch runs again on the next start).
        Refused when it would leave a paired job with no healthy duplicate, unless ``force``."""
        self.config.region(region)
        current = self.reconcile(job, region)  # a driver that died unannounced is recorded lost here
        # a stop already under way (a retried step's first attempt asked for it) is waited for,
        # not asked again: the partner check guards a stop that is yet to happen
        under_way = adopt_stop(current.state, self._existing_run(current.run_id) if current.run_id else None)
        if not force and under_way is None:
            self._check_partner_keeps_running(job, region, "stop")
        self.db.set_deployment(job, region, version=current.version or self.spec(job)[0], desired="stopped")
        if not current.alive:
            self.db.record_operation(
                "stop",
                "done",
                job=job,
                region=region,
                actor=self.actor,
                detail={"note": f"was not running ({current.state})", "reason": reason},
            )
            return current
        assert current.run_id is not None, "a live status is a run's"
        if under_way is None:
            self.db.update_run(current.run_id, stop_requested_at=self.now())
        self.db.record_operation(
            "stop",
            "done",
            job=job,
            region=region,
            actor=self.actor,
            detail={"run": current.run_id, "force": force, "reason": reason}
            | ({} if under_way is None else {"adopted": under_way}),
        )
        if not wait:
            return self.status_of(job, region)
        deadline = self.now() + grace_s + 30.0
        while self.now() < deadline:
            status = self.reconcile(job, region)
            if not status.alive:
                self._wait_exit(status, deadline)
                return status
            time.sleep(0.2)
        return self._force_stop(job, region, current.run_id)

    def _wait_exit(self, status: JobStatus, deadline: float) -> None:
        """The run said it stopped; on this host, also wait for its process (Spark's shutdown)."""
        if status.run_id is None:
            return
        process = driver_here(self._existing_run(status.run_id))
        if process is None:
            return
        while process.alive() and self.now() < deadline:
            time.sleep(0.1)
        process.terminate()  # nothing to do when it is gone

    def _force_stop(self, job: str, region: str, run_id: int) -> JobStatus:
        run = self._existing_run(run_id)
        self.db.update_run(run_id, force_stop=True)
        if (process := driver_here(run)) is not None:
            process.terminate()
        time.sleep(0.5)
        run = self._existing_run(run_id)
        if run.status in LIVE:
            self._mark_lost(run, "stopped by force after the grace time")
            self.db.update_run(run_id, status=RunState.STOPPED.value)
        return self.status_of(job, region)

    def _check_partner_keeps_running(self, job: str, region: str, action: str) -> None:
        partner = self._partner(job, region)
        if partner is None:
            return
        other = self.status_of(job, partner)
        me = self.status_of(job, region)
        if not me.alive:
            return
        if other.state != "running" or not other.caught_up:
            self.db.record_operation(
                action,
                "refused",
                job=job,
                region=region,
                actor=self.actor,
                detail={"partner": partner, "partner_state": other.state, "partner_caught_up": other.caught_up},
            )
            raise ControllerError(
                f"refusing to {action} job {job} in {region}: its duplicate in {partner} is "
                f"{other.state}{'' if other.caught_up or other.state != 'running' else ' and not caught up'}, "
                "so this is the last healthy duplicate",
                f"bring {partner} up and wait until it has caught up, or pass force to {action} anyway",
            )

    def _partner(self, job: str, region: str) -> str | None:
        """The partner region where this job is deployed too (None: the job is not paired)."""
        if len(self.config.regions) != 2:
            return None
        partner = self.config.partner(region).name
        return partner if self.db.deployment(job, partner) is not None else None
