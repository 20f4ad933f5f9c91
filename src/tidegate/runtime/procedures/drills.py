"""Recovery drills (semantics §6–§8): break something on purpose, recover, prove nothing was lost or doubled.

Three drills, each run against a live job:

* ``node-failure`` — kill -9 the region's driver; restart in ``last-stopped``: the
  checkpoint is reused and only the gap since the last commit is reprocessed;
* ``upgrade`` — a planned engine upgrade: stop, then start ``last-stopped`` in a fresh
  checkpoint: the output continues where it was final (a window job's from the time it is
  final through, a per-event job's from the positions its last batch ended at), rebuilt by
  replaying the look-back;
* ``region-loss`` — kill the region's driver and take the job's place in the region's
  storage away (moved aside through the region's store: a rename on a folder, server-side
  copies and deletes on an object store); if it served consumers, fail them over to the
  partner; restore the region by replay from what the control database recorded, as the
  standby. Driver logs stay in the region's local work folder: they are not its storage.

Each drill is estimated before it breaks anything (the model, for the recovery it will
need), timed from the break to caught up, checked with Great Expectations (the recovered
region and the consumer view), and recorded as a procedure ``drill:<kind>``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from tidegate.errors import ConfigError, TidegateError
from tidegate.eventtime.durations import format_time_us
from tidegate.runtime.jobs import planning
from tidegate.runtime.jobs.process import driver_here
from tidegate.runtime.procedures.failover import lock_ttl_s, storage_lost
from tidegate.runtime.procedures.faults import kill_group
from tidegate.storage.uri import parse_root

KINDS = ("node-failure", "upgrade", "region-loss")
# the kinds that take the job's storage in the region: it is rebuilt by replaying its history
# (the control-region-loss drill, :mod:`tidegate.runtime.procedures.control_drill`, too)
STORAGE_LOST = ("region-loss", "control-region-loss")


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


def estimate_recovery(controller, job: str, region: str, kind: str, *, failover_lag_us: int | None = None):
    """The estimate of the recovery this drill will need, taken before the break, term by term
    (:mod:`tidegate.runtime.estimates.recovery`): the break, the failover's wait when consumers
    must move off the region (``failover_lag_us``: how far the partner's final output trails
    it), the restart and the catch-up the model plays out over the restart's plan."""
    from tidegate.runtime.estimates.recovery import estimate
    from tidegate.runtime.procedures.failover import WAIT_S

    _, spec = controller.spec(job)
    # a region loss takes the storage: the region replays its whole history (planning.history_start)
    previous = planning.previous_lineage(controller, job, region, storage_lost=kind in STORAGE_LOST)
    if previous is None:
        raise ConfigError(f"job {job} has never run in {region}: nothing to drill", "deploy and start it first")
    # an upgrade continues where the output was final, by replay in a fresh checkpoint
    plan = planning.plan(
        controller,
        job,
        region,
        "last-stopped",
        spec=spec,
        previous=previous,
        accept_partial=True,
        fresh_checkpoint=kind == "upgrade",
    )
    return estimate(
        controller, job, region, plan, spec, kind=kind, failover_lag_us=failover_lag_us, failover_bound_s=WAIT_S
    )


def kill_driver(controller, job: str, region: str) -> int | None:
    """kill -9 the driver of ``job`` in ``region``: here if it runs on this host, else through
    the region's supervisor (which carries out forced stops on its host)."""
    status = controller.status_of(job, region)
    if not status.alive:
        raise TidegateError(
            f"job {job} is not running in {region} ({status.state}): nothing to kill", "start it before the drill"
        )
    if (process := driver_here(controller.db.run(status.run_id))) is not None:
        kill_group(process)
        return process.pid
    controller.db.update_run(status.run_id, force_stop=True, stop_requested_at=time.time())
    return None


class DrillRefused(TidegateError):
    """A precondition of the drill does not hold: nothing was broken."""


def preflight(
    controller, job: str, region: str, *, max_lag_s: float = 60.0, wait_s: float = 300.0, poll_s: float = 2.0
) -> dict:
    """Every precondition, checked before anything breaks: both duplicates run and have
    caught up, and the partner's output is final within ``max_lag_s`` of the drilled
    region's — so whichever one is broken, the other serves consumers. Waits up to
    ``wait_s`` for them (a drill scheduled while a deploy is still starting), then raises
    :class:`DrillRefused` naming every one that does not hold."""
    partner = controller.config.partner(region).name
    deadline = time.monotonic() + wait_s
    while True:
        problems = []
        for r in (region, partner):
            st = controller.status_of(job, r)
            if st.state != "running":
                problems.append(f"{r} is {st.state}")
            elif not st.caught_up:
                problems.append(f"{r} has not caught up (backlog {st.backlog_events} events)")
        ours, theirs = controller.emitted_through(job, region), controller.emitted_through(job, partner)
        if not problems and ours is not None and (theirs is None or ours - theirs > max_lag_s * 1e6):
            problems.append(
                f"{partner}'s output is final through {format_time_us(theirs) or 'nothing'}, more than "
                f"{max_lag_s:.0f} s behind {region}'s {format_time_us(ours)}"
            )
        if not problems:
            return {"region": region, "partner": partner, "final_us": {region: ours, partner: theirs}}
        if time.monotonic() >= deadline:
            raise DrillRefused(
                f"drill of {job} in {region} not started, nothing was broken: " + "; ".join(problems),
                "wait until both regions run and have caught up (tidegate job status), then drill",
            )
        time.sleep(poll_s)


def restore(controller, job: str, region: str, detail: dict) -> dict:
    """Undo what a drill that failed half-way broke, as far as it can; the state it leaves.

    Storage a region-loss drill moved aside (and no recovery replaced) is moved back, the
    region is wanted running again and started from its checkpoint if its driver is not
    alive, and consumers are moved off a region that does not run."""
    from tidegate.runtime.procedures.failover import fail_over

    actions = []
    moved = detail.get("storage_moved_to")
    try:
        if moved and move_storage_back(controller.config.region(region), job, moved):
            actions.append(f"moved {region}'s storage back from {moved}")
    except (OSError, TidegateError) as exc:  # a store that does not answer: the rest is still restored
        actions.append(f"could not move {region}'s storage back from {moved}: {str(exc).splitlines()[0][:200]}")
    if controller.db.deployment(job, region) is not None:
        controller.db.set_deployment(job, region, desired="running")
    for r in (region, controller.config.partner(region).name):
        if not controller.status_of(job, r).alive:
            try:
                started = controller.start(job, r, mode="last-stopped", context={"drill_restore": True})
                actions.append(f"started {job} in {r} (run {started.run_id}, {started.plan.checkpoint} checkpoint)")
            except TidegateError as exc:
                actions.append(f"could not start {job} in {r}: {exc}")
    active = controller.db.active_region(job)
    if active is not None and not controller.status_of(job, active.region).alive:
        try:
            moved_to = fail_over(controller, job, active.region, "drill restore: the active region does not run")
            actions.append(f"consumers: {moved_to.reason}")
        except TidegateError as exc:
            actions.append(f"consumers could not move: {exc}")
    return {"actions": actions, "state_left": state_of(controller, job)}


def state_of(controller, job: str) -> dict:
    """Where a job stands: each region's state and where consumers read."""
    active = controller.db.active_region(job)
    regions = {}
    for r in controller.config.regions:
        st = controller.status_of(job, r)
        regions[r] = {
            "state": st.state,
            "run": st.run_id,
            "caught_up": st.caught_up,
            "storage": storage_lost(controller.config.region(r), job) is None,
        }
    return {"consumers_read": active.region if active else None, "regions": regions}


def prepare(
    controller, job: str, kind: str, target: str, *, timeout_s: float, max_lag_s: float = 60.0, wait_s: float = 300.0
) -> dict:
    """Resolve the region (``standby``/``active``/a name), check every precondition, estimate
    the recovery, and take the job's procedure lock; what the later steps need. Raises
    :class:`DrillRefused` or :class:`ProcedureBusy` — with a procedure row saying why —
    before anything is broken."""
    check_kind(kind)
    if target == "primary":
        raise DrillRefused(
            f"region primary is the control-region-loss drill's target, not a {kind} drill's",
            "give a region, standby or active",
        )
    region = target
    if target in ("standby", "active"):
        active = controller.db.active_region(job)
        if active is None:
            raise DrillRefused(f"job {job} has no active region: nothing to drill", "deploy it before drilling")
        region = active.region if target == "active" else controller.config.partner(active.region).name
    try:
        ready = preflight(controller, job, region, max_lag_s=max_lag_s, wait_s=wait_s)
    except DrillRefused as exc:
        refused = controller.db.start_procedure(f"drill:{kind}", job, region, detail=json.dumps({"refused": str(exc)}))
        controller.db.finish_procedure(refused, "refused", detail=json.dumps({"refused": str(exc)}))
        raise
    active = controller.db.active_region(job)
    lag = None
    if kind == "region-loss" and active is not None and active.region == region:  # consumers must move off it
        ours, theirs = ready["final_us"][region], ready["final_us"][ready["partner"]]
        lag = 0 if ours is None or theirs is None else max(0, ours - theirs)
    estimate = estimate_recovery(controller, job, region, kind, failover_lag_us=lag)
    basis = estimate.basis()
    procedure = controller.db.begin_procedure(
        f"drill:{kind}",
        job,
        region,
        ttl_s=lock_ttl_s(timeout_s),
        detail=json.dumps({"preflight": ready, "estimate_basis": basis}, default=str),
    )
    return {
        "job": job,
        "kind": kind,
        "region": region,
        "estimate_s": estimate.seconds,
        "estimate_basis": basis,
        "procedure": procedure,
    }


def abandon(controller, prepared: dict, broken: dict | None, why: str) -> dict:
    """End a drill that did not get through: restore what it broke and record the state it
    left, so the drill history says what failed and where things stand."""
    left = restore(controller, prepared["job"], prepared["region"], broken or {})
    gap = controller.consumer_gap(prepared["job"], controller.db.procedure(prepared["procedure"]).started_at)
    controller.db.finish_procedure(
        prepared["procedure"],
        "failed",
        estimate_s=prepared.get("estimate_s"),
        detail=json.dumps({"failed": why, "broken": broken, **left, "consumer_gap": gap}, default=str),
    )
    return left


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
        # the region's checkpoints and outputs are gone for the job
        detail["storage_moved_to"] = move_storage_aside(controller.config.region(region), job, at)
        active = controller.db.active_region(job)
        if active is not None and active.region == region:  # a lost active region is failed over, not refused
            from tidegate.runtime.procedures.failover import fail_over

            detail["failover"] = fail_over(controller, job, region, f"drill: region {region} lost").to_dict()
    # the region is down now: its record must say so before recovery starts
    controller.reconcile(job, region)
    return Broken(kind, job, region, at, detail)


def move_storage_aside(region, job: str, at: float) -> str:
    """Move ``job``'s place in ``region``'s storage to ``lost/<job>-<at>`` beside the region's
    jobs, through the region's store; where it went, as a lineage root is recorded (a folder
    or an ``s3a://`` URI). Nothing there is no error: the place is gone either way."""
    store = region.store()
    lost = region.storage.child("lost", f"{job}-{int(at)}")
    store.move_tree(store.path_of(region.job_root(job)), store.path_of(lost))
    return str(lost.path) if lost.is_local else lost.uri


def move_storage_back(region, job: str, moved: str) -> bool:
    """Put storage :func:`move_storage_aside` moved back, unless a recovery already made the
    job's place again (its replay is then the region's storage); whether it moved."""
    store = region.store()
    place, aside = store.path_of(region.job_root(job)), store.path_of(parse_root(moved))
    if store.exists(place) or not store.exists(aside):
        return False
    store.move_tree(aside, place)
    return True


def remove_moved_storage(region, moved: str) -> bool:
    """Remove storage a passed drill moved aside; False (and the files left) when the store does
    not answer — the drill's record, not those files, is the evidence it passed."""
    try:
        store = region.store()
        store.delete(store.path_of(parse_root(moved)))
    except (OSError, TidegateError):
        return False
    return True


def recover(controller, broken: Broken) -> dict:
    """Bring the region back the way the drill's kind calls for; the start's summary."""
    job, region = broken.job, broken.region
    context = {"drill": broken.kind}
    expected = {"node-failure": "reused", "upgrade": "fresh", "region-loss": "fresh"}[broken.kind]
    run = None
    if broken.kind == "node-failure":
        run = _restarted_by_supervisor(controller, job, region, broken.detail.get("killed_run"))
    if run is None:
        # an upgrade continues where the output was final — a window job from the time it was
        # final through, a per-event job from the positions its last batch ended at — by replay
        result = controller.start(
            job, region, mode="last-stopped", context=context, fresh_checkpoint=broken.kind == "upgrade"
        )
        run = controller.db.run(result.run_id)
    if run.checkpoint != expected:
        raise TidegateError(
            f"drill {broken.kind}: the recovery {run.checkpoint} the checkpoint, expected {expected}: "
            f"{run.checkpoint_reason}",
            "look at the run's plan; the drill did not exercise what it should",
        )
    return {
        "run_id": run.id,
        "checkpoint": run.checkpoint,
        "reason": run.checkpoint_reason,
        "output_start_us": run.output_start_us,
        "restarted_by": "supervisor" if json.loads(run.context or "{}").get("auto_restart") else "drill",
    }


def _restarted_by_supervisor(controller, job: str, region: str, killed_run: int | None, wait_s: float = 90.0):
    """With keep-running and a live region supervisor, node failure is the platform's to
    recover: wait for the supervisor's restart rather than race it. None when there is none."""
    from tidegate.runtime.jobs.process import supervisor_lease

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


def finish(
    controller,
    procedure_id: int,
    broken: dict,
    recovered: dict,
    checks: list[dict],
    estimate_s: float | None,
    estimate_basis: dict | None = None,
) -> dict:
    """Record the drill: pass only if the region caught up and every check passed. The record
    keeps the estimate's basis beside the recovery split into the same terms, and each term's
    error, so a wrong estimate says which term was wrong."""
    from tidegate.runtime.estimates.recovery import actual_terms, term_errors

    db = controller.db
    run = db.run(recovered["run_id"])
    actual = None if run.caught_up_at is None else run.caught_up_at - broken["at"]
    passed = actual is not None and bool(checks) and all(c.get("success") for c in checks)
    waited = (broken.get("failover") or {}).get("waited_s") if broken.get("failover", {}).get("switched") else None
    measured = actual_terms(db, run.id, broken_at=broken["at"], failover_waited_s=waited)
    summary = {
        "broken": broken,
        "recovered": recovered,
        "estimate_s": estimate_s,
        "actual_s": actual,
        "relative_error": None if not actual or estimate_s is None else (estimate_s - actual) / actual,
        "estimate_basis": estimate_basis,
        "actual_terms": measured,
        "term_errors": term_errors((estimate_basis or {}).get("terms") or {}, measured),
        "consumer_gap": controller.consumer_gap(broken["job"], db.procedure(procedure_id).started_at),
    }
    moved = broken.get("storage_moved_to")
    if passed and moved:  # evidence of a passed drill is the record, not the old files
        summary["storage_removed"] = remove_moved_storage(controller.config.region(broken["region"]), moved)
    data_docs = next((c.get("data_docs") for c in checks if c.get("data_docs")), None)
    db.finish_procedure(
        procedure_id,
        "passed" if passed else "failed",
        estimate_s=estimate_s,
        actual_s=actual,
        checks=[
            {k: c.get(k) for k in ("target", "success", "span", "data_docs", "message", "task_s", "warm")}
            for c in checks
        ],
        detail=json.dumps(summary, default=str),
        data_docs=data_docs,
    )
    if not passed:
        failed = [c for c in checks if not c.get("success")]
        raise TidegateError(
            f"drill {broken['kind']} of {broken['job']} in {broken['region']} FAILED: "
            + ("; ".join(c.get("message") or c.get("summary", "") for c in failed) or "the region never caught up"),
            "something was lost or doubled: the Data Docs and the procedure record say what",
        )
    return summary


def history(db, job: str | None = None, limit: int = 50) -> list[dict]:
    """The drills' records, newest first: result, estimate vs actual (with the estimate's
    basis), what was checked, and how far the consumer view fell behind meanwhile."""
    rows = []
    for p in db.procedures(job, kind_prefix="drill:", limit=limit):
        try:
            detail = json.loads(p.detail) if p.detail else {}
        except ValueError:
            detail = {}
        detail = detail if isinstance(detail, dict) else {}
        rows.append(
            {
                "id": p.id,
                "kind": p.kind,
                "job": p.job,
                "region": p.region,
                "started_at": p.started_at,
                "ended_at": p.ended_at,
                "result": p.result,
                "estimate_s": p.estimate_s,
                "actual_s": p.actual_s,
                "checks": json.loads(p.checks) if p.checks else [],
                "data_docs": p.data_docs,
                "consumer_gap": detail.get("consumer_gap"),
                "estimate_basis": detail.get("estimate_basis"),
            }
        )
    return rows
