"""The failover (semantics §7): move a job's consumers to the partner region, restore the failed one.

``tidegate_failover`` runs :func:`assess` (act at all?), :func:`switch` (consumers move),
then the stop, restart, wait and checks of the failed region (operators), and :func:`record`
at the end whatever happened. ``tidegate_health_watch`` asks for one per job whose active
region :func:`unhealthy_regions` finds unhealthy.
"""

from __future__ import annotations

import json
from typing import Any

from airflow.sdk.exceptions import AirflowSkipException

from tidegate_airflow.hooks.tidegate import TidegateHook
from tidegate_airflow.procedures import consumer_gap


def unhealthy_regions(hook: TidegateHook, max_delay_s: float, for_s: float) -> list[dict[str, Any]]:
    """One ``tidegate_failover`` conf per job whose active region is unhealthy (see
    :func:`tidegate.runtime.procedures.health.assess_region`); a job that is not deployed in its active
    region, or that another procedure owns right now, is not assessed."""
    from tidegate.runtime.procedures.health import assess_region

    c = hook.controller
    confs = []
    for job in c.jobs():
        active = c.active_region(job)
        if active is None or c.deployment(job, active.region) is None:
            continue
        running = c.procedure_lock(job)
        if running is not None:  # a drill, failover or planned stop owns the job right now
            print(f"{job}: {running.kind} is running (procedure {running.procedure_id}); not assessed")
            continue
        health = assess_region(
            c, job, active.region, max_delay_s=float(max_delay_s), for_s=float(for_s), stalled_after_s=float(for_s)
        )
        print(f"{job} in {active.region}: {'healthy' if health.healthy else 'UNHEALTHY'} — {health.reason}")
        if not health.healthy:
            confs.append(
                {
                    "job": job,
                    "from_region": active.region,
                    "reason": "health watch",
                    "only_if_unhealthy": True,
                    "max_delay_s": max_delay_s,
                    "for_s": for_s,
                }
            )
    return confs


def assess(
    hook: TidegateHook,
    job: str,
    from_region: str,
    reason: str,
    *,
    only_if_unhealthy: bool,
    max_delay_s: float,
    for_s: float,
) -> dict[str, Any]:
    """The assessment (see :func:`tidegate.runtime.procedures.failover.assess`) when the failover should
    act, else an empty dict: false, so the DAG's short circuit skips the rest, and a dict, so the
    task's outputs (``assessed["from"]``, ``assessed["to"]``) are pushed key by key."""
    from tidegate.runtime.procedures.failover import assess as do_assess

    assessed = do_assess(
        hook.controller,
        job,
        from_region,
        reason,
        only_if_unhealthy=only_if_unhealthy,
        max_delay_s=max_delay_s,
        for_s=for_s,
    )
    print(assessed["say"])
    return assessed if assessed["act"] else {}


def switch(hook: TidegateHook, assessed: dict[str, Any], *, timeout_s: float, ti=None) -> dict[str, Any]:
    """Take the job's procedure lock and move consumers to the partner; skipped while another
    procedure (a failover too) holds the job — it owns the job. The lock outlasts the
    restore (``timeout_s``) with room to spare. A refused switch fails the task and leaves
    its reason (XCom ``refused``) for :func:`record`, which then fails the run."""
    from tidegate.control.db import ProcedureBusy
    from tidegate.errors import TidegateError
    from tidegate.runtime.procedures.failover import begin, lock_ttl_s

    try:
        result = begin(hook.controller, assessed, ttl_s=lock_ttl_s(timeout_s))
    except ProcedureBusy as exc:
        raise AirflowSkipException(str(exc)) from None
    except TidegateError as exc:
        if ti is not None:
            ti.xcom_push(key="refused", value=str(exc))
        raise
    print(f"consumers of {assessed['job']}: {result}")
    return result


def before_restore(hook: TidegateHook, switched: dict[str, Any] | None) -> dict[str, Any]:
    """Between the consumer view's check and the restart of the failed region: refuse to
    restore a region still running (its stop failed), else estimate the restore now — with
    the backlog the restart will find, and nothing else of the procedure beside it. Skipped
    when no failover ran."""
    from airflow.sdk.exceptions import AirflowFailException

    from tidegate.runtime.procedures.failover import estimate_restore

    if switched is None:
        raise AirflowSkipException("no failover ran (see the assess and switch tasks)")
    controller = hook.controller
    job, region = switched["job"], switched["from_region"]
    status = controller.status_of(job, region)
    if status.alive:
        raise AirflowFailException(
            f"{region} still runs job {job} (run {status.run_id}, {status.state}): its stop "
            "failed, so it is not restored; stop it (tidegate job stop --force) and start it again"
        )
    basis = estimate_restore(controller, job, region)
    print(f"restore of {job} in {region}: estimated {basis and basis['seconds']} s")
    return {"estimate_s": basis and basis["seconds"], "estimate_basis": basis}


def record(
    hook: TidegateHook,
    switched: dict[str, Any] | None,
    checks: list[dict[str, Any] | None],
    restored: dict[str, Any] | None,
    refused: str | None = None,
    estimated: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """End the failover's procedure: passed when both checks (consumer view, restored region)
    succeeded and the restored run (``restored``, the restart's XCom) caught up; else failed,
    and the task fails. A switch that was refused (``refused``: why) fails it too — the run
    must not look green while consumers stayed put. Skipped when no failover ran. The restore's
    estimate is the one made just before it (``estimated``), else the switch's."""
    if switched is None and refused:
        raise RuntimeError(f"the failover did not run: {refused}")
    if switched is None:
        raise AirflowSkipException("no failover ran (see the assess and switch tasks)")
    controller = hook.controller
    run = controller.run_record(restored["run_id"]) if restored else None
    ok = all(x and x.get("success") for x in checks) and run is not None and run.caught_up_at is not None
    measured = controller.recovery_terms(run.id) if run is not None else None
    estimated = estimated or switched
    controller.finish_procedure(
        switched["procedure"],
        "passed" if ok else "failed",
        actual_s=run.catch_up_s if run else None,
        estimate_s=estimated.get("estimate_s"),
        checks=[{k: x.get(k) for k in ("target", "success", "span", "data_docs")} for x in checks if x],
        detail=json.dumps(
            {
                "switch": {k: v for k, v in switched.items() if k != "estimate_basis"},
                "restored_run": restored,
                "estimate_basis": estimated.get("estimate_basis"),
                "actual_terms": measured,
                "consumer_gap": consumer_gap(hook, switched["procedure"]),
            },
            default=str,
        ),
    )
    if not ok:
        raise RuntimeError(f"failover of {switched} did not complete cleanly: checks {checks}")
    return {"passed": True, "checks": checks}
