"""The job controller: deploy, start, stop, restart and status for a job in a region.

The controller changes what the control database says and launches drivers; it never
runs a streaming query itself, so the CLI command or Airflow task calling it can exit
while the driver goes on. Rules it enforces, whoever calls it:

* one driver per job × region — a lease, taken atomically before a driver is launched;
* a job's logic never changes under a version number, and a changed logic never resumes
  an old checkpoint (:mod:`tidegate.runtime.jobs.planning` decides reuse vs replay);
* the two duplicates of a paired job are never stopped at the same time: stopping the
  last healthy one is refused unless forced;
* a start whose input was deleted by retention is refused unless partial results are
  accepted (and then the run is marked partial).

Status and waits are :mod:`tidegate.runtime.jobs.status` (reads that write nothing, and the
recording of lost runs), stopping :mod:`tidegate.runtime.jobs.stopping`, moving consumers
:mod:`tidegate.runtime.outputs.consumers`, and the records the operating procedures read and
write :mod:`tidegate.runtime.jobs.records`; all are mixed into :class:`Controller`.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tidegate.control.db import REFUSED, ControlDB
from tidegate.errors import ControllerError, TidegateError
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.files import tail
from tidegate.inputs.kafka.listener import check_plaintext_listeners
from tidegate.inputs.log import LogLocation, describe_location, input_location, kafka_topics
from tidegate.jobspec import JobSpec, load_spec, parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.processes import Recorded
from tidegate.runtime.jobs import planning
from tidegate.runtime.jobs.adoption import RetriedSteps, StartAsked, adopted_plan, step_of
from tidegate.runtime.jobs.config import PlatformConfig, Region, load_config
from tidegate.runtime.jobs.liveness import LIVE
from tidegate.runtime.jobs.planning import PreviousLineage, StartPlan
from tidegate.runtime.jobs.process import (
    HOST,
    driver,
    driver_here,
    ensure_supervisor,
    job_lease,
    run_marker,
    spawn_detached,
)
from tidegate.runtime.jobs.query_origin import QueryDeploys, QueryOrigin
from tidegate.runtime.jobs.records import ControlRecords
from tidegate.runtime.jobs.status import JobStatus, StatusReads
from tidegate.runtime.jobs.stopping import Stopping
from tidegate.runtime.outputs.consumers import ConsumerSwitching

__all__ = ["LIVE", "Controller", "ControllerError", "DeployResult", "JobStatus", "StartResult"]

START_LEASE_TTL_S = 180.0  # covers the driver's JVM start; the driver then renews every second


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
    process: Recorded | None  # its driver, launched here; None: left to the region's supervisor
    log_path: Path
    status: str
    adopted: str | None = None  # a run already in flight that this start took over: why

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def describe(self) -> str:
        return (
            f"job {self.job} v{self.version} in {self.region}: run {self.run_id} {self.status}"
            f"{f' (adopted: {self.adopted})' if self.adopted else ''}"
            f" (pid {self.pid}, log {self.log_path})\n{self.plan.describe()}"
        )


class Controller(StatusReads, Stopping, ConsumerSwitching, ControlRecords, RetriedSteps, QueryDeploys):
    def __init__(
        self,
        config: PlatformConfig | None = None,
        db: ControlDB | None = None,
        *,
        actor: str | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.config = config or load_config()
        self.db = db or ControlDB(self.config.control_db)
        self.actor = actor or "cli"
        self.now = now

    # -- deploy --------------------------------------------------------------------------
    def deploy(self, spec_path: str | Path, origin: QueryOrigin | None = None) -> DeployResult:
        """Register a job version from its spec file (idempotent for the same logic). ``origin``:
        the query the spec was translated from (:meth:`deploy_query`), recorded as its source."""
        path = Path(spec_path)
        spec = load_spec(
            path, log_dirs=self.config.log_dirs, reference_dirs=self.config.reference_dirs
        )  # its logs and reference folder: where allowed
        self.input_of(spec)  # its Kafka brokers are the operator's: refused now rather than at start
        new = self.db.register_version(
            spec.name,
            spec.version,
            spec.fingerprint,
            spec.to_dict(),
            path.read_text(),
            origin.query_path if origin else str(path.resolve()),
            spec.description,
            origin.record() if origin else None,
        )
        detail = {"version": spec.version, "fingerprint": spec.fingerprint, "new": new}
        if origin:
            detail["query"] = origin.query_path
        self.db.record_operation("deploy", "done", job=spec.name, actor=self.actor, detail=detail)
        return DeployResult(spec.name, spec.version, spec.fingerprint, new)

    def spec(self, job: str, version: int | None = None) -> tuple[int, JobSpec]:
        row = self.db.version(job, version)
        if row is None:
            known = ", ".join(self.db.jobs()) or "none"
            which = f"version {version} of job {job}" if version is not None else f"job {job}"
            raise ControllerError(
                f"{which} is not registered (registered jobs: {known})",
                "deploy it first: tidegate job deploy jobs/<spec>.yaml",
            )
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
        self,
        job: str,
        region: str,
        *,
        version: int | None = None,
        mode: str = "auto",
        at: str | int | None = None,
        accept_partial: bool = False,
        keep_running: bool | None = None,
        wait_s: float = 180.0,
        context: dict | None = None,
        fresh_checkpoint: bool = False,
    ) -> StartResult:
        """Plan and launch a driver. ``mode`` ``auto``: ``last-stopped`` when the job ran in
        this region before, otherwise ``now``; ``fresh_checkpoint``: never resume the checkpoint
        (:func:`~tidegate.runtime.jobs.planning.plan_start`). Returns once the driver runs (or failed).
        A live run of the job in the region is refused — unless it is what this start asks for,
        which it then takes over (:mod:`tidegate.runtime.jobs.adoption`: a retried step's start)."""
        reg = self.config.region(region)
        version, spec = self.spec(job, version)
        at_us = parse_time_us(at, field="--at") if isinstance(at, str) else at
        asked = StartAsked(version, spec.fingerprint, mode, at_us, step_of(context))
        current = self.reconcile(job, region)  # a lost driver's lease is freed (and its process killed) here
        if current.alive:
            assert current.run_id is not None, "a live status is a run's"
            if (adopted := self._adopt(asked, current.run_id, keep_running, wait_s)) is not None:
                return adopted
            raise ControllerError(
                f"job {job} already runs in {region} "
                f"(run {current.run_id}, {current.state}, pid {current.pid} on {current.host})",
                f"stop it first (tidegate job stop {job} --region {region}) or use restart",
            )
        previous = planning.previous_lineage(self, job, region)
        mode = planning.resolve_mode(mode, previous)
        try:
            location = self.input_of(spec)  # the spec's brokers are the operator's (connections, allowed hosts)
            described = describe_location(location)
            check_plaintext_listeners(kafka_topics(location))  # before a client reads a TLS alert as a frame size
            plan = planning.plan(
                self,
                job,
                region,
                mode,
                spec=spec,
                at_us=at_us,
                previous=previous,
                accept_partial=accept_partial,
                fresh_checkpoint=fresh_checkpoint,
            )
        except TidegateError as exc:
            self.db.record_operation(
                "start", "refused", job=job, region=region, actor=self.actor, detail={"mode": mode, "reason": str(exc)}
            )
            raise
        root = reg.lineage_root(job, "lineages", plan.lineage_id)
        estimate_s = self._model_estimate(job, region, spec, plan)
        run_id = self.db.create_run(
            job=job,
            region=region,
            version=version,
            fingerprint=spec.fingerprint,
            lineage=plan.lineage_id,
            kind="job",
            input=described,
            start_mode=plan.mode,
            output_start_us=plan.output_start_us,
            lookback_us=plan.lookback_us,
            input_from_us=plan.input_from_us,
            starting_offsets=None
            if plan.starting_offsets is None
            else {str(p): o for p, o in plan.starting_offsets.items()},
            checkpoint=plan.checkpoint,
            checkpoint_reason=plan.reason,
            partial=plan.partial,
            partial_reason=plan.partial_reason,
            status="starting",
            estimate_model_s=estimate_s,
            context={
                "actor": self.actor,
                "handover_us": _handover(plan, previous),
                "emit_from_offsets": plan.lineage_info()["emit_from_offsets"],
                "asked": asked.start_point(),  # what a retry of this start compares (adoption)
                **(context or {}),
            },
        )
        if not self.db.acquire_lease(job_lease(job, region), f"run-{run_id}", START_LEASE_TTL_S, host=HOST):
            holder = self.db.lease(job_lease(job, region))
            # "refused", not "failed": the job's latest run is the one that won the lease, so
            # status and the supervisor keep following it instead of this attempt
            self.db.update_run(
                run_id,
                status=REFUSED,
                ended_at=self.now(),
                status_detail=f"not started: the lease is held by {holder.holder if holder else '?'}",
            )
            self.db.record_operation(
                "start",
                "refused",
                job=job,
                region=region,
                actor=self.actor,
                detail={"run": run_id, "reason": "lease held"},
            )
            winner = self.db.latest_run(job, region)  # a retry racing the supervisor's relaunch adopts it
            if winner is not None and winner.status in LIVE:
                if (adopted := self._adopt(asked, winner.id, keep_running, wait_s)) is not None:
                    return adopted
            raise ControllerError(
                f"job {job} in {region} was started by someone else at the same moment "
                f"({holder.holder if holder else 'unknown holder'} holds its lease)",
                "check `tidegate job status`; one driver per job and region is the rule",
            )
        if plan.new_lineage:
            self._open_lineage(job, region, version, spec, plan, root, run_id)
        self.db.set_deployment(
            job,
            region,
            version=version,
            desired="running",
            current_run=run_id,
            **({} if keep_running is None else {"keep_running": keep_running}),
        )
        if self.db.active_region(job) is None:
            self.db.set_active_region(job, region, f"first region started ({region})")
            from tidegate.runtime.outputs.reader import publish_view

            publish_view(self, job)
        log_path = reg.job_dir(job) / "drivers" / f"run-{run_id}.log"
        self.db.update_run(run_id, log_path=str(log_path))
        self.db.record_operation(
            "start",
            "done",
            job=job,
            region=region,
            actor=self.actor,
            detail={
                "run": run_id,
                "version": version,
                "mode": plan.mode,
                "checkpoint": plan.checkpoint,
                "reason": plan.reason,
                "output_start": format_time_us(plan.output_start_us),
                "partial": plan.partial,
            },
        )
        process = None
        if reg.launcher == "local":
            process = self.launch(run_id, log_path)
            if keep_running:  # someone must restart the driver when it dies: the region supervisor
                ensure_supervisor(self.db, self.config, region)
        status = self._wait_started(run_id, wait_s) if wait_s else "starting"
        return StartResult(run_id, job, region, version, plan, process, log_path, status)

    def _adopt(self, asked: StartAsked, run_id: int, keep_running: bool | None, wait_s: float) -> StartResult | None:
        """The live run ``run_id`` taken over by a start asking ``asked``, once it runs; None: refused."""
        if (found := self.take_over_start(asked, run_id, keep_running, wait_s)) is None:
            return None
        live, why, status = found
        reg = self.config.region(live.region)
        log_path = Path(live.log_path) if live.log_path else reg.job_dir(live.job) / "drivers" / f"run-{live.id}.log"
        plan = adopted_plan(live, why)
        return StartResult(live.id, live.job, live.region, live.version, plan, driver_here(live), log_path, status, why)

    def _model_estimate(self, job: str, region: str, spec: JobSpec, plan: StartPlan) -> float | None:
        """Every start records the model's catch-up estimate beside what it then measures."""
        from tidegate.runtime.estimates.estimate import model_estimate

        try:
            return model_estimate(self, job, region, plan=plan, spec=spec, sample_s=0.5).seconds
        except TidegateError:  # no estimate is no reason to refuse a start
            return None

    def launch(self, run_id: int, log_path: Path) -> Recorded:
        """Start the driver of a planned run as a detached process on this host; that process."""
        args = [sys.executable, "-m", "tidegate.runtime.jobs.driver", "--run-id", str(run_id)]
        process = spawn_detached(args, log_path, env=self.config.driver_environment(), marker=run_marker(run_id))
        self.db.update_run(run_id, pid=process.pid, pid_started_at=process.started_at, host=HOST)
        return process

    def _wait_started(self, run_id: int, wait_s: float) -> str:
        deadline = self.now() + wait_s
        while self.now() < deadline:
            run = self._existing_run(run_id)
            if run.status == "running":
                return "running"
            if run.status in ("failed", "stopped", "lost"):
                raise ControllerError(
                    f"run {run_id} of job {run.job} in {run.region} ended while starting: {run.status_detail}",
                    f"see the driver log {run.log_path}:\n{tail(run.log_path)}",
                )
            launched = driver(run) if run.host == HOST else None
            if launched is not None and not launched.alive() and run.status == "starting":
                time.sleep(0.5)  # the driver may have just recorded its end
                run = self._existing_run(run_id)
                if run.status == "starting":
                    self._mark_lost(run, "the driver exited before it reported")
                    raise ControllerError(
                        f"the driver of run {run_id} exited before it started the job",
                        f"see its log {run.log_path}:\n{tail(run.log_path)}",
                    )
            time.sleep(0.2)
        return self._existing_run(run_id).status

    def _open_lineage(
        self, job: str, region: str, version: int, spec: JobSpec, plan: StartPlan, root: str, run_id: int
    ) -> None:
        paths = JobPaths.at(root, region=region)
        if not paths.on_object_store:  # a local folder (LocalStore.path_of gives a Path)
            Path(paths.root).mkdir(parents=True, exist_ok=True)
        info = plan.lineage_info() | {"job": job, "region": region, "version": version, "fingerprint": spec.fingerprint}
        paths.store.write_bytes(paths.lineage_file, json.dumps(info, indent=2, sort_keys=True).encode())
        earlier = self.db.lineages(job, region)
        if spec.reference_tables and earlier:  # a replay joins each snapshot of each table from where the stream did
            from tidegate.lineage.reference_records import keep_records

            for reference in spec.reference_tables:
                keep_records(JobPaths.at(earlier[-1].root, region=region), paths, reference.name)
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
            id=plan.lineage_id,
            job=job,
            region=region,
            fingerprint=spec.fingerprint,
            version=version,
            root=root,
            output_from_us=plan.output_start_us,
            windowed=spec.needs_lookback,
            created_by_run=run_id,
            emitted_through_us=plan.output_start_us,
        )
        active = self.db.active_region(job)
        if active is None or active.region == region:
            from tidegate.runtime.outputs.reader import publish_view

            if active is None:
                self.db.set_active_region(job, region, f"first region started ({region})")
            publish_view(self, job)

    def input_of(self, spec: JobSpec) -> LogLocation:
        """The log the job reads: its Kafka topic, its event log, or the platform's default event log."""
        return input_location(
            spec, self.config.event_log, self.config.kafka_connections, self.config.kafka_hosts, self.config.log_dirs
        )

    # -- restart -------------------------------------------------------------------------
    def restart(
        self,
        job: str,
        region: str,
        *,
        mode: str = "last-stopped",
        at: str | int | None = None,
        version: int | None = None,
        accept_partial: bool = False,
        grace_s: float = 60.0,
        force: bool = False,
        wait_s: float = 180.0,
        context: dict | None = None,
    ) -> StartResult:
        self.stop(job, region, grace_s=grace_s, force=force, reason="restart")
        return self.start(
            job,
            region,
            version=version,
            mode=mode,
            at=at,
            accept_partial=accept_partial,
            wait_s=wait_s,
            context=context,
        )

    def forget_scratch(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def region(self, name: str) -> Region:
        return self.config.region(name)


def _handover(plan: StartPlan, previous: PreviousLineage | None) -> int | None:
    """Where this run's output takes over: its first output time, or — resuming a
    checkpoint, or a per-event job continuing from the last output's input position — what
    the lineage had emitted before (completeness is checked from there)."""
    if previous is not None and (plan.checkpoint == "reused" or plan.output_start_us is None):
        return previous.cut.through_us
    return plan.output_start_us
