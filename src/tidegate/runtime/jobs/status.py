"""Where a job stands in a region, read from the control database — and, apart, who records a lost run.

:meth:`StatusReads.status_of` reads: the latest run, its liveness (decided by
:func:`tidegate.runtime.jobs.liveness.judge_run`, the page's rule too), and its lineage's figures.
It writes nothing, so any process may call it — an Airflow trigger polling, ``tidegate job
status``, a supervisor — as often as it likes.

A run found lost while its row still says live is recorded by whoever owns the run's
life: the controller's start and stop, and the region supervisor's tend loop, through
:meth:`StatusReads.reconcile` — which marks the run lost, frees its lease, and kills a driver
still present on this host (paused, hung) so it cannot wake up beside its successor.

Part of :class:`tidegate.runtime.jobs.controller.Controller` (a mixin over its ``db``, ``now``
and ``config``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Row

from tidegate.control.db import ControlDB, loads
from tidegate.errors import ControllerError
from tidegate.eventtime.durations import format_time_us
from tidegate.runtime.jobs.liveness import LIVE, RunState, judge_run, local_process_alive, lost_because
from tidegate.runtime.jobs.process import HOST, driver_alive, driver_here, job_lease

if TYPE_CHECKING:
    from tidegate.runtime.jobs.config import PlatformConfig


@dataclass(frozen=True)
class JobStatus:
    job: str
    region: str
    state: RunState | str  # a RunState: running | starting | stopping | stopped | failed | lost | never
    version: int | None = None
    desired: str | None = None
    active: bool = False
    run_id: int | None = None
    pid: int | None = None
    host: str | None = None
    start_mode: str | None = None
    checkpoint: str | None = None
    partial: bool = False
    lineage: str | None = None
    started_at: float | None = None
    caught_up: bool = False
    last_output_us: int | None = None
    job_watermark_us: int | None = None
    watermark_delay_s: float | None = None
    processing_lag_s: float | None = None
    input_rate_eps: float | None = None
    backlog_events: int | None = None
    last_batch_at: float | None = None
    counts: dict = field(default_factory=dict)
    detail: str | None = None
    log_path: str | None = None

    @property
    def alive(self) -> bool:
        return self.state in LIVE

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["state"] = str(self.state)  # plain text for XCom, JSON and YAML alike
        return out


class StatusReads:
    """Status, waits and the recording of lost runs (see the module docstring)."""

    # set by the class this is mixed into (Controller)
    db: ControlDB
    config: PlatformConfig
    now: Callable[[], float]

    def status(self, job: str | None = None, region: str | None = None) -> list[JobStatus]:
        jobs = [job] if job else self.db.jobs()
        regions = [region] if region else list(self.config.regions)
        return [self.status_of(j, r) for j in jobs for r in regions]

    def status_of(self, job: str, region: str) -> JobStatus:
        """The job's state in ``region`` and its latest figures; writes nothing, so anyone may
        poll it. Whether the driver is alive: :func:`tidegate.runtime.jobs.liveness.judge_run`."""
        dep = self.db.deployment(job, region)
        run = self.db.latest_run(job, region)
        active = self.db.active_region(job)
        is_active = active is not None and active.region == region
        if run is None:
            return JobStatus(
                job,
                region,
                RunState.NEVER,
                version=dep.version if dep else None,
                desired=dep.desired if dep else None,
                active=is_active,
            )
        verdict = self._judge(run)
        # a run that continues a checkpoint continues its lineage: until it finishes a batch of
        # its own, the lineage's last batch, output and totals are what is true of the job
        last = self._last_batch_of_lineage(job, region, run)
        lineage = self.db.lineage(run.lineage) if run.lineage else None
        last_output_us = (
            run.last_output_us
            if run.last_output_us is not None
            else (lineage.last_output_us if lineage is not None else None)
        )
        watermark_us = (
            run.job_watermark_us
            if run.job_watermark_us is not None
            else (last.job_watermark_us if last is not None else None)
        )
        rate = None
        if last is not None and last.stages:
            rate = (loads(last.stages) or {}).get("input_rate_eps")
        return JobStatus(
            job=job,
            region=region,
            state=verdict.state,
            version=run.version,
            desired=dep.desired if dep else None,
            active=is_active,
            run_id=run.id,
            pid=run.pid,
            host=run.host,
            start_mode=run.start_mode,
            checkpoint=run.checkpoint,
            partial=bool(run.partial),
            lineage=run.lineage,
            started_at=run.started_at,
            caught_up=run.caught_up_at is not None,
            last_output_us=last_output_us,
            job_watermark_us=watermark_us,
            watermark_delay_s=None
            if last is None or last.watermark_delay_us is None
            else last.watermark_delay_us / 1e6,
            # recorded on the broker's clock at the batch, growing with the time since: a stuck
            # job's lag keeps rising while a job merely waiting for data stays near zero
            processing_lag_s=None
            if last is None or last.processing_lag_us is None
            else last.processing_lag_us / 1e6 + max(0.0, self.now() - last.processed_at),
            input_rate_eps=rate,
            backlog_events=run.backlog_events,
            last_batch_at=last.processed_at if last else None,
            counts=self.db.lineage_totals(run.lineage) if run.lineage else self.db.run_totals(run.id),
            detail=verdict.detail,
            log_path=run.log_path,
        )

    def reconcile(self, job: str, region: str) -> JobStatus:
        """:meth:`status_of`, and its finding recorded: a run whose driver is gone while its row
        still says live is marked lost (its lease freed, a process still present here killed).
        Called by whoever owns the run's life: start, stop, the region supervisor, a drill."""
        status = self.status_of(job, region)
        if status.state != RunState.LOST or status.run_id is None:
            return status
        run = self._existing_run(status.run_id)
        verdict = self._judge(run)  # read again: the driver may have recorded its own end meanwhile
        if not verdict.newly_lost:
            return status
        return replace(status, detail=self._mark_lost(run, lost_because(verdict.why)))

    def _existing_run(self, run_id: int) -> Row:
        """The row of a run the control database has named: runs are never deleted."""
        run = self.db.run(run_id)
        if run is None:
            raise ControllerError(
                f"run {run_id} is not in the control database",
                "check that TIDEGATE_CONTROL_DB names the database the run was planned in",
            )
        return run

    def _judge(self, run: Row):
        """The run's liveness on the database's clock (one clock for every host) and, for a
        driver on this host, its process."""
        lease = lease_now = None
        if run.status in LIVE:
            lease, lease_now = self.db.lease(job_lease(run.job, run.region)), self.db.clock()
        return judge_run(
            run, lease, now=self.now(), lease_now=lease_now, process_alive=local_process_alive(run, HOST, driver_alive)
        )

    def _last_batch_of_lineage(self, job: str, region: str, run: Row) -> Row | None:
        """The newest batch metrics of ``run``, else of the runs before it on its lineage."""
        for earlier in self.db.runs(job, region):
            if earlier.id > run.id or (earlier.id != run.id and earlier.lineage != run.lineage):
                continue
            metrics = self.db.batch_metrics(job, region, run_id=earlier.id, limit=1)
            if metrics:
                return metrics[-1]
        return None

    def _mark_lost(self, run: Row, why: str) -> str:
        """Record the run as lost and free its lease. A lost driver still present on this
        host (paused, hung) is killed first: it must not wake up beside its successor (on
        another host, fencing refuses its commits)."""
        if (process := driver_here(run)) is not None:
            process.terminate(grace_s=0)
            why += f" (its process {run.pid} was still present: killed)"
        detail = f"{why}; last heartbeat {_ago(run.heartbeat_at, self.now())}"
        self.db.update_run(
            run.id, status=RunState.LOST.value, status_detail=detail, ended_at=run.ended_at or self.now()
        )
        self.db.release_lease(job_lease(run.job, run.region), f"run-{run.id}")
        return detail

    def wait_for(
        self, job: str, region: str, predicate: Callable[[JobStatus], bool], timeout_s: float, what: str
    ) -> JobStatus:
        deadline = self.now() + timeout_s
        while True:
            status = self.status_of(job, region)
            if predicate(status):
                return status
            if status.state in ("failed", "lost", "stopped"):
                raise ControllerError(
                    f"job {job} in {region} is {status.state} while waiting until {what}: {status.detail}",
                    f"see the driver log {status.log_path}",
                )
            if self.now() >= deadline:
                raise ControllerError(
                    f"job {job} in {region} did not get {what} within {timeout_s:.0f} s "
                    f"(backlog {status.backlog_events} events, watermark {format_time_us(status.job_watermark_us)})",
                    "look at its metrics (tidegate job status) and driver log; raise the timeout if it is just slow",
                )
            time.sleep(0.5)


def _ago(at: float | None, now: float) -> str:
    return "never" if at is None else f"{now - at:.0f} s ago"
