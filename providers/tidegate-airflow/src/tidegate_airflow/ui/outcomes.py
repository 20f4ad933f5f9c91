"""What a procedure came to, in the words an operator needs, from the record its writer left.

The writers (``tidegate.runtime.procedures.drills``, the failover and planned-stop DAGs) store a
result and a ``detail``; this reads the shapes they write:

* a drill abandoned part-way (``drills.abandon``): ``{"failed": <the step, in words>,
  "broken": …, "actions": [<what the restore did>], "state_left": {"consumers_read": r,
  "regions": {r: {"state", "run", "caught_up", "storage"}}}}``;
* a drill refused before it broke anything (``drills.prepare``): ``{"refused": <why>}``;
* a drill that ran every step but failed its verdict (``drills.finish``): the summary, with
  the failed checks (``{"target", "success", "message"}``) or no ``actual_s`` (never caught up);
* a planned stop aborted, a failover that failed: the reason as free text;
* a planned stop rolled back (``procedures.roll_back``): ``{"rollback": {"why", "restored_version",
  "region", "run_id", "checkpoint", "caught_up", "consumers_read", …}}``.

Anything else — a passed procedure, a running one — has no outcome to explain (None): its
estimate, actual and checks say it.
"""

from __future__ import annotations

from typing import Any


def procedure_outcome(result: str, detail: Any, checks: Any, actual_s: float | None) -> dict[str, Any] | None:
    """``{"why", "restored", "state_left"}``, or None when there is nothing to explain.

    ``restored`` is None when no restore ran and ``[]`` when one ran with nothing to undo;
    ``state_left`` lists each region (in the recorded order) as ``{"region", "state", "run",
    "caught_up", "storage"}`` beside ``consumers_read``."""
    if isinstance(detail, str):
        return _outcome(detail)
    if not isinstance(detail, dict):
        return None
    if isinstance(detail.get("refused"), str):
        return _outcome(detail["refused"])
    if isinstance(detail.get("rollback"), dict):  # procedures.roll_back: a planned stop's new version failed
        back = detail["rollback"]
        return _outcome(
            f"{back.get('why')}: rolled back to version {back.get('restored_version')}",
            restored=[
                f"version {back.get('restored_version')} started in {back.get('region')} "
                f"(run {back.get('run_id')}, {back.get('checkpoint')} checkpoint), "
                + ("caught up" if back.get("caught_up") else "not caught up yet")
            ],
            state_left={"consumers_read": back.get("consumers_read"), "regions": []},
        )
    if isinstance(detail.get("failed"), str):
        actions = detail.get("actions")
        return _outcome(
            detail["failed"],
            restored=[str(a) for a in actions] if isinstance(actions, list) else [],
            state_left=_state_left(detail.get("state_left")),
        )
    if result == "failed" and "broken" in detail:  # drills.finish: the verdict, not a step, failed
        return _outcome(_failed_verdict(checks, actual_s))
    return None


def _outcome(why: str, *, restored: list[str] | None = None, state_left: dict | None = None) -> dict[str, Any]:
    return {"why": why, "restored": restored, "state_left": state_left}


def _failed_verdict(checks: Any, actual_s: float | None) -> str:
    """Why ``drills.finish`` failed a drill: it passes only if the region caught up and every
    check (at least one) passed."""
    checks = [c for c in checks if isinstance(c, dict)] if isinstance(checks, list) else []
    reasons = [
        f"the check of {c.get('target') or 'the output'} failed" + (f": {c['message']}" if c.get("message") else "")
        for c in checks
        if not c.get("success")
    ]
    if actual_s is None:
        reasons.append("the region did not catch up")
    if not checks:
        reasons.append("no check ran")
    return "; ".join(reasons)


def _state_left(state: Any) -> dict[str, Any] | None:
    if not isinstance(state, dict):
        return None
    regions = state.get("regions")
    if not isinstance(regions, dict):
        regions = {}
    return {
        "consumers_read": state.get("consumers_read"),
        "regions": [
            {"region": region, **{k: (figures or {}).get(k) for k in ("state", "run", "caught_up", "storage")}}
            for region, figures in regions.items()
            if figures is None or isinstance(figures, dict)
        ],
    }
