"""Steps of the operating procedures (SPEC §7) that are decisions and records, not I/O-heavy work.

Each is a plain function of the hook and XCom values, called from a ``@task`` in a DAG
file, so a test can call it directly too.
"""

from __future__ import annotations

import json
from typing import Any

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from tidegate_airflow.hooks import TidegateHook


def decide(estimate: dict[str, Any], allowed_delay_s: float) -> dict[str, Any]:
    """Proceed when the estimated catch-up fits the allowed delay, else abort — and say why.

    The estimate used is the larger of the model and the rehearsal (the pessimistic one):
    an operator who allowed 5 minutes does not want a plan that is late half the time."""
    figures = [v for v in (estimate.get("model_s"), estimate.get("rehearsal_s")) if v is not None]
    if not figures:
        return {"proceed": False, "estimate_s": None,
                "reason": f"no estimate could be made ({estimate.get('model_note') or 'no figures'})"}
    worst = max(figures)
    if worst <= allowed_delay_s:
        return {"proceed": True, "estimate_s": worst,
                "reason": f"estimated catch-up {worst:.0f} s is within the allowed {allowed_delay_s:.0f} s"}
    return {"proceed": False, "estimate_s": worst,
            "reason": f"estimated catch-up {worst:.0f} s exceeds the allowed {allowed_delay_s:.0f} s"}


PROCEDURE_TTL_S = 4 * 3600  # a procedure that died without ending frees its job after this


def open_procedure(hook: TidegateHook, kind: str, job: str, region: str | None, detail: dict,
                   ttl_s: float = PROCEDURE_TTL_S) -> int:
    """Record the procedure and take the job's procedure lock (one procedure per job at a
    time, SPEC §7); refused, naming the running one, while another holds it."""
    from tidegate.control.db import ProcedureBusy

    try:
        return hook.controller.db.begin_procedure(kind, job, region, ttl_s=ttl_s,
                                                  detail=json.dumps(detail, default=str))
    except ProcedureBusy as exc:
        raise AirflowFailException(str(exc)) from None


def close_procedure(hook: TidegateHook, procedure_id: int, result: str, detail: Any = None) -> None:
    """End the procedure and free the job (a no-op for one already ended)."""
    db = hook.controller.db
    if db.procedure(procedure_id).result == "running":
        db.finish_procedure(procedure_id, result, detail=None if detail is None else json.dumps(detail, default=str))


def abort(hook: TidegateHook, procedure_id: int, decision: dict[str, Any]) -> None:
    hook.controller.db.finish_procedure(procedure_id, "aborted", estimate_s=decision.get("estimate_s"),
                                        detail=decision["reason"])
    raise AirflowFailException(f"planned stop aborted: {decision['reason']} — raise allowed_delay_s, "
                               "or move consumers to the partner region first")


def record_outcome(hook: TidegateHook, procedure_id: int, *, estimate_s: float | None, start: dict[str, Any],
                   checks: list[dict[str, Any]]) -> dict[str, Any]:
    """Estimate vs the measured catch-up of the run ``start`` began, and what was checked."""
    db = hook.controller.db
    run = db.run(start["run_id"])
    actual = run.catch_up_s
    error = None if actual is None or not estimate_s else (estimate_s - actual) / actual
    ok = all(c.get("success") for c in checks) and actual is not None
    summary = {
        "estimate_s": estimate_s, "actual_s": actual, "relative_error": error, "run_id": run.id,
        "checks": [{k: c.get(k) for k in ("target", "success", "span", "data_docs", "check_id")} for c in checks],
    }
    data_docs = next((c.get("data_docs") for c in checks if c.get("data_docs")), None)
    db.finish_procedure(procedure_id, "passed" if ok else "failed", estimate_s=estimate_s, actual_s=actual,
                        checks=summary["checks"], detail=json.dumps(summary, default=str), data_docs=data_docs)
    if not ok:
        raise AirflowException(f"procedure {procedure_id} failed: {summary}")
    return summary


def attach_estimates(hook: TidegateHook, start: dict[str, Any], estimate: dict[str, Any]) -> None:
    """The run records what was estimated for it, beside what it measures."""
    hook.controller.db.update_run(start["run_id"], estimate_model_s=estimate.get("model_s"),
                                  estimate_rehearsal_s=estimate.get("rehearsal_s"))


def upgrade_order(hook: TidegateHook, job: str, region: str) -> list[str]:
    """Which regions a planned stop takes, in order: one region, or — for ``pair`` — the
    standby first (consumers never notice it), then the active one."""
    config = hook.controller.config
    if region != "pair":
        config.region(region)
        return [region]
    active = hook.controller.db.active_region(job)
    if active is None:
        raise AirflowFailException(f"job {job} has no active region: deploy it before a planned stop")
    partner = config.partner(active.region).name
    return [partner, active.region]


def decide_for_region(hook: TidegateHook, job: str, region: str, estimate: dict[str, Any],
                      allowed_delay_s: float) -> dict[str, Any]:
    """SPEC §7's decision for one region: proceed; move consumers to the partner first when
    this region is the active one and its catch-up would exceed the allowed delay (only if
    the partner is caught up); otherwise abort with the reason."""
    decision = decide(estimate, allowed_delay_s)
    decision["region"] = region
    decision["switch_to"] = None
    if decision["proceed"]:
        return decision
    controller = hook.controller
    active = controller.db.active_region(job)
    if active is None or active.region != region:
        decision["reason"] += f"; {region} does not serve consumers, so the delay is not theirs — proceeding"
        decision["proceed"] = True
        return decision
    if len(controller.config.regions) != 2:
        return decision
    partner = controller.config.partner(region).name
    status = controller.status_of(job, partner)
    if status.state == "running" and status.caught_up:
        decision.update(proceed=True, switch_to=partner,
                        reason=decision["reason"] + f"; consumers move to {partner} (caught up) first")
    else:
        decision["reason"] += f"; and consumers cannot move to {partner}: it is {status.state}"
    return decision


def claim(kind: str, job: str, region: str | None = None) -> int:
    """A DAG's first task: the job's procedure lock for ``kind`` (see :func:`open_procedure`)."""
    return open_procedure(TidegateHook(actor=kind), kind, job, region, {"by": "airflow"})


def release(procedure_id: int | None, reached_the_end: bool) -> None:
    """A DAG's last task (trigger rule all_done): end the procedure — passed when the DAG's
    final step delivered its result — and free the job."""
    if procedure_id is not None:
        close_procedure(TidegateHook(), procedure_id, "passed" if reached_the_end else "failed")


def roll_back(hook: TidegateHook, procedure_id: int, job: str, region: str, previous_version: int | None,
              new_version: int, *, timeout_s: float) -> dict[str, Any]:
    """The planned stop's new version did not become healthy: bring the previous version
    back (see :mod:`tidegate.runtime.rollback`) and record the procedure as rolled back.
    Skipped when the new version was never started (an abort, a refused stop)."""
    from airflow.sdk.exceptions import AirflowSkipException

    from tidegate.runtime.rollback import roll_back as do_roll_back

    controller = hook.controller
    procedure = controller.db.procedure(procedure_id)
    latest = controller.db.latest_run(job, region)
    if latest is None or latest.version != new_version or latest.requested_at < procedure.started_at:
        raise AirflowSkipException(f"version {new_version} was never started in {region}: nothing to roll back")
    if previous_version is None or previous_version == new_version:
        close_procedure(hook, procedure_id, "failed", {"failed": f"version {new_version} did not become healthy "
                                                                 "and there is no previous version to roll back to"})
        raise AirflowFailException(f"version {new_version} of {job} did not become healthy in {region}, and no "
                                   "earlier version ran there to roll back to: fix the spec and deploy again")
    run = controller.status_of(job, region)
    why = (f"version {new_version} did not become healthy in {region} ({run.state}"
           f"{', not caught up' if run.state == 'running' and not run.caught_up else ''}: {run.detail or 'no detail'})")
    done = do_roll_back(controller, job, region, previous_version, why, timeout_s=timeout_s)
    close_procedure(hook, procedure_id, "rolled-back", {"rollback": done.to_dict()})
    return done.to_dict()
