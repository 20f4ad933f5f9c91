"""The control-region-loss drill (semantics §7): lose the region that runs the platform, on purpose.

The other drills break a job's region; this one takes down the region that holds the control
database's primary, as a regional outage would: the drivers of every job there and that
region's supervisor (SIGKILL), the job's place in the region's storage (moved aside, as the
region-loss drill does), then — through the operator's fault command
(``TIDEGATE_CONTROL_FAULTS``) — its PostgreSQL, Patroni and etcd member and its Airflow.
Then the drill lets the platform recover as it must in a real outage, with nobody acting:
the quorum of the other region and the witness promotes that region's standby, its Airflow
keeps scheduling, and the health watch fails the job's consumers over. The drill only
watches, within ``timeout_s``; a watch that never acts fails the drill.

The drill's own task may run in the region it loses: its break step records what it is
about to do in the procedure (committed to the synchronous standby) before the kill, so
when the surviving region's scheduler runs the killed task again, the step finds the break
recorded and goes on from there instead of breaking anything twice.

Restoring is part of it: the fault command's ``restore`` brings the region back, its
PostgreSQL must rejoin as the synchronous standby (never a second primary), and the job's
duplicate there is rebuilt by replay — by the failover's restore when consumers had to move,
else by the drill; the region's other jobs start again from their checkpoints. The checks
and the record are the other drills' (:mod:`tidegate.runtime.procedures.drills`).

``TIDEGATE_CONTROL_FAULTS`` is the operator's, never a job author's: JSON with a ``kill`` and
a ``restore`` command, each a list of arguments run without a shell, where ``{region}``
stands for the region's name. For the local topology:
``{"kill": ["python", "-m", "tidegate.control.ha.power", "kill", "{region}", "--folder", DIR],
"restore": [… "restore" …]}`` (:mod:`tidegate.control.ha.power`).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass

from tidegate.control.ha.primary import primary_of
from tidegate.errors import ConfigError, TidegateError
from tidegate.eventtime.durations import format_time_us
from tidegate.runtime.estimates.recovery import failover_handover
from tidegate.runtime.jobs.process import driver_here, lease_holder, supervisor_lease
from tidegate.runtime.procedures.drills import (
    DrillRefused,
    estimate_recovery,
    move_storage_aside,
    preflight,
)
from tidegate.runtime.procedures.drills import abandon as abandon_job
from tidegate.runtime.procedures.failover import lock_ttl_s
from tidegate.runtime.procedures.faults import kill_group

KIND = "control-region-loss"
LOCK = "@control-plane"  # one such drill at a time, platform-wide; the job's own lock stays free for its failover
FAULTS_ENV = "TIDEGATE_CONTROL_FAULTS"
COMMAND_S = 300.0  # the fault commands, and the old primary's return as the synchronous standby
PROMOTION_S = 30.0  # before any drill of this kind: Patroni's shortest ttl and a loop, assumed


@dataclass(frozen=True)
class Faults:
    """The operator's commands that take a region down and bring it back."""

    kill: tuple[str, ...]
    restore: tuple[str, ...]

    def command(self, action: str, region: str) -> list[str]:
        return [arg.replace("{region}", region) for arg in (self.kill if action == "kill" else self.restore)]

    def run(self, action: str, region: str, timeout_s: float = COMMAND_S) -> None:
        """Run the ``action`` command for ``region``. A failure names the command's program (its
        arguments may hold credentials) and the end of its error output, which the drill's
        record keeps: a fault command must not print secrets."""
        argv = self.command(action, region)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:  # its message would name every argument
            raise TidegateError(
                f"the {action} command of {region} ({argv[0]}) did not end within {timeout_s:.0f} s",
                f"check {FAULTS_ENV} and the region's state",
            ) from None
        except OSError as failed:
            raise TidegateError(
                f"the {action} command of {region} ({argv[0]}) did not run: {failed.strerror}",
                f"check {FAULTS_ENV}",
            ) from None
        if done.returncode:
            raise TidegateError(
                f"the {action} command of {region} ({argv[0]}) exited {done.returncode}: "
                f"{(done.stderr or done.stdout).strip()[-500:]}",
                f"check {FAULTS_ENV} and the region's state",
            )


def parse_faults(text: str) -> Faults:
    """``TIDEGATE_CONTROL_FAULTS``'s value: a JSON object whose ``kill`` and ``restore`` are
    non-empty lists of strings, each naming ``{region}`` somewhere."""
    hint = (
        f'set {FAULTS_ENV} to JSON like {{"kill": ["cmd", "kill", "{{region}}"], "restore": ["cmd", "start", '
        '"{region}"]}: commands run without a shell, {region} replaced by the region\'s name'
    )
    try:
        found = json.loads(text)
    except json.JSONDecodeError as bad:
        raise ConfigError(f"{FAULTS_ENV} is not JSON ({bad.msg} at character {bad.pos})", hint) from None
    if not isinstance(found, dict) or set(found) != {"kill", "restore"}:
        raise ConfigError(f"{FAULTS_ENV} must be an object with exactly the keys kill and restore", hint)
    commands = {}
    for action in ("kill", "restore"):
        argv = found[action]
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and a for a in argv):
            raise ConfigError(f"{FAULTS_ENV}: {action} must be a non-empty list of non-empty strings", hint)
        if not any("{region}" in a for a in argv):
            raise ConfigError(f"{FAULTS_ENV}: the {action} command never names {{region}}", hint)
        commands[action] = tuple(argv)
    return Faults(**commands)


def configured_faults(env=None) -> Faults:
    text = (os.environ if env is None else env).get(FAULTS_ENV, "").strip()
    if not text:
        raise DrillRefused(
            f"the {KIND} drill needs {FAULTS_ENV}: nothing here can take a region down",
            f"set {FAULTS_ENV} where Airflow's tasks run to the commands that stop and restart a region "
            "(docs/guide/control-plane-in-two-regions.md)",
        )
    return parse_faults(text)


def prepare(
    controller,
    job: str,
    target: str,
    *,
    timeout_s: float,
    max_lag_s: float = 60.0,
    wait_s: float = 300.0,
    watch_every_s: float,
) -> dict:
    """Check every precondition, estimate the recovery and take the platform-wide lock.
    ``target`` must be ``primary`` or the primary's region; ``watch_every_s`` is the health
    watch's interval, part of the first drill's estimate. Raises :class:`DrillRefused`, with
    a procedure row saying why, before anything is broken."""
    try:
        faults = configured_faults()
        region = primary_region(controller, target)
        if (held := controller.db.procedure_lock(job)) is not None:
            raise DrillRefused(
                f"{held.kind} of {job} is running (procedure {held.procedure_id}): not now",
                "wait for it to end, then drill",
            )
        ready = preflight(controller, job, region, max_lag_s=max_lag_s, wait_s=wait_s)
    except (DrillRefused, ConfigError) as exc:
        where = None if isinstance(exc, ConfigError) else target
        refused = controller.db.start_procedure(f"drill:{KIND}", job, where, detail=json.dumps({"refused": str(exc)}))
        controller.db.finish_procedure(refused, "refused", detail=json.dumps({"refused": str(exc)}))
        raise DrillRefused(exc.problem, exc.fix) from None
    active = controller.db.active_region(job)
    lag = None
    if active is not None and active.region == region:
        ours, theirs = ready["final_us"][region], ready["final_us"][ready["partner"]]
        lag = 0 if ours is None or theirs is None else max(0, ours - theirs)
    estimate = estimate_recovery(controller, job, region, KIND, failover_lag_us=lag)
    basis = estimate.basis()
    if not basis["inputs"].get("recorded_breaks_s") and estimate.seconds is not None:
        basis = first_of_kind(controller.db, job, basis, consumers_move=lag is not None, watch_every_s=watch_every_s)
    procedure = controller.db.begin_procedure(
        f"drill:{KIND}",
        job,
        region,
        ttl_s=lock_ttl_s(timeout_s),
        lock=LOCK,
        # the fault commands' programs only: their arguments may hold the operator's credentials
        detail=json.dumps(
            {"preflight": ready, "estimate_basis": basis, "fault_programs": [faults.kill[0], faults.restore[0]]}
        ),
    )
    return {
        "job": job,
        "kind": KIND,
        "region": region,
        "estimate_s": basis["seconds"],
        "estimate_basis": basis,
        "procedure": procedure,
    }


def first_of_kind(db, job: str, basis: dict, *, consumers_move: bool, watch_every_s: float) -> dict:
    """The estimate's basis for the job's first drill of this kind, whose break no record
    measured yet: it adds what the platform takes over before the restart's request, the
    promotion (:data:`PROMOTION_S`) and one health-watch interval; and when consumers read the
    lost region, the failover's hand-over from its switch to its restore
    (:func:`~tidegate.runtime.estimates.recovery.failover_handover`), its consumer-view check
    among it."""
    basis = json.loads(json.dumps(basis))
    takeover = PROMOTION_S + watch_every_s
    why = f"the promotion ({PROMOTION_S:g} s assumed) and one health-watch interval ({watch_every_s:g} s)"
    if consumers_move:
        handover = failover_handover(db, job, basis["inputs"])
        takeover += handover
        why += f", then the failover's hand-over from its switch to its restore ({handover:g} s)"
    basis["terms"]["break_s"] = round((basis["terms"].get("break_s") or 0.0) + takeover, 1)
    basis["inputs"]["first_of_kind"] = f"no {KIND} drill recorded yet: the break adds {why} to the hand-over"
    basis["seconds"] = round(basis["seconds"] + takeover, 1)
    return basis


def primary_region(controller, target: str) -> str:
    """The region the drill loses: the one whose PostgreSQL is the primary, with the other's
    standby synchronous (else commits only the primary had would go with it)."""
    primary = primary_of(controller.db.engine)
    if primary.region is None:
        raise DrillRefused(
            f"the control database is not replicated across regions: a {KIND} drill would lose the platform",
            "run the control database in both regions (docs/guide/control-database-in-two-regions.md) first",
        )
    if target not in ("primary", primary.region):
        raise DrillRefused(
            f"the {KIND} drill loses the region that holds the control database's primary, "
            f"{primary.region}, not {target}",
            f"give region primary (or {primary.region})",
        )
    region = primary.region
    if region not in controller.config.regions:
        raise DrillRefused(
            f"the control database's primary says it is in {region}, which is not a region of this platform",
            "name each PostgreSQL site after its region",
        )
    partner = controller.config.partner(region).name
    if partner not in primary.sync_standbys:
        standbys = ", ".join(primary.sync_standbys) or "none"
        raise DrillRefused(
            f"{partner}'s PostgreSQL is not the synchronous standby (synchronous: {standbys}): losing {region} "
            "now could lose commits only its primary has",
            f"wait until {partner} is the synchronous standby again (patronictl list), then drill",
        )
    return region


def break_region(controller, prepared: dict) -> dict:
    """Take the region down; the break as the drill's later steps read it. Each step is
    recorded in the procedure before it is taken, so a second run of this step — its first
    died with the region — goes on from the record and breaks nothing twice."""
    db, procedure = controller.db, prepared["procedure"]
    detail = _detail(db, procedure)
    if "broken" in detail:  # the first try ran in the region it lost: the surviving region goes on
        return detail["broken"] | {"taken_over_at": time.time()}
    job, region = prepared["job"], prepared["region"]
    faults = configured_faults()
    at = detail.setdefault("breaking_at", time.time())
    db.note_procedure(procedure, json.dumps(detail, default=str))
    active = db.active_region(job)
    killed_run = controller.status_of(job, region).run_id
    drivers = kill_region_drivers(controller, region)
    moved = move_storage_aside(controller.config.region(region), job, at)
    controller.reconcile(job, region)  # the region is down: its record says so before anything recovers
    broken = {
        "kind": KIND,
        "job": job,
        "region": region,
        "at": at,
        "killed_run": killed_run,
        "drivers_killed": drivers,
        "storage_moved_to": moved,
        "consumers_read": active.region if active else None,
    }
    detail["broken"] = broken
    db.note_procedure(procedure, json.dumps(detail, default=str))
    # its PostgreSQL, Patroni, etcd member and Airflow: this process too, when it runs there
    faults.run("kill", region)
    return broken


def kill_region_drivers(controller, region: str) -> list[dict]:
    """kill -9 every driver of ``region`` that runs on this host, and the region's
    supervisor: what a lost region's machines ran."""
    killed = []
    for job in controller.db.jobs():
        status = controller.status_of(job, region)
        if status.run_id is not None and (process := driver_here(controller.db.run(status.run_id))) is not None:
            kill_group(process, wait_s=0)
            killed.append({"job": job, "run": status.run_id, "pid": process.pid})
    lease = controller.db.lease(supervisor_lease(region))
    if lease is not None and (holder := lease_holder(lease)) is not None and holder.alive():
        kill_group(holder, wait_s=0)
        killed.append({"supervisor": region, "pid": holder.pid})
    return killed


def recover(controller, broken: dict, *, timeout_s: float, poll_s: float = 1.0) -> dict:
    """Watch the platform recover, then restore the region: consumers must leave the lost
    region (the health watch's failover) within ``timeout_s``; the region comes back through
    the restore command, its PostgreSQL rejoins as the synchronous standby, and the job's
    duplicate there is rebuilt by replay. The recovery's summary, with when each happened."""
    db = controller.db
    job, region, at = broken["job"], broken["region"], broken["at"]
    faults = configured_faults()
    figures: dict = {"resumed_s": round(time.time() - at, 1)}  # this step ran in the surviving region
    if broken.get("consumers_read") == region:
        moved = _wait(
            lambda: (a := db.active_region(job)) is not None and a.region != region and a,
            timeout_s,
            poll_s,
            f"the health watch did not move {job}'s consumers off {region} within {timeout_s:.0f} s of the loss",
            "is tidegate_health_watch unpaused, and does the surviving region's Airflow schedule it?",
        )
        figures["consumers_moved_s"] = round(moved.since - at, 1)
    faults.run("restore", region)
    _wait(
        lambda: region in primary_of(db.engine).sync_standbys,
        COMMAND_S,
        poll_s,
        f"{region}'s PostgreSQL did not rejoin as the synchronous standby within {COMMAND_S:.0f} s",
        "read its Patroni log; it must never come back as a second primary",
    )
    figures["rejoined_standby_s"] = round(time.time() - at, 1)
    _wait(
        lambda: db.procedure_lock(job) is None,
        timeout_s,
        poll_s,
        f"{job}'s failover still runs {timeout_s:.0f} s after the loss",
        "look at the tidegate_failover run the health watch triggered",
    )
    run, restarted_by = _restored_run(controller, job, region, broken.get("killed_run")), "failover"
    if run is None:  # no failover restored it (the region was the standby, or the restore failed)
        started = controller.start(job, region, mode="last-stopped", context={"drill": KIND})
        run, restarted_by = db.run(started.run_id), "drill"
    if run.checkpoint != "fresh":
        raise TidegateError(
            f"drill {KIND}: the region's restore {run.checkpoint} the checkpoint, expected fresh: "
            f"{run.checkpoint_reason}",
            "look at the run's plan; the drill did not exercise a rebuild by replay",
        )
    return {
        "run_id": run.id,
        "checkpoint": run.checkpoint,
        "reason": run.checkpoint_reason,
        "output_start_us": run.output_start_us,
        "check_from": format_time_us(run.output_start_us),
        "restarted_by": restarted_by,
        "others": restart_others(controller, job, region),
        **figures,
    }


def _restored_run(controller, job: str, region: str, killed_run: int | None):
    latest = controller.db.latest_run(job, region)
    if latest is None or killed_run is None or latest.id <= killed_run:
        return None
    return latest if controller.status_of(job, region).alive else None


def restart_others(controller, job: str, region: str) -> list[str]:
    """Start the region's other jobs the loss stopped, from their checkpoints (what the
    region's supervisor does when it comes back); what was done."""
    done = []
    for other in controller.db.jobs():
        deployment = controller.db.deployment(other, region)
        if other == job or deployment is None or deployment.desired != "running":
            continue
        if controller.status_of(other, region).alive or controller.db.procedure_lock(other) is not None:
            continue
        try:
            started = controller.start(other, region, mode="last-stopped", context={"drill": KIND})
            done.append(f"started {other} in {region} (run {started.run_id})")
        except TidegateError as exc:
            done.append(f"could not start {other} in {region}: {exc}")
    return done


def abandon(controller, prepared: dict, broken: dict | None, why: str) -> dict:
    """End a drill that did not get through: bring the region back if it was taken down,
    then restore the job as any drill does; the state left."""
    restored = None
    if broken is not None or "breaking_at" in _detail(controller.db, prepared["procedure"]):
        try:
            configured_faults().run("restore", prepared["region"])
            restored = f"{prepared['region']} restored"
        except TidegateError as exc:
            restored = f"could not restore {prepared['region']}: {exc}"
    left = abandon_job(controller, prepared, broken, why)
    left["region_restore"] = restored
    return left


def _detail(db, procedure_id: int) -> dict:
    record = db.procedure(procedure_id)
    try:
        found = json.loads(record.detail) if record is not None and record.detail else {}
    except ValueError:
        found = {}
    return found if isinstance(found, dict) else {}


def _wait(probe, timeout_s: float, poll_s: float, what: str, hint: str):
    deadline = time.monotonic() + timeout_s
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise TidegateError(what, hint)
        time.sleep(poll_s)
