"""Recovery drills (SPEC §6–§8): break something on purpose, recover, prove nothing was lost or doubled.

Three drills, each run against a live job:

* ``node-failure`` — kill -9 the region's driver; restart in ``last-stopped``: the
  checkpoint is reused and only the gap since the last commit is reprocessed;
* ``upgrade`` — a planned engine upgrade: stop, then start with the first output at
  where the output is final (``custom``), which replays the look-back in a fresh checkpoint;
* ``region-loss`` — kill the region's driver and make its storage unavailable; if it
  served consumers, fail them over to the partner; restore the region by replay from
  what the control database recorded, as the standby.

Each drill is estimated before it breaks anything (the model, for the recovery it will
need), timed from the break to caught up, checked with Great Expectations (the recovered
region and the consumer view), and recorded as a procedure ``drill:<kind>``.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass

from tidegate.errors import ConfigError, TidegateError
from tidegate.hub import EventLog
from tidegate.runtime.faults import kill_group
from tidegate.runtime.planning import PreviousLineage, plan_start
from tidegate.runtime.process import HOST, pid_alive

KINDS = ("node-failure", "upgrade", "region-loss")


@dataclass(frozen=True)
class Broken:
    kind: str
    job: str
    region: str
    at: float
    detail: dict

    def to_dict(self) -> dict:
        return {"kind": self.kind, "job": self.job, "region": self.region, "at": self.at, **self.detail}


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ConfigError(f"drill {kind!r} is unknown", f"use one of {', '.join(KINDS)}")
    return kind


def estimate_recovery(controller, job: str, region: str, kind: str) -> float | None:
    """The model's estimate of the recovery this drill will need, taken before the break."""
    from tidegate.runtime.estimate import model_estimate

    _, spec = controller.spec(job)
    previous = controller.previous_lineage(job, region)
    if previous is None:
        raise ConfigError(f"job {job} has never run in {region}: nothing to drill", "deploy and start it first")
    log = EventLog.open(controller.hub_of(spec))
    if kind == "node-failure":
        plan = plan_start(spec, "last-stopped", clock_us=log.clock_now_us(), at_us=None, previous=previous, log=log,
                          accept_partial=True)
    elif kind == "upgrade":
        plan = plan_start(spec, "custom", clock_us=log.clock_now_us(), at_us=previous.cut.through_us or
                          previous.output_from_us, previous=previous, log=log, accept_partial=True)
    else:  # the checkpoint will be gone: replay from what was recorded
        lost = PreviousLineage(previous.id, previous.root, previous.fingerprint, previous.output_from_us, False,
                               previous.cut)
        plan = plan_start(spec, "last-stopped", clock_us=log.clock_now_us(), at_us=None, previous=lost, log=log,
                          accept_partial=True)
    return model_estimate(controller, job, region, plan=plan, spec=spec, sample_s=0.5).seconds


def kill_driver(controller, job: str, region: str) -> int | None:
    """kill -9 the driver of ``job`` in ``region``: here if it runs on this host, else through
    the region's supervisor (which carries out forced stops on its host)."""
    status = controller.status_of(job, region)
    if not status.alive:
        raise TidegateError(f"job {job} is not running in {region} ({status.state}): nothing to kill",
                            "start it before the drill")
    if status.host == HOST and status.pid and pid_alive(status.pid, f"--run-id {status.run_id} "):
        kill_group(status.pid)
        return status.pid
    controller.db.update_run(status.run_id, force_stop=True, stop_requested_at=time.time())
    return None


def break_region(controller, job: str, kind: str, region: str) -> Broken:
    at = time.time()
    detail: dict = {"killed_run": controller.status_of(job, region).run_id}
    if kind == "node-failure":
        detail["killed_pid"] = kill_driver(controller, job, region)
    elif kind == "upgrade":
        controller.stop(job, region, force=True, reason="drill: planned upgrade")
    else:
        # the region is down as a whole: its supervisor must not bring the job back before the restore
        controller.db.set_deployment(job, region, desired="stopped")
        detail["killed_pid"] = kill_driver(controller, job, region)
        job_dir = controller.config.region(region).job_dir(job)
        lost = job_dir.parent.parent / "lost" / f"{job}-{int(at)}"
        lost.parent.mkdir(parents=True, exist_ok=True)
        if job_dir.exists():
            job_dir.rename(lost)  # the region's checkpoints and outputs are gone for the job
        detail["storage_moved_to"] = str(lost)
        active = controller.db.active_region(job)
        if active is not None and active.region == region:
            partner = controller.config.partner(region).name
            switched = controller.switch_active(job, partner, f"drill: region {region} lost")
            detail["failover"] = switched
    # the region is down now: its status must say so before recovery starts
    controller.status_of(job, region)
    return Broken(kind, job, region, at, detail)


def recover(controller, broken: Broken) -> dict:
    """Bring the region back the way the drill's kind calls for; the start's summary."""
    job, region = broken.job, broken.region
    context = {"drill": broken.kind}
    expected = {"node-failure": "reused", "upgrade": "fresh", "region-loss": "fresh"}[broken.kind]
    run = None
    if broken.kind == "node-failure":
        run = _restarted_by_supervisor(controller, job, region, broken.detail.get("killed_run"))
    if run is None:
        if broken.kind == "upgrade":
            lineage = controller.db.lineages(job, region)[-1]
            at = lineage.emitted_through_us or lineage.output_from_us
            result = controller.start(job, region, mode="custom", at=at, context=context)
        else:
            result = controller.start(job, region, mode="last-stopped", context=context)
        run = controller.db.run(result.run_id)
    if run.checkpoint != expected:
        raise TidegateError(
            f"drill {broken.kind}: the recovery {run.checkpoint} the checkpoint, expected {expected}: "
            f"{run.checkpoint_reason}", "look at the run's plan; the drill did not exercise what it should")
    return {"run_id": run.id, "checkpoint": run.checkpoint, "reason": run.checkpoint_reason,
            "output_start_us": run.output_start_us,
            "restarted_by": "supervisor" if json.loads(run.context or "{}").get("auto_restart") else "drill"}


def _restarted_by_supervisor(controller, job: str, region: str, killed_run: int | None, wait_s: float = 90.0):
    """With keep-running and a live region supervisor, node failure is the platform's to
    recover: wait for the supervisor's restart rather than race it. None when there is none."""
    from tidegate.runtime.process import supervisor_lease

    deployment = controller.db.deployment(job, region)
    lease = controller.db.lease_live(supervisor_lease(region))
    if deployment is None or not deployment.keep_running or lease is None:
        return None
    deadline = time.time() + wait_s
    while time.time() < deadline:
        latest = controller.db.latest_run(job, region)
        if latest is not None and killed_run is not None and latest.id > killed_run:
            return latest
        time.sleep(0.5)
    return None


def finish(controller, procedure_id: int, broken: dict, recovered: dict, checks: list[dict],
           estimate_s: float | None) -> dict:
    """Record the drill: pass only if the region caught up and every check passed."""
    db = controller.db
    run = db.run(recovered["run_id"])
    actual = None if run.caught_up_at is None else run.caught_up_at - broken["at"]
    passed = actual is not None and bool(checks) and all(c.get("success") for c in checks)
    summary = {"broken": broken, "recovered": recovered, "estimate_s": estimate_s, "actual_s": actual,
               "relative_error": None if not actual or estimate_s is None else (estimate_s - actual) / actual}
    moved = broken.get("storage_moved_to")
    if passed and moved:  # evidence of a passed drill is the record, not the old files
        shutil.rmtree(moved, ignore_errors=True)
    data_docs = next((c.get("data_docs") for c in checks if c.get("data_docs")), None)
    db.finish_procedure(procedure_id, "passed" if passed else "failed", estimate_s=estimate_s, actual_s=actual,
                        checks=[{k: c.get(k) for k in ("target", "success", "span", "data_docs", "message")}
                                for c in checks],
                        detail=json.dumps(summary, default=str), data_docs=data_docs)
    if not passed:
        failed = [c for c in checks if not c.get("success")]
        raise TidegateError(
            f"drill {broken['kind']} of {broken['job']} in {broken['region']} FAILED: "
            + ("; ".join(c.get("message") or c.get("summary", "") for c in failed) or "the region never caught up"),
            "something was lost or doubled: the Data Docs and the procedure record say what")
    return summary


def history(db, job: str | None = None, limit: int = 50) -> list[dict]:
    rows = []
    for p in db.procedures(job, kind_prefix="drill:", limit=limit):
        rows.append({"id": p.id, "kind": p.kind, "job": p.job, "region": p.region, "started_at": p.started_at,
                     "ended_at": p.ended_at, "result": p.result, "estimate_s": p.estimate_s, "actual_s": p.actual_s,
                     "checks": json.loads(p.checks) if p.checks else [], "data_docs": p.data_docs})
    return rows
