"""The recovery drill (semantics §7): break a region on purpose, recover, prove nothing was lost or doubled.

``tidegate_drill`` runs :func:`prepare`, :func:`break_region`, :func:`recover`, the wait and
the checks (operators), and :func:`finish` at the end whatever happened. The drill itself
is :mod:`tidegate.runtime.procedures.drills`; these steps carry its results through XCom.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowSkipException

from tidegate_airflow.hooks.tidegate import TidegateHook


def prepare(
    hook: TidegateHook, job: str, kind: str, region: str, *, timeout_s: float, max_lag_s: float
) -> dict[str, Any]:
    """Check every precondition, estimate the recovery and open the drill's procedure;
    skipped — with the reason recorded, nothing broken — when the drill is refused or another
    procedure holds the job."""
    from tidegate.control.db import ProcedureBusy
    from tidegate.runtime.procedures import control_drill
    from tidegate.runtime.procedures.drills import DrillRefused
    from tidegate.runtime.procedures.drills import prepare as do_prepare

    try:
        if kind == control_drill.KIND:
            from tidegate_airflow.dag_defaults import health_watch_every

            prepared = control_drill.prepare(
                hook.controller,
                job,
                region,
                timeout_s=timeout_s,
                max_lag_s=max_lag_s,
                watch_every_s=health_watch_every().total_seconds(),
            )
        else:
            prepared = do_prepare(hook.controller, job, kind, region, timeout_s=timeout_s, max_lag_s=max_lag_s)
    except (DrillRefused, ProcedureBusy) as exc:
        raise AirflowSkipException(str(exc)) from None
    print(
        f"drill {prepared['kind']} of {prepared['job']} in {prepared['region']}: estimated recovery "
        f"{prepared['estimate_s']} s (procedure {prepared['procedure']})"
    )
    return prepared


def break_region(hook: TidegateHook, prepared: dict[str, Any], *, try_number: int = 1) -> dict[str, Any]:
    """Break what the drill's kind breaks. Only the control-region-loss drill's break runs a
    second time (its first may die with the region it takes down, and goes on from its
    record); another kind's second try would break the region twice, so it fails instead."""
    from airflow.sdk.exceptions import AirflowFailException

    from tidegate.runtime.procedures import control_drill
    from tidegate.runtime.procedures.drills import break_region as do_break

    if prepared["kind"] == control_drill.KIND:
        broken = control_drill.break_region(hook.controller, prepared)
        if "taken_over_at" in broken:
            print(f"the break's first try died with {prepared['region']}; going on from its record")
    elif try_number > 1:
        raise AirflowFailException(f"a {prepared['kind']} drill's break is not tried twice: see its first try")
    else:
        broken = do_break(hook.controller, prepared["job"], prepared["kind"], prepared["region"]).to_dict()
    print(f"broken: {broken}")
    return broken


def recover(hook: TidegateHook, broken: dict[str, Any], *, timeout_s: float = 1800) -> dict[str, Any]:
    """Start the recovery of what :func:`break_region` broke (its XCom). ``check_from`` is where
    the region's completeness check starts: a lost region has no output before its restore
    point, so from there (ISO-8601); None for the other kinds — the span the recovery's run
    affected. A lost control region is waited for (its failover, its return) up to ``timeout_s``."""
    from tidegate.eventtime.durations import format_time_us
    from tidegate.runtime.procedures import control_drill
    from tidegate.runtime.procedures.drills import Broken
    from tidegate.runtime.procedures.drills import recover as do_recover

    if broken["kind"] == control_drill.KIND:
        recovered = control_drill.recover(hook.controller, broken, timeout_s=timeout_s)
        print(f"recovered: {recovered}")
        return recovered
    detail = {k: v for k, v in broken.items() if k not in ("kind", "job", "region", "at")}
    recovered = do_recover(
        hook.controller, Broken(broken["kind"], broken["job"], broken["region"], broken["at"], detail)
    )
    lost = broken["kind"] == "region-loss"
    recovered["check_from"] = format_time_us(recovered["output_start_us"]) if lost else None
    print(f"recovering: {recovered}")
    return recovered


def finish(
    hook: TidegateHook,
    prepared: dict[str, Any] | None,
    broken: dict[str, Any] | None,
    recovered: dict[str, Any] | None,
    checks: list[dict[str, Any] | None],
) -> dict[str, Any]:
    """Record the drill — estimate vs actual, what was checked — from the steps' XComs. A
    drill that stopped at a step (its XCom None) restores what it broke, is recorded as
    failed at that step, and fails the task; skipped when the drill never started."""
    from tidegate.runtime.procedures import control_drill
    from tidegate.runtime.procedures.drills import abandon
    from tidegate.runtime.procedures.drills import finish as do_finish

    if prepared is None:
        raise AirflowSkipException("the drill did not start: nothing was broken (see the prepare task)")
    controller = hook.controller
    if broken is None or recovered is None or None in checks:
        step = "break" if broken is None else "recover" if recovered is None else "check"
        why = f"the drill failed at its {step} step (see that task's log)"
        if prepared["kind"] == control_drill.KIND:
            left = control_drill.abandon(controller, prepared, broken, why)
        else:
            left = abandon(controller, prepared, broken, why)
        raise RuntimeError(
            f"drill {prepared['kind']} of {prepared['job']} failed at its {step} step; restored: "
            f"{left['actions'] or 'nothing to restore'}; state left: {left['state_left']}"
        )
    ran = [c for c in checks if c is not None]  # all of them: a None check failed the drill above
    return do_finish(
        controller,
        prepared["procedure"],
        broken,
        recovered,
        ran,
        prepared["estimate_s"],
        prepared.get("estimate_basis"),
    )
