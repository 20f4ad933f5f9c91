"""The planned stop's decisions (semantics §7): which regions it takes in which order, and per region
whether to proceed, move consumers to the partner first, or abort — with the reason.

Plain Python over the controller's reads: the Airflow procedure
(``tidegate_airflow.procedures.planned_stop``) calls these and acts on what they return —
stops, starts, aborts, records.
"""

from __future__ import annotations

from typing import Any

from tidegate.errors import TidegateError


def upgrade_order(controller, job: str, region: str) -> list[str]:
    """Which regions a planned stop takes, in order: one region, or — for ``pair`` — the
    standby first (consumers never notice it), then the active one."""
    config = controller.config
    if region != "pair":
        config.region(region)
        return [region]
    active = controller.active_region(job)
    if active is None:
        raise TidegateError(f"job {job} has no active region: deploy it before a planned stop")
    partner = config.partner(active.region).name
    return [partner, active.region]


def decide(estimate: dict[str, Any], allowed_delay_s: float) -> dict[str, Any]:
    """Proceed when the estimated catch-up fits the allowed delay, else abort — and say why.

    The estimate used is the larger of the model and the rehearsal (the pessimistic one):
    an operator who allowed 5 minutes does not want a plan that is late half the time. The
    rehearsal's figure is the one corrected for the restart's resources
    (:func:`tidegate.runtime.estimates.rehearsal.rehearsal_for_restart`)."""
    figures: dict[str, float] = {
        kind: figure for kind in ("model", "rehearsal") if (figure := estimate.get(f"{kind}_s")) is not None
    }
    if not figures:
        return {
            "proceed": False,
            "estimate_s": None,
            "used": None,
            "reason": f"no estimate could be made ({estimate.get('model_note') or 'no figures'})",
        }
    used = max(figures, key=figures.__getitem__)
    worst = figures[used]
    why = (
        f"the {used}'s, the larger of {' and '.join(f'{k} {v:.0f} s' for k, v in figures.items())}"
        if len(figures) > 1
        else f"the {used}'s, the only one made"
    )
    if worst <= allowed_delay_s:
        return {
            "proceed": True,
            "estimate_s": worst,
            "used": used,
            "used_why": why,
            "reason": f"estimated catch-up {worst:.0f} s is within the allowed {allowed_delay_s:.0f} s ({why})",
        }
    return {
        "proceed": False,
        "estimate_s": worst,
        "used": used,
        "used_why": why,
        "reason": f"estimated catch-up {worst:.0f} s exceeds the allowed {allowed_delay_s:.0f} s ({why})",
    }


def decide_for_region(
    controller, job: str, region: str, estimate: dict[str, Any], allowed_delay_s: float
) -> dict[str, Any]:
    """semantics §7's decision for one region: proceed; move consumers to the partner first when
    this region is the active one and its catch-up would exceed the allowed delay (only if
    the partner is caught up); otherwise abort with the reason. ``switch_to``: the region
    consumers move to first, or None."""
    decision = decide(estimate, allowed_delay_s)
    decision["region"] = region
    decision["switch_to"] = None
    if decision["proceed"]:
        return decision
    active = controller.active_region(job)
    if active is None or active.region != region:
        decision["reason"] += f"; {region} does not serve consumers, so the delay is not theirs — proceeding"
        decision["proceed"] = True
        return decision
    if len(controller.config.regions) != 2:
        return decision
    partner = controller.config.partner(region).name
    status = controller.status_of(job, partner)
    if status.state == "running" and status.caught_up:
        decision.update(
            proceed=True,
            switch_to=partner,
            reason=decision["reason"] + f"; consumers move to {partner} (caught up) first",
        )
    else:
        decision["reason"] += f"; and consumers cannot move to {partner}: it is {status.state}"
    return decision
