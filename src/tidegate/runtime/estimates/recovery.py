"""What a recovery will take, term by term, and what it took, split the same way.

A drill is timed from the break to caught up; a failover's and a planned stop's restart
from its request to caught up. Their estimate is a sum of terms, each recorded with the
measured inputs it was built from, so that a recorded estimate's error is explained term by
term from the record (:func:`actual_terms` splits the measured recovery the same way):

* ``break_s`` — a drill, from the break to the restart's request, the failover's wait
  aside: killing the driver, moving the storage away, recording the region down, a
  supervisor noticing the death. The median of the same drill's latest recorded ones. Before
  the first (:func:`first_break`), the hand-over every drill's break ends with — the region
  recorded down, a supervisor's tick or the drill's next task, the restart's plan — as the
  job's latest drills of any kind took it, and before any drill one supervisor interval: the
  death is noticed at its next tick, and its tick and the restart's planning take the rest
  (a first drill estimated at 0 would always come out short). An upgrade goes down by a
  graceful stop first: the median of the job's latest graceful stops in the region (stop
  request → the driver's exit) comes before its hand-over, since the stop alone is a small
  part of an upgrade's break.
* ``failover_wait_s`` — a region loss of the region consumers read: the failover waits until
  the survivor's output is final past the lost region's (:mod:`tidegate.runtime.procedures.failover`,
  at most its bound). The survivor is as far behind as its output's final point trails the
  lost region's at the preflight; the live stream moves both at the broker clock's pace, so
  it gets there in that many seconds.
* ``restart_s`` — the restart's request to its first batch: the model's start-up.
* ``catch_up_s`` — the rest of the model (:mod:`tidegate.runtime.estimates.estimate`): the
  backlog of the restart's plan, played out batch by batch; after a node failure's kill -9,
  behind the batch that was in flight, which the resumed checkpoint runs again first. For a region loss that is the
  replay of everything from the oldest output the region kept
  (:func:`tidegate.runtime.jobs.planning.history_start`) minus the look-back, through a
  fresh checkpoint.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any

from tidegate.runtime.jobs.supervisor import INTERVAL_S

RECENT_DRILLS = 3  # the latest recorded drills of a kind whose break times are taken the median of
FIRST_BREAK_S = INTERVAL_S  # before any drill of the job is recorded
FIRST_CHECK_S = 30.0  # a completeness check's task, before any of the job's is recorded


@dataclass(frozen=True)
class RecoveryEstimate:
    seconds: float | None  # None: the model could not estimate the restart (see inputs["note"])
    terms: dict[str, float | None]
    inputs: dict[str, Any] = field(default_factory=dict)

    def basis(self) -> dict[str, Any]:
        """What the record keeps: the terms and the measured inputs they were built from."""
        return {"seconds": self.seconds, "terms": self.terms, "inputs": self.inputs}


def estimate(
    controller,
    job: str,
    region: str,
    plan,
    spec,
    *,
    kind: str | None = None,
    failover_lag_us: int | None = None,
    failover_bound_s: float | None = None,
) -> RecoveryEstimate:
    """The recovery of ``job`` in ``region`` by the restart ``plan`` describes. ``kind``: a
    drill's (its break is timed too); ``failover_lag_us``: how far the survivor's final output
    trails the region's when consumers will have to move off it, the failover waiting at most
    ``failover_bound_s``."""
    from tidegate.runtime.estimates.estimate import model_estimate

    model = model_estimate(controller, job, region, plan=plan, spec=spec, killed=kind == "node-failure")
    inputs: dict[str, Any] = {
        "plan": {
            "mode": plan.mode,
            "checkpoint": plan.checkpoint,
            "input_from_us": plan.input_from_us,
            "output_start_us": plan.output_start_us,
        },
        "model": dict(model.__dict__),
    }
    terms = restart_terms(model)
    if kind is not None:
        breaks = inputs["recorded_breaks_s"] = recorded_breaks(controller.db, job, kind)
        terms["break_s"] = (
            round(statistics.median(breaks), 1) if breaks else first_break(controller.db, job, region, kind, inputs)
        )
    if failover_lag_us is not None:
        wait = max(0.0, failover_lag_us / 1e6)
        terms["failover_wait_s"] = round(wait if failover_bound_s is None else min(failover_bound_s, wait), 1)
        inputs["survivor_behind_s"] = failover_lag_us / 1e6
    seconds = None if model.seconds is None else round(sum(v for v in terms.values() if v is not None), 1)
    return RecoveryEstimate(seconds, terms, inputs)


def first_break(db, job: str, region: str, kind: str, inputs: dict[str, Any]) -> float:
    """The break of the job's first drill of ``kind``: the hand-over to the restart's request
    as the job's latest drills of any kind took it (one supervisor interval before any), after
    the graceful stop an upgrade goes down by. What it was built from goes into ``inputs``."""
    others = inputs["recorded_other_breaks_s"] = recorded_breaks(db, job, "")
    handover = statistics.median(others) if others else FIRST_BREAK_S
    if kind != "upgrade":
        return round(handover, 1)
    stops = inputs["recorded_stops_s"] = recorded_stops(db, job, region)
    return round((statistics.median(stops) if stops else 0.0) + handover, 1)


def restart_terms(model) -> dict[str, float | None]:
    """A :class:`~tidegate.runtime.estimates.estimate.ModelEstimate` as terms: the start-up,
    then the catch-up it played out."""
    return {
        "restart_s": round(model.startup_s, 1),
        "catch_up_s": None if model.seconds is None else round(model.seconds - model.startup_s, 1),
    }


def model_basis(model) -> dict[str, Any]:
    """The basis a planned stop's record keeps of its model estimate: its terms and inputs."""
    return {"seconds": model.seconds, "terms": restart_terms(model), "inputs": dict(model.__dict__)}


def recorded_breaks(db, job: str, kind: str, limit: int = 50) -> list[float]:
    """The break times (break → the restart's request, the failover's wait aside) of the
    latest recorded drills of ``kind`` (``""``: of any kind) that recovered, oldest first."""
    found = []
    for p in db.procedures(job, kind_prefix=f"drill:{kind}", limit=limit):
        terms = _loads(p.detail).get("actual_terms") or {}
        if terms.get("break_s") is not None:
            found.append(float(terms["break_s"]))
        if len(found) == RECENT_DRILLS:
            break
    return list(reversed(found))


def failover_handover(db, job: str, inputs: dict[str, Any]) -> float:
    """How long a failover takes from moving consumers to its request to restore the region it
    left: the consumer view's check, the stop and the restore's estimate. The median of the job's
    latest recorded failovers; before any, the consumer view's check as the job's latest
    recorded checks took it, then the hand-over of a drill's break (:func:`first_break`); before
    either, :data:`FIRST_CHECK_S` for the check. What it was built from goes into ``inputs``."""
    spans = inputs["recorded_failover_handovers_s"] = recorded_failover_handovers(db, job)
    if spans:
        return round(statistics.median(spans), 1)
    checks = inputs["recorded_check_tasks_s"] = recorded_check_tasks(db, job)
    others = recorded_breaks(db, job, "")
    check = statistics.median(checks) if checks else FIRST_CHECK_S
    return round(check + (statistics.median(others) if others else FIRST_BREAK_S), 1)


def recorded_failover_handovers(db, job: str, limit: int = 50) -> list[float]:
    """Of the job's latest failovers that restored the region they left, oldest first, the time
    from the switch (the procedure's start, less its wait for the survivor) to the restore's
    request."""
    found = []
    for p in db.procedures(job, kind_prefix="failover", limit=limit):
        detail = _loads(p.detail)
        restored = detail.get("restored_run") or {}
        run = db.run(restored["run_id"]) if isinstance(restored, dict) and restored.get("run_id") else None
        if run is None or run.requested_at is None:
            continue
        waited = float((detail.get("switch") or {}).get("waited_s") or 0.0)
        found.append(round(max(0.0, run.requested_at - p.started_at - waited), 1))
        if len(found) == RECENT_DRILLS:
            break
    return list(reversed(found))


def recorded_check_tasks(db, job: str, limit: int = 50) -> list[float]:
    """How long the completeness checks of the job's latest recorded procedures took as tasks,
    oldest first."""
    found = []
    for p in db.procedures(job, limit=limit):
        try:
            checks = json.loads(p.checks) if p.checks else []
        except ValueError:
            checks = []
        for check in checks if isinstance(checks, list) else []:
            if isinstance(check, dict) and isinstance(check.get("task_s"), int | float):
                found.append(float(check["task_s"]))
        if len(found) >= RECENT_DRILLS:
            break
    return list(reversed(found[:RECENT_DRILLS]))


def recorded_stops(db, job: str, region: str, limit: int = 50) -> list[float]:
    """How long the job's latest graceful stops in ``region`` took, stop request → the
    driver's exit, oldest first."""
    found = [
        run.ended_at - run.stop_requested_at
        for run in db.runs(job, region, limit=limit)
        if run.status == "stopped" and run.stop_requested_at is not None and run.ended_at is not None
    ]
    return [round(s, 1) for s in reversed(found[:RECENT_DRILLS])]


def actual_terms(
    db, run_id: int, *, broken_at: float | None = None, failover_waited_s: float | None = None
) -> dict[str, float | None]:
    """A measured recovery split as its estimate is: the break (from ``broken_at``, a drill's),
    the failover's wait, the restart (request → first batch began) and the catch-up (first
    batch began → caught up), from the run's record and its first batch."""
    run = db.run(run_id)
    first = db.batch_metrics(run.job, run_id=run_id, limit=1, first=True)
    began = first[0].processed_at - (first[0].batch_seconds or 0.0) if first else None
    terms: dict[str, float | None] = {
        "restart_s": None if began is None else round(began - run.requested_at, 1),
        "catch_up_s": None if began is None or run.caught_up_at is None else round(run.caught_up_at - began, 1),
    }
    if failover_waited_s is not None:
        terms["failover_wait_s"] = round(failover_waited_s, 1)
    if broken_at is not None:
        terms["break_s"] = round(run.requested_at - broken_at - (failover_waited_s or 0.0), 1)
    return terms


def term_errors(estimated: dict[str, float | None], measured: dict[str, float | None]) -> dict[str, float | None]:
    """Per term, estimate − measured in seconds: where an error came from."""
    errors: dict[str, float | None] = {}
    for k, actual in measured.items():
        guess = estimated.get(k)
        errors[k] = None if guess is None or actual is None else round(guess - actual, 1)
    return errors


def _loads(text: str | None) -> dict:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
