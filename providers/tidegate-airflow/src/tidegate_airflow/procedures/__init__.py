"""The operating procedures (semantics §7) as Airflow runs them: one module per procedure.

A DAG file declares the tasks; each ``@task`` body is one call of a function here with
the task's inputs — a :class:`~tidegate_airflow.hooks.tidegate.TidegateHook` and plain values,
XComs included — which returns a plain dict for XCom, or raises
``AirflowFailException``/``AirflowSkipException``. A test calls the same function.

* :mod:`.planned_stop` — estimate, decide, stop, restart, roll back, record;
* :mod:`.failover` — move consumers, restore the failed region; the health watch that
  asks for it;
* :mod:`.drill` — break a region on purpose, recover, record.

This module holds what every procedure does alike: the record and the job's procedure
lock (one procedure per job at a time), which a retried step that took it adopts
(:mod:`tidegate.runtime.jobs.adoption`).
"""

from __future__ import annotations

import json
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from tidegate_airflow.hooks.tidegate import TidegateHook

PROCEDURE_TTL_S = 4 * 3600  # a procedure that died without ending frees its job after this


def open_procedure(
    hook: TidegateHook,
    kind: str,
    job: str,
    region: str | None,
    detail: dict,
    ttl_s: float = PROCEDURE_TTL_S,
    step: dict[str, str] | None = None,
) -> int:
    """Record the procedure and take the job's procedure lock (one procedure per job at a
    time, semantics §7); refused, naming the running one, while another holds it — unless the
    one holding it was opened by this same ``step`` (:func:`task_step`: a retry of the task whose
    first attempt took the lock), whose procedure is then this one's too
    (:func:`~tidegate.runtime.jobs.adoption.adopt_procedure`)."""
    from tidegate.control.db import ProcedureBusy
    from tidegate.runtime.jobs.adoption import adopt_procedure, step_of

    controller = hook.controller
    opened = detail | ({"step": step} if step else {})
    try:
        return controller.begin_procedure(kind, job, region, ttl_s=ttl_s, detail=json.dumps(opened, default=str))
    except ProcedureBusy as exc:
        held = controller.procedure_lock(job)
        record = controller.procedure(held.procedure_id) if held is not None else None
        why = None if held is None else adopt_procedure(held, record, kind, region, step_of(step))
        if held is None or why is None:
            raise AirflowFailException(str(exc)) from None
        print(f"{kind} of {job}: adopted — {why}")
        return held.procedure_id


def task_step(ti) -> dict[str, str] | None:
    """The step a task instance is — its DAG run and task — as a procedure's record and a
    start's run keep it, so that a retry of the step finds what its first attempt began."""
    return None if ti is None else {"dag_run": str(ti.run_id), "task": str(ti.task_id)}


def close_procedure(hook: TidegateHook, procedure_id: int, result: str, detail: Any = None) -> None:
    """End the procedure and free the job (a no-op for one already ended)."""
    controller = hook.controller
    if controller.procedure(procedure_id).result == "running":
        controller.finish_procedure(
            procedure_id, result, detail=None if detail is None else json.dumps(detail, default=str)
        )


def consumer_gap(hook: TidegateHook, procedure_id: int) -> dict[str, Any]:
    """How far the consumer view fell behind the live stream since the procedure began, and
    for how long beyond its allowed delay (the ``allowed_delay_s`` its record opened with, or
    the platform's default): what every procedure's record keeps."""
    controller = hook.controller
    procedure = controller.procedure(procedure_id)
    try:
        opened = json.loads(procedure.detail or "{}")
    except ValueError:
        opened = {}
    allowed = opened.get("allowed_delay_s") if isinstance(opened, dict) else None
    return controller.consumer_gap(procedure.job, procedure.started_at, allowed_delay_s=allowed)


def claim(
    kind: str, job: str, region: str | None = None, step: dict[str, str] | None = None, hook: TidegateHook | None = None
) -> int:
    """A DAG's first task: the job's procedure lock for ``kind`` (see :func:`open_procedure`);
    a retry of the task (the same ``step``) adopts the lock its first attempt took."""
    return open_procedure(hook or TidegateHook(actor=kind), kind, job, region, {"by": "airflow"}, step=step)


def release(procedure_id: int | None, reached_the_end: bool, what: str, hook: TidegateHook | None = None) -> None:
    """A DAG's last task (trigger rule all_done): end the procedure — passed when the DAG's
    final step delivered its result — and free the job. It is the DAG's only leaf, so it
    fails when the procedure did not reach its end: otherwise the run would show green."""
    if procedure_id is not None:
        close_procedure(hook or TidegateHook(), procedure_id, "passed" if reached_the_end else "failed")
    if not reached_the_end:
        recorded = "recorded failed and the job freed" if procedure_id is not None else "nothing was recorded"
        raise AirflowFailException(f"{what} did not reach its end ({recorded}): the first failed task above says why")


def warm_checks(hook: TidegateHook) -> dict[str, Any]:
    """A drill's or planned stop's first task, beside the others: start the check service
    without waiting for it, so that by the time the procedure's check runs Spark and Great
    Expectations are loaded (a check that starts the service takes about three times a warm
    one). The service then idles until the check; its warm-up
    competes with what runs meanwhile, which the rehearsal measures and corrects for."""
    from tidegate.runtime.checks import check_service

    home = hook.controller.config.home
    idle_s, started = check_service.start_unless_off(home, env=hook.controller.config.driver_environment())
    if idle_s is None:
        return {"service": "off", "pid": None}
    state = "started" if started is not None else "serving"  # None: one already serves (warm or warming)
    print(f"check service of {home}: {state}{f' ({started})' if started else ''}; exits after {idle_s:.0f} s idle")
    return {"service": state, "pid": started.pid if started else None}


def check_outcomes(ti, *task_ids: str) -> list[dict[str, Any] | None]:
    """The completeness outcomes the check tasks pushed, in order; None for a task that
    pushed none (it did not run, or died before it could)."""
    found: list[dict[str, Any] | None] = []
    for task_id in task_ids:
        found += ti.xcom_pull(task_ids=task_id, key="outcomes", default=None) or [None]
    return found
