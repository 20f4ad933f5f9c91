"""The region supervisor: keeps jobs running that the operator asked to keep running.

``tidegate region supervise --region R`` runs where a region's drivers belong (on the driver
host of a deployment; as a detached process beside local drivers). Every few seconds it
reads the control database and, for each job deployed in its region:

* launches drivers the controller planned but left to it (regions whose launcher is
  ``supervisor``: the controller may run in an Airflow worker on another host);
* restarts a job whose driver died (``keep_running``) in mode ``last-stopped``, with the version
  it ran — from its checkpoint, so only the gap since the last commit is reprocessed — backing off
  1, 2, 4 … 60 s between attempts while it keeps dying, and back to 1 s once a driver
  has stayed up for five minutes;
* carries out forced stops of drivers on its host.

A driver that died unannounced is recorded lost by the restart's own look at it
(``reconcile``), which frees the job's lease for the next driver. One supervisor per
region: it holds the region's supervisor lease. It knows the controller only as
:class:`Tended` — the controller launches supervisors through
:func:`tidegate.runtime.jobs.process.ensure_supervisor` — so neither module imports the other.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tidegate.errors import TidegateError
from tidegate.processes import Recorded, this_process
from tidegate.runtime.jobs.liveness import LIVE
from tidegate.runtime.jobs.process import HOST, driver_alive, driver_here, supervisor_lease

LEASE_TTL_S = 30.0
BACKOFF_MIN_S = 1.0
BACKOFF_MAX_S = 60.0
HEALTHY_AFTER_S = 300.0
INTERVAL_S = 2.0  # between ticks: a driver that died is noticed within one


@dataclass
class _Backoff:
    delay_s: float = BACKOFF_MIN_S
    next_at: float = 0.0
    attempts: int = 0


class Tended(Protocol):
    """What a supervisor asks of the controller (:class:`tidegate.runtime.jobs.controller.Controller`)."""

    db: Any

    def region(self, name: str) -> Any: ...

    def launch(self, run_id: int, log_path: Path) -> Recorded: ...

    def reconcile(self, job: str, region: str) -> Any: ...

    def start(self, job: str, region: str, **options: Any) -> Any: ...


@dataclass
class Supervisor:
    controller: Tended
    region: str
    interval_s: float = INTERVAL_S
    say: Callable[[str], None] = field(default=lambda m: print(m, file=sys.stderr, flush=True))
    backoff: dict[str, _Backoff] = field(default_factory=dict)
    now: Callable[[], float] = time.time
    # run id → the driver process this supervisor launched for it, until the run is claimed
    launched: dict[int, Recorded] = field(default_factory=dict)

    @property
    def db(self):
        return self.controller.db

    def holder(self) -> str:
        return f"supervisor@{HOST}:{os.getpid()}"

    def has_work(self) -> bool:
        return any(d.desired == "running" and d.keep_running for d in self.db.deployments(region=self.region))

    def run_forever(self, once: bool = False, exit_when_idle_s: float | None = None) -> int:
        lease, me = supervisor_lease(self.region), this_process()
        if not self.db.acquire_lease(
            lease, self.holder(), LEASE_TTL_S, host=HOST, pid=me.pid, pid_started_at=me.started_at
        ):
            held = self.db.lease(lease)
            raise TidegateError(
                f"region {self.region} already has a supervisor ({held.holder if held else '?'})",
                "one supervisor per region; stop the other one first",
            )
        self.say(f"tidegate supervisor for region {self.region} on {HOST}, pid {os.getpid()}")
        stopping = []
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
        idle_since = time.time()
        try:
            while not stopping:
                if not self.db.renew_lease(lease, self.holder(), LEASE_TTL_S, pid=me.pid, pid_started_at=me.started_at):
                    self.say("supervisor lease lost: another supervisor took over; exiting")
                    return 3
                self.tick()
                if once:
                    return 0
                if self.has_work():
                    idle_since = time.time()
                elif exit_when_idle_s is not None and time.time() - idle_since > exit_when_idle_s:
                    self.say(f"no job to keep running in {self.region} for {exit_when_idle_s:.0f} s; exiting")
                    return 0
                time.sleep(self.interval_s)
            self.say("SIGTERM: stopping this host's drivers gracefully (they resume when the region comes back)")
            self._stop_local_drivers()
            return 0
        finally:
            self.db.release_lease(lease, self.holder())

    def _stop_local_drivers(self, grace_s: float = 60.0) -> None:
        """Ask the drivers on this host to finish their batch and exit; desired state stays
        'running', so the next supervisor restarts them from their checkpoints."""
        live = [
            r
            for d in self.db.deployments(region=self.region)
            if (r := self.db.latest_run(d.job, self.region)) is not None and r.status in LIVE and r.host == HOST
        ]
        for run in live:
            self.db.update_run(run.id, stop_requested_at=time.time())
        deadline = time.time() + grace_s
        while time.time() < deadline and any(driver_alive(r) for r in live):
            time.sleep(0.5)

    def tick(self) -> None:
        now = self.now()
        for dep in self.db.deployments(region=self.region):
            try:
                self._tend(dep, now)
            except TidegateError as exc:
                self.say(f"{dep.job}@{self.region}: {exc}")

    def _tend(self, dep, now: float) -> None:
        run = self.db.latest_run(dep.job, self.region)
        if run is not None and run.force_stop and run.status in LIVE and (driver := driver_here(run)) is not None:
            self.say(f"{dep.job}: forced stop of run {run.id} ({driver})")
            driver.terminate()
            return
        launcher = self.controller.region(self.region).launcher
        if (
            launcher == "supervisor"
            and run is not None
            and run.status == "starting"
            and run.started_at is None
            and dep.desired == "running"
            and self.controller.reconcile(dep.job, self.region).alive
        ):
            # (not launched while its start lease lasted: recorded lost above, and restarted below)
            if (launched := self.launched.get(run.id)) is not None and launched.alive():
                # launched and still claiming its run, which takes seconds on a busy host: a second
                # process would find the run claimed and exit, and the PID it was launched with,
                # written over the claimer's, would make the run look lost
                return
            log_path = self.controller.region(self.region).job_dir(dep.job) / "drivers" / f"run-{run.id}.log"
            self.db.update_run(run.id, log_path=str(log_path))
            driver = self.controller.launch(run.id, log_path)
            # one entry per run still claiming: a region's supervisor launches every job's runs
            self.launched = {r: p for r, p in self.launched.items() if p.alive()} | {run.id: driver}
            self.say(f"{dep.job}: launched run {run.id} ({driver})")
            return
        if dep.desired != "running" or not dep.keep_running:
            return
        status = self.controller.reconcile(dep.job, self.region)
        backoff = self.backoff.setdefault(dep.job, _Backoff())
        if status.alive:
            if status.started_at and now - status.started_at > HEALTHY_AFTER_S:
                self.backoff[dep.job] = _Backoff()
            return
        if now < backoff.next_at:
            return
        backoff.attempts += 1
        self.say(f"{dep.job}: driver is {status.state} ({status.detail}); restart attempt {backoff.attempts}")
        self.db.record_operation(
            "auto-restart",
            "done",
            job=dep.job,
            region=self.region,
            actor="supervisor",
            detail={"previous_state": status.state, "attempt": backoff.attempts, "previous_run": status.run_id},
        )
        backoff.next_at = now + backoff.delay_s
        backoff.delay_s = min(BACKOFF_MAX_S, backoff.delay_s * 2)
        try:
            # the version the region ran, not the newest registered: after a rollback that is the
            # previous version, and the failed one must not come back with a restart
            self.controller.start(
                dep.job,
                self.region,
                version=run.version if run is not None else None,
                mode="last-stopped",
                wait_s=0,
                # the run it relaunches: a retried step that started that one adopts this one
                context={"auto_restart": backoff.attempts, "relaunch_of": run.id if run is not None else None},
            )
        except TidegateError as exc:
            self.db.record_operation(
                "auto-restart",
                "failed",
                job=dep.job,
                region=self.region,
                actor="supervisor",
                detail={"error": str(exc)},
            )
            raise
