"""The planned stop (semantics §7): estimate, decide, stop, restart, roll back or record — per region.

``tidegate_planned_stop`` runs one turn per region, in the order :func:`turns` (by
:func:`upgrade_order`) chooses: :func:`open_record`, the hook's estimate, :func:`go_or_abort`, the stop, start,
wait and checks (operators), then :func:`roll_back` when the new version did not become
healthy, and :func:`record` at the end whatever happened. The decisions themselves — the
order, proceed / move consumers first / abort — are plain Python in
:mod:`tidegate.runtime.procedures.planned_stop`; this module acts on them.
"""

from __future__ import annotations

import json
from typing import Any

from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException

from tidegate_airflow.hooks.tidegate import TidegateHook
from tidegate_airflow.procedures import close_procedure, consumer_gap, open_procedure


def upgrade_order(hook: TidegateHook, job: str, region: str) -> list[str]:
    """Which regions the planned stop takes, in order (see
    :func:`tidegate.runtime.procedures.planned_stop.upgrade_order`)."""
    from tidegate.errors import TidegateError
    from tidegate.runtime.procedures.planned_stop import upgrade_order as order

    try:
        return order(hook.controller, job, region)
    except TidegateError as exc:
        raise AirflowFailException(str(exc)) from None


def turns(hook: TidegateHook, job: str, region: str) -> dict[str, Any]:
    """The regions in :func:`upgrade_order` as ``regions``, and each turn's region by name:
    ``turn_1``, ``turn_2`` (None when the planned stop takes one region) — what the DAG's
    turns read as XComArgs."""
    regions = upgrade_order(hook, job, region)
    return {"regions": regions, "turn_1": regions[0], "turn_2": regions[1] if len(regions) > 1 else None}


def open_record(
    hook: TidegateHook,
    job: str,
    region: str,
    version: int,
    allowed_delay_s: float,
    step: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Open the turn's procedure record (and take the job's lock): its id, and the version
    running in ``region`` now — what a failed upgrade rolls back to. A retry of the task (the
    same ``step``) adopts the record its first attempt opened."""
    running = hook.controller.status_of(job, region).version
    procedure = open_procedure(
        hook,
        "planned-stop",
        job,
        region,
        {"version": version, "previous_version": running, "allowed_delay_s": allowed_delay_s},
        step=step,
    )
    return {"procedure": procedure, "previous_version": running}


def go_or_abort(
    hook: TidegateHook, procedure_id: int, job: str, region: str, estimate: dict[str, Any], allowed_delay_s: float
) -> dict[str, Any]:
    """Act on :func:`~tidegate.runtime.procedures.planned_stop.decide_for_region`: abort
    (recorded, and the task fails), or go ahead — moving consumers to the partner first when
    the decision says so."""
    from tidegate.runtime.procedures.planned_stop import decide_for_region

    decision = decide_for_region(hook.controller, job, region, estimate, allowed_delay_s)
    print(f"decision: {decision}")
    if not decision["proceed"]:
        abort(hook, procedure_id, decision)
    if decision["switch_to"]:
        hook.controller.switch_active(job, decision["switch_to"], f"planned stop of {region}: {decision['reason']}")
    return decision


def abort(hook: TidegateHook, procedure_id: int, decision: dict[str, Any]) -> None:
    hook.controller.finish_procedure(
        procedure_id, "aborted", estimate_s=decision.get("estimate_s"), detail=decision["reason"]
    )
    raise AirflowFailException(
        f"planned stop aborted: {decision['reason']} — raise allowed_delay_s, "
        "or move consumers to the partner region first"
    )


def roll_back(
    hook: TidegateHook,
    procedure_id: int | None,
    deployed: dict[str, Any] | None,
    regions: list[str] | None,
    position: int,
    previous_version: int | None,
    *,
    timeout_s: float,
    checks: list[dict[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """The new version (``deployed``) did not become healthy in ``regions[position]``, or its
    output failed a completeness check (``checks``, the check task's outcomes): bring the
    previous version back (see :mod:`tidegate.runtime.procedures.rollback`) — after a failed
    check from where the previous version stopped, so no reader sees the failed version's
    rows again — and record the procedure as rolled back, saying what failed. Skipped when the
    new version was never started (an abort, a refused stop), or the procedure failed before
    it opened its record (any input None)."""
    from tidegate.runtime.procedures.rollback import roll_back as do_roll_back

    if procedure_id is None or not regions or deployed is None:
        raise AirflowSkipException("the planned stop did not get as far as opening its record: nothing to roll back")
    job, region, new_version = deployed["job"], regions[position], deployed["version"]
    controller = hook.controller
    procedure = controller.procedure(procedure_id)
    latest = controller.latest_run(job, region)
    if latest is None or latest.version != new_version or latest.requested_at < procedure.started_at:
        raise AirflowSkipException(f"version {new_version} was never started in {region}: nothing to roll back")
    failed_checks = failed_check_summaries(checks)
    if previous_version is None or previous_version == new_version:
        stopped = stop_wrong_output(hook, job, region, new_version) if failed_checks else None
        close_procedure(
            hook,
            procedure_id,
            "failed",
            {
                "failed": f"version {new_version} did not become healthy "
                "and there is no previous version to roll back to",
                "failed_checks": failed_checks,
                "stopped": stopped,
            },
        )
        raise AirflowFailException(
            f"version {new_version} of {job} did not become healthy in {region}, and no "
            "earlier version ran there to roll back to: fix the spec and deploy again"
        )
    run = controller.status_of(job, region)
    if failed_checks:
        why = f"version {new_version} failed its completeness check in {region}: " + "; ".join(
            f"{c['target']}: {c['message'] or 'failed'}" for c in failed_checks
        )
    else:
        why = (
            f"version {new_version} did not become healthy in {region} ({run.state}"
            f"{', not caught up' if run.state == 'running' and not run.caught_up else ''}: "
            f"{run.detail or 'no detail'})"
        )
    done = do_roll_back(
        controller, job, region, previous_version, why, timeout_s=timeout_s, discard_output=bool(failed_checks)
    )
    close_procedure(
        hook,
        procedure_id,
        "rolled-back",
        {"rollback": done.to_dict(), "failed_checks": failed_checks, "consumer_gap": consumer_gap(hook, procedure_id)},
    )
    return done.to_dict()


def stop_wrong_output(hook: TidegateHook, job: str, region: str, version: int) -> str:
    """A version whose output failed its check, with nothing to roll back to, is stopped, so
    that no switch can move consumers to it (a switch needs the region running) — unless it is
    the job's last healthy duplicate: then it is left running, and the record says so."""
    from tidegate.errors import ControllerError

    try:
        hook.controller.stop(job, region, grace_s=30, reason=f"version {version} failed its completeness check")
    except ControllerError as exc:
        return f"left running: {exc}"
    return f"version {version} stopped in {region}: consumers cannot move to it"


def failed_check_summaries(checks: list[dict[str, Any] | None] | None) -> list[dict[str, Any]]:
    """The checks that ran and failed, as the record keeps them. A check that never reported
    (None) is not among them: the version then did not become healthy, it was not proved wrong."""
    return [
        {
            "target": c.get("target"),
            "message": c.get("message") or c.get("summary") or "",
            "span": c.get("span"),
            "data_docs": c.get("data_docs"),
        }
        for c in checks or []
        if c is not None and not c.get("success")
    ]


def record(
    hook: TidegateHook,
    procedure_id: int | None,
    estimate: dict[str, Any] | None,
    *,
    rolled: dict[str, Any] | None,
    started: dict[str, Any] | None,
    checks: list[dict[str, Any] | None],
) -> dict[str, Any]:
    """The turn's last step, whatever happened before it: the record of estimate vs measured
    catch-up and the checks (see :func:`record_outcome`) when the new version ran; else the
    task fails saying why — rolled back (``rolled``), aborted, or failed before the restart
    (``started`` None; the record is closed as failed)."""
    if procedure_id is None:
        raise AirflowFailException("the planned stop failed before it opened its record: see the failed task")
    if rolled is not None:  # the new version never became healthy: the previous one runs again
        raise AirflowFailException(
            f"planned stop of {rolled['region']} rolled back to version {rolled['restored_version']}: {rolled['why']}"
        )
    if started is None:  # aborted or failed before the restart: the run must fail, saying why
        procedure = hook.controller.procedure(procedure_id)
        if procedure.result == "aborted":
            raise AirflowFailException(f"planned stop of {procedure.region} aborted: {procedure.detail}")
        hook.controller.finish_procedure(procedure_id, "failed", detail="did not reach the restart")
        raise AirflowFailException("the planned stop failed before the restart: see the failed task")
    if estimate is None:  # the restart runs only after the decision, which needs the estimate
        raise AirflowFailException("the new version started without an estimate: see the estimate task")
    from tidegate.runtime.procedures.planned_stop import decide

    attach_estimates(hook, started, estimate)
    decision = decide(estimate, float("inf"))
    return record_outcome(
        hook,
        procedure_id,
        estimate_s=decision["estimate_s"],
        start=started,
        checks=[c or {"success": False, "target": "completeness"} for c in checks],
        estimates=recorded_estimates(estimate, decision),
    )


def recorded_estimates(estimate: dict[str, Any], decision: dict[str, Any]) -> dict[str, Any]:
    """What the record keeps of the estimate: each way's figure (the rehearsal's as corrected
    for the restart, and as it measured itself when it ran), which one the decision used and
    why, and how the rehearsal's figure was made."""
    kept = {"model_s": estimate.get("model_s"), "rehearsal_s": estimate.get("rehearsal_s")}
    if estimate.get("model_basis") is not None:
        kept["model_basis"] = estimate["model_basis"]
    if estimate.get("rehearsal_measured_s") is not None:
        kept |= {
            "rehearsal_measured_s": estimate["rehearsal_measured_s"],
            "rehearsal_basis": estimate.get("rehearsal_basis"),
        }
    return kept | {"used": decision["used"], "used_why": decision.get("used_why")}


def attach_estimates(hook: TidegateHook, start: dict[str, Any], estimate: dict[str, Any]) -> None:
    """The run records what was estimated for it, beside what it measures."""
    hook.controller.update_run(
        start["run_id"], estimate_model_s=estimate.get("model_s"), estimate_rehearsal_s=estimate.get("rehearsal_s")
    )


def record_outcome(
    hook: TidegateHook,
    procedure_id: int,
    *,
    estimate_s: float | None,
    start: dict[str, Any],
    checks: list[dict[str, Any]],
    estimates: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Estimate vs the measured catch-up of the run ``start`` began, and what was checked;
    ``estimates``: each way's figure and the one the decision used, each with its own error."""
    controller = hook.controller
    run = controller.run_record(start["run_id"])
    actual = run.catch_up_s
    error = None if actual is None or not estimate_s else (estimate_s - actual) / actual
    ok = all(c.get("success") for c in checks) and actual is not None
    from tidegate.runtime.estimates.recovery import term_errors

    ways = {k: v for k, v in (estimates or {}).items() if k.endswith("_s")}
    measured = controller.recovery_terms(run.id)
    model_terms = ((estimates or {}).get("model_basis") or {}).get("terms") or {}
    summary = {
        "estimate_s": estimate_s,
        "actual_s": actual,
        "relative_error": error,
        "run_id": run.id,
        "actual_terms": measured,
        "model_term_errors": term_errors(model_terms, measured) if model_terms else None,
        "estimates": None
        if estimates is None
        else estimates
        | {f"{k[:-2]}_error": None if v is None or not actual else (v - actual) / actual for k, v in ways.items()},
        "checks": [
            {k: c.get(k) for k in ("target", "success", "span", "data_docs", "check_id", "task_s", "warm")}
            for c in checks
        ],
        "consumer_gap": consumer_gap(hook, procedure_id),
    }
    data_docs = next((c.get("data_docs") for c in checks if c.get("data_docs")), None)
    controller.finish_procedure(
        procedure_id,
        "passed" if ok else "failed",
        estimate_s=estimate_s,
        actual_s=actual,
        checks=summary["checks"],
        detail=json.dumps(summary, default=str),
        data_docs=data_docs,
    )
    if not ok:
        raise AirflowException(f"procedure {procedure_id} failed: {summary}")
    return summary
