"""The job controller: deploy, start, stop, restart and status for a job in a region.

The controller changes what the control database says and launches drivers; it never
runs a streaming query itself, so the CLI command or Airflow task calling it can exit
while the driver goes on. Rules it enforces, whoever calls it:

* one driver per job × region — a lease, taken atomically before a driver is launched;
* a job's logic never changes under a version number, and a changed logic never resumes
  an old checkpoint (:mod:`tidegate.runtime.planning` decides reuse vs replay);
* the two duplicates of a paired job are never stopped at the same time: stopping the
  last healthy one is refused unless forced;
* a start whose input was deleted by retention is refused unless partial results are
  accepted (and then the run is marked partial).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from sqlalchemy.engine import Row

from tidegate.control.db import REFUSED, ControlDB, loads
from tidegate.errors import ConfigError, TidegateError
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.jobspec import JobSpec, load_spec, parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.runtime import planning
from tidegate.runtime.config import PlatformConfig, Region, load_config
from tidegate.runtime.liveness import LIVE, RunState, judge_run, local_process_alive, lost_because
from tidegate.runtime.planning import PreviousLineage, StartPlan
from tidegate.runtime.process import HOST, ensure_supervisor, job_lease, pid_alive, spawn_detached, tail, terminate

START_LEASE_TTL_S = 180.0  # covers the driver's JVM start; the driver then renews every second


class ControllerError(TidegateError):
    """An operation the controller refuses, with the reason and the way forward."""


@dataclass(frozen=True)
class DeployResult:
    job: str
    version: int
    fingerprint: str
    new: bool

    def describe(self) -> str:
        what = "registered" if self.new else "already registered (same logic)"
        return f"job {self.job} version {self.version} {what}; fingerprint {self.fingerprint[:12]}"


@dataclass(frozen=True)
class StartResult:
    run_id: int
    job: str
    region: str
    version: int
    plan: StartPlan
    pid: int | None
    log_path: Path
    status: str

    def describe(self) -> str:
        return (f"job {self.job} v{self.version} in {self.region}: run {self.run_id} {self.status}"
                f" (pid {self.pid}, log {self.log_path})\n{self.plan.describe()}")


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


class Controller:
    def __init__(self, config: PlatformConfig | None = None, db: ControlDB | None = None, *,
                 actor: str | None = None, now: Callable[[], float] = time.time) -> None:
        self.config = config or load_config()
        self.db = db or ControlDB(self.config.control_db)
        self.actor = actor or "cli"
        self.now = now

    # -- deploy --------------------------------------------------------------------------
    def deploy(self, spec_path: str | Path) -> DeployResult:
        """Register a job version from its spec file (idempotent for the same logic)."""
        path = Path(spec_path)
        spec = load_spec(path)
        new = self.db.register_version(
            spec.name, spec.version, spec.fingerprint, spec.to_dict(), path.read_text(), str(path.resolve()),
            spec.description,
        )
        self.db.record_operation("deploy", "done", job=spec.name, actor=self.actor,
                                 detail={"version": spec.version, "fingerprint": spec.fingerprint, "new": new})
        return DeployResult(spec.name, spec.version, spec.fingerprint, new)

    def spec(self, job: str, version: int | None = None) -> tuple[int, JobSpec]:
        row = self.db.version(job, version)
        if row is None:
            known = ", ".join(self.db.jobs()) or "none"
            which = f"version {version} of job {job}" if version is not None else f"job {job}"
            raise ControllerError(f"{which} is not registered (registered jobs: {known})",
                                  "deploy it first: tidegate job deploy jobs/<spec>.yaml")
        spec = parse_spec(json.loads(row.spec_json), origin=f"{job} v{row.version}")
        if spec.fingerprint != row.fingerprint:
            raise ControllerError(
                f"job {job} v{row.version} as stored reads back with fingerprint {spec.fingerprint[:12]}, "
                f"not the {row.fingerprint[:12]} it was registered with",
                "this Tidegate normalises specs differently from the one that registered it: register a new version",
            )
        return row.version, spec

    # -- start ---------------------------------------------------------------------------
    def start(
        self, job: str, region: str, *, version: int | None = None, mode: str = "auto", at: str | int | None = None,
        accept_partial: bool = False, keep_running: bool | None = None, wait_s: float = 180.0,
        context: dict | None = None,
    ) -> StartResult:
        """Plan and launch a driver. ``mode`` ``auto``: ``last-stopped`` when the job ran in
        this region before, otherwise ``now``. Returns once the driver runs (or failed)."""
        reg = self.config.region(region)
        version, spec = self.spec(job, version)
        current = self.reconcile(job, region)  # a lost driver's lease is freed (and its process killed) here
        if current.alive:
            raise ControllerError(
                f"job {job} already runs in {region} (run {current.run_id}, {current.state}, pid {current.pid} on {current.host})",
                f"stop it first (tidegate job stop {job} --region {region}) or use restart",
            )
        previous = planning.previous_lineage(self, job, region)
        mode = planning.resolve_mode(mode, previous)
        at_us = parse_time_us(at, field="--at") if isinstance(at, str) else at
        hub = self.hub_of(spec)
        try:
            plan = planning.plan(self, job, region, mode, spec=spec, at_us=at_us, previous=previous,
                                 accept_partial=accept_partial)
        except TidegateError as exc:
            self.db.record_operation("start", "refused", job=job, region=region, actor=self.actor,
                                     detail={"mode": mode, "reason": str(exc)})
            raise
        root = reg.job_dir(job) / "lineages" / plan.lineage_id
        estimate_s = self._model_estimate(job, region, spec, plan)
        run_id = self.db.create_run(
            job=job, region=region, version=version, fingerprint=spec.fingerprint, lineage=plan.lineage_id,
            kind="job", hub=str(hub), start_mode=plan.mode, output_start_us=plan.output_start_us,
            lookback_us=plan.lookback_us, input_from_us=plan.input_from_us,
            starting_offsets=None if plan.starting_offsets is None else {str(p): o for p, o in plan.starting_offsets.items()},
            checkpoint=plan.checkpoint, checkpoint_reason=plan.reason, partial=plan.partial,
            partial_reason=plan.partial_reason, status="starting", estimate_model_s=estimate_s,
            context={"actor": self.actor, "handover_us": _handover(plan, previous), **(context or {})},
        )
        if not self.db.acquire_lease(job_lease(job, region), f"run-{run_id}", START_LEASE_TTL_S, host=HOST):
            holder = self.db.lease(job_lease(job, region))
            # "refused", not "failed": the job's latest run is the one that won the lease, so
            # status and the supervisor keep following it instead of this attempt
            self.db.update_run(run_id, status=REFUSED, ended_at=self.now(),
                               status_detail=f"not started: the lease is held by {holder.holder if holder else '?'}")
            self.db.record_operation("start", "refused", job=job, region=region, actor=self.actor,
                                     detail={"run": run_id, "reason": "lease held"})
            raise ControllerError(
                f"job {job} in {region} was started by someone else at the same moment "
                f"({holder.holder if holder else 'unknown holder'} holds its lease)",
                "check `tidegate job status`; one driver per job and region is the rule",
            )
        if plan.new_lineage:
            self._open_lineage(job, region, version, spec, plan, root, run_id)
        self.db.set_deployment(job, region, version=version, desired="running", current_run=run_id,
                               **({} if keep_running is None else {"keep_running": keep_running}))
        if self.db.active_region(job) is None:
            self.db.set_active_region(job, region, f"first region started ({region})")
            from tidegate.runtime.reader import publish_view

            publish_view(self, job)
        log_path = reg.job_dir(job) / "drivers" / f"run-{run_id}.log"
        self.db.update_run(run_id, log_path=str(log_path))
        self.db.record_operation("start", "done", job=job, region=region, actor=self.actor, detail={
            "run": run_id, "version": version, "mode": plan.mode, "checkpoint": plan.checkpoint,
            "reason": plan.reason, "output_start": format_time_us(plan.output_start_us), "partial": plan.partial,
        })
        pid = None
        if reg.launcher == "local":
            pid = self.launch(run_id, log_path)
            if keep_running:  # someone must restart the driver when it dies: the region supervisor
                ensure_supervisor(self.db, self.config, region)
        status = self._wait_started(run_id, wait_s) if wait_s else "starting"
        return StartResult(run_id, job, region, version, plan, pid, log_path, status)

    def _model_estimate(self, job: str, region: str, spec: JobSpec, plan: StartPlan) -> float | None:
        """Every start records the model's catch-up estimate beside what it then measures."""
        from tidegate.runtime.estimate import model_estimate

        try:
            return model_estimate(self, job, region, plan=plan, spec=spec, sample_s=0.5).seconds
        except TidegateError:  # no estimate is no reason to refuse a start
            return None

    def launch(self, run_id: int, log_path: Path) -> int:
        """Start the driver of a planned run as a detached process on this host."""
        args = [sys.executable, "-m", "tidegate.runtime.driver", "--run-id", str(run_id)]
        pid = spawn_detached(args, log_path, env=self.config.driver_environment())
        self.db.update_run(run_id, pid=pid, host=HOST)
        return pid

    def _wait_started(self, run_id: int, wait_s: float) -> str:
        deadline = self.now() + wait_s
        while self.now() < deadline:
            run = self.db.run(run_id)
            if run.status == "running":
                return "running"
            if run.status in ("failed", "stopped", "lost"):
                raise ControllerError(
                    f"run {run_id} of job {run.job} in {run.region} ended while starting: {run.status_detail}",
                    f"see the driver log {run.log_path}:\n{tail(run.log_path)}",
                )
            if run.pid and run.host == HOST and not pid_alive(run.pid) and run.status == "starting":
                time.sleep(0.5)  # the driver may have just recorded its end
                run = self.db.run(run_id)
                if run.status == "starting":
                    self._mark_lost(run, "the driver exited before it reported")
                    raise ControllerError(
                        f"the driver of run {run_id} exited before it started the job",
                        f"see its log {run.log_path}:\n{tail(run.log_path)}",
                    )
            time.sleep(0.2)
        return self.db.run(run_id).status

    def _open_lineage(self, job: str, region: str, version: int, spec: JobSpec, plan: StartPlan, root: Path,
                      run_id: int) -> None:
        root.mkdir(parents=True, exist_ok=True)
        info = {
            "id": plan.lineage_id, "job": job, "region": region, "version": version, "fingerprint": spec.fingerprint,
            "output_from_us": plan.output_start_us, "emit_after_us": plan.emit_after_us,
            "starting_offsets": None if plan.starting_offsets is None else {str(p): o for p, o in plan.starting_offsets.items()},
        }
        JobPaths(root).lineage_file.write_text(json.dumps(info, indent=2, sort_keys=True))
        # earlier lineages' outputs end where this one's begins (consumers read each over its span)
        if plan.output_start_us is not None:
            for old in self.db.lineages(job, region):
                if old.output_until_us is None or old.output_until_us > plan.output_start_us:
                    self.db.update_lineage(old.id, output_until_us=plan.output_start_us, retired_at=self.now())
        else:
            for old in self.db.lineages(job, region):
                if old.retired_at is None:
                    self.db.update_lineage(old.id, retired_at=self.now())
        self.db.create_lineage(
            id=plan.lineage_id, job=job, region=region, fingerprint=spec.fingerprint, version=version,
            root=str(root), output_from_us=plan.output_start_us, windowed=spec.window is not None,
            created_by_run=run_id, emitted_through_us=plan.output_start_us,
        )
        active = self.db.active_region(job)
        if active is None or active.region == region:
            from tidegate.runtime.reader import publish_view

            if active is None:
                self.db.set_active_region(job, region, f"first region started ({region})")
            publish_view(self, job)

    def hub_of(self, spec: JobSpec) -> Path:
        if spec.source.kind != "hub":
            raise ConfigError(
                f"job {spec.name} reads Kafka; the lifecycle controller runs jobs over the embedded event log",
                "read Kafka in a spark-submit application of your own through tidegate.spark.kafka.kafka_stream, "
                "with the connector on the classpath (--packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0; "
                "README, Kafka / Event Hubs input), or switch source to hub",
            )
        return (Path(spec.source.hub) if spec.source.hub else self.config.hub).resolve()

    # -- stop ----------------------------------------------------------------------------
    def stop(self, job: str, region: str, *, grace_s: float = 60.0, force: bool = False, wait: bool = True,
             reason: str = "") -> JobStatus:
        """Graceful stop: the driver finishes its micro-batch, commits and exits. After
        ``grace_s`` it is stopped hard (the unfinished batch runs again on the next start).
        Refused when it would leave a paired job with no healthy duplicate, unless ``force``."""
        self.config.region(region)
        current = self.reconcile(job, region)  # a driver that died unannounced is recorded lost here
        if not force:
            self._check_partner_keeps_running(job, region, "stop")
        self.db.set_deployment(job, region, version=current.version or self.spec(job)[0], desired="stopped")
        if not current.alive:
            self.db.record_operation("stop", "done", job=job, region=region, actor=self.actor,
                                     detail={"note": f"was not running ({current.state})", "reason": reason})
            return current
        self.db.update_run(current.run_id, stop_requested_at=self.now())
        self.db.record_operation("stop", "done", job=job, region=region, actor=self.actor,
                                 detail={"run": current.run_id, "force": force, "reason": reason})
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
        if status.host != HOST or not status.pid:
            return
        marker = f"--run-id {status.run_id} "
        while pid_alive(status.pid, marker) and self.now() < deadline:
            time.sleep(0.1)
        if pid_alive(status.pid, marker):
            terminate(status.pid)

    def _force_stop(self, job: str, region: str, run_id: int) -> JobStatus:
        run = self.db.run(run_id)
        self.db.update_run(run_id, force_stop=True)
        if run.host == HOST and run.pid and pid_alive(run.pid, f"--run-id {run_id} "):
            terminate(run.pid)
        time.sleep(0.5)
        run = self.db.run(run_id)
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
            self.db.record_operation(action, "refused", job=job, region=region, actor=self.actor,
                                     detail={"partner": partner, "partner_state": other.state,
                                             "partner_caught_up": other.caught_up})
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

    # -- consumers ---------------------------------------------------------------------
    def switch_active(self, job: str, to_region: str, reason: str, *, force: bool = False) -> dict[str, Any]:
        """Point consumers at ``to_region``. Refused unless its duplicate runs, has caught up,
        and its output is final at least as far as the current active region's — consumers
        must find every row they had, and the next ones, in the region they move to."""
        self.config.region(to_region)
        current = self.db.active_region(job)
        if current is not None and current.region == to_region:
            return {"job": job, "active": to_region, "switched": False, "reason": "already active"}
        target = self.status_of(job, to_region)
        theirs = self.emitted_through(job, to_region)
        ours = self.emitted_through(job, current.region) if current is not None else None
        problems = []
        if target.state != "running" or not target.caught_up:
            problems.append(f"its duplicate is {target.state}{'' if target.caught_up else ', not caught up'}")
        if ours is not None and (theirs is None or theirs < ours):
            problems.append(f"its output is final through {format_time_us(theirs) or 'nothing'}, behind "
                            f"{current.region}'s {format_time_us(ours)}")
        if problems and not force:
            self.db.record_operation("switch-active", "refused", job=job, region=to_region, actor=self.actor,
                                     detail={"reason": reason, "problems": problems})
            raise ControllerError(
                f"refusing to move consumers of job {job} to {to_region}: {'; '.join(problems)}",
                f"wait until {to_region} has caught up (tidegate job status {job}), or force the switch",
            )
        expect = current.region if current is not None else None
        if not self.db.set_active_region(job, to_region, reason, expect=expect):
            raise ControllerError(f"the active region of job {job} changed while switching",
                                  "look at tidegate job status and decide again")
        self.db.record_operation("switch-active", "done", job=job, region=to_region, actor=self.actor,
                                 detail={"from": expect, "reason": reason, "forced": bool(problems)})
        from tidegate.runtime.reader import publish_view

        publish_view(self, job)
        return {"job": job, "active": to_region, "previous": expect, "switched": True, "reason": reason,
                "forced_over": problems}

    def emitted_through(self, job: str, region: str) -> int | None:
        """Where the region's output is final (its newest lineage's record), in µs."""
        lineages = self.db.lineages(job, region)
        return lineages[-1].emitted_through_us if lineages else None

    # -- restart -------------------------------------------------------------------------
    def restart(self, job: str, region: str, *, mode: str = "last-stopped", at: str | int | None = None,
                version: int | None = None, accept_partial: bool = False, grace_s: float = 60.0,
                force: bool = False, wait_s: float = 180.0, context: dict | None = None) -> StartResult:
        self.stop(job, region, grace_s=grace_s, force=force, reason="restart")
        return self.start(job, region, version=version, mode=mode, at=at, accept_partial=accept_partial,
                          wait_s=wait_s, context=context)

    # -- status --------------------------------------------------------------------------
    def status(self, job: str | None = None, region: str | None = None) -> list[JobStatus]:
        jobs = [job] if job else self.db.jobs()
        regions = [region] if region else list(self.config.regions)
        return [self.status_of(j, r) for j in jobs for r in regions]

    def status_of(self, job: str, region: str) -> JobStatus:
        """The job's state in ``region`` and its latest figures; writes nothing, so anyone may
        poll it. Whether the driver is alive: :func:`tidegate.runtime.liveness.judge_run`."""
        dep = self.db.deployment(job, region)
        run = self.db.latest_run(job, region)
        active = self.db.active_region(job)
        is_active = active is not None and active.region == region
        if run is None:
            return JobStatus(job, region, RunState.NEVER, version=dep.version if dep else None,
                             desired=dep.desired if dep else None, active=is_active)
        verdict = self._judge(run)
        # a run that continues a checkpoint continues its lineage: until it finishes a batch of
        # its own, the lineage's last batch, output and totals are what is true of the job
        last = self._last_batch_of_lineage(job, region, run)
        lineage = self.db.lineage(run.lineage) if run.lineage else None
        last_output_us = run.last_output_us if run.last_output_us is not None else (
            lineage.last_output_us if lineage is not None else None)
        watermark_us = run.job_watermark_us if run.job_watermark_us is not None else (
            last.job_watermark_us if last is not None else None)
        rate = None
        if last is not None and last.stages:
            rate = (loads(last.stages) or {}).get("input_rate_eps")
        return JobStatus(
            job=job, region=region, state=verdict.state, version=run.version, desired=dep.desired if dep else None,
            active=is_active, run_id=run.id, pid=run.pid, host=run.host, start_mode=run.start_mode,
            checkpoint=run.checkpoint, partial=bool(run.partial), lineage=run.lineage, started_at=run.started_at,
            caught_up=run.caught_up_at is not None, last_output_us=last_output_us,
            job_watermark_us=watermark_us,
            watermark_delay_s=None if last is None or last.watermark_delay_us is None else last.watermark_delay_us / 1e6,
            # recorded on the broker's clock at the batch, growing with the time since: a stuck
            # job's lag keeps rising while a job merely waiting for data stays near zero
            processing_lag_s=None if last is None or last.processing_lag_us is None
            else last.processing_lag_us / 1e6 + max(0.0, self.now() - last.processed_at),
            input_rate_eps=rate, backlog_events=run.backlog_events,
            last_batch_at=last.processed_at if last else None,
            counts=self.db.lineage_totals(run.lineage) if run.lineage else self.db.run_totals(run.id),
            detail=verdict.detail, log_path=run.log_path,
        )

    def reconcile(self, job: str, region: str) -> JobStatus:
        """:meth:`status_of`, and its finding recorded: a run whose driver is gone while its row
        still says live is marked lost (its lease freed, a process still present here killed).
        Called by whoever owns the run's life: start, stop, the region supervisor, a drill."""
        status = self.status_of(job, region)
        if status.state != RunState.LOST or status.run_id is None:
            return status
        run = self.db.run(status.run_id)
        verdict = self._judge(run)  # read again: the driver may have recorded its own end meanwhile
        if not verdict.newly_lost:
            return status
        return replace(status, detail=self._mark_lost(run, lost_because(verdict.why)))

    def _judge(self, run: Row):
        """The run's liveness on the database's clock (one clock for every host) and, for a
        driver on this host, its process."""
        lease = lease_now = None
        if run.status in LIVE:
            lease, lease_now = self.db.lease(job_lease(run.job, run.region)), self.db.clock()
        return judge_run(run, lease, now=self.now(), lease_now=lease_now,
                         process_alive=local_process_alive(run, HOST, pid_alive))

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
        if run.host == HOST and run.pid and pid_alive(run.pid, f"--run-id {run.id} "):
            terminate(run.pid, grace_s=0)
            why += f" (its process {run.pid} was still present: killed)"
        detail = f"{why}; last heartbeat {_ago(run.heartbeat_at, self.now())}"
        self.db.update_run(run.id, status=RunState.LOST.value, status_detail=detail,
                           ended_at=run.ended_at or self.now())
        self.db.release_lease(job_lease(run.job, run.region), f"run-{run.id}")
        return detail

    def wait_for(self, job: str, region: str, predicate: Callable[[JobStatus], bool], timeout_s: float,
                 what: str) -> JobStatus:
        deadline = self.now() + timeout_s
        while True:
            status = self.status_of(job, region)
            if predicate(status):
                return status
            if status.state in ("failed", "lost", "stopped"):
                raise ControllerError(f"job {job} in {region} is {status.state} while waiting until {what}: {status.detail}",
                                      f"see the driver log {status.log_path}")
            if self.now() >= deadline:
                raise ControllerError(
                    f"job {job} in {region} did not get {what} within {timeout_s:.0f} s "
                    f"(backlog {status.backlog_events} events, watermark {format_time_us(status.job_watermark_us)})",
                    "look at its metrics (tidegate job status) and driver log; raise the timeout if it is just slow",
                )
            time.sleep(0.5)

    def forget_scratch(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def region(self, name: str) -> Region:
        return self.config.region(name)


def _handover(plan: StartPlan, previous: PreviousLineage | None) -> int | None:
    """Where this run's output takes over: its first output time, or — resuming a
    checkpoint — what the lineage had emitted before (completeness is checked from there)."""
    if plan.checkpoint == "reused" and previous is not None:
        return previous.cut.through_us
    return plan.output_start_us


def _ago(at: float | None, now: float) -> str:
    return "never" if at is None else f"{now - at:.0f} s ago"
