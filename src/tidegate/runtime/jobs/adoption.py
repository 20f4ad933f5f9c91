"""What a retried procedure step takes over instead of refusing: decided here, once.

Airflow retries a failed task, and an operator may clear one: the step runs again in the
same DAG run. Its first attempt may have done part of its work before it failed — launched a
driver that then died and that the region supervisor relaunched, asked a driver to stop,
taken the job's procedure lock — and refusing that work as someone else's fails a procedure
whose job is fine. A retry adopts what is in flight when it is what the step asked for:

* a **start** adopts the job's live run (starting or running) when it runs the version and
  logic (fingerprint) the step asks for, and either this very step started it — the same DAG
  run and task, or a run the region supervisor relaunched from the one it started — or it was
  asked for with the same start point (mode and time). A live run of another version or logic,
  or started from another start point by someone else, is refused as before: stop it first.
  A start outside a DAG run (from a shell) is no step's retry and adopts nothing;
* a **stop** adopts a stop already under way — the run stopping, or its stop requested — and
  does not check the partner again: nothing more is stopped. A run already ended is reported
  as it is, as before;
* an estimate's **rehearsal** measures the rehearsal in flight of the same version and logic in
  the region (its first attempt's, still running) rather than being refused a second one;
* a **claim** of the job's procedure lock adopts the lock when the procedure holding it is
  running, of the same kind and region, and its record was opened by the same DAG run's same
  step. Any other procedure — of another DAG run, or another step of this one — is refused.

A step is named by its DAG run and task (:func:`step_of`): what the start operator puts in
its run's context, and a claim in its procedure's record. The decisions are pure: the
caller reads the rows (the controller for starts and stops,
:func:`tidegate.runtime.estimates.rehearsal.rehearse` for rehearsals,
:func:`tidegate_airflow.procedures.open_procedure` for claims).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tidegate.eventtime.durations import format_time_us
from tidegate.runtime.jobs.liveness import LIVE, RunState

Step = tuple[str, str]  # (DAG run id, task id)


def step_of(named: Any) -> Step | None:
    """The step a mapping names (``dag_run`` and ``task``), or None when it names none."""
    if not isinstance(named, Mapping):
        return None
    dag_run, task = named.get("dag_run"), named.get("task")
    return (str(dag_run), str(task)) if dag_run and task else None


def recorded(text: str | None) -> dict[str, Any]:
    """A JSON column that should hold an object (a run's context, a procedure's detail); {}
    for anything else: what a retry reads there is a hint, never a reason to fail."""
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# -- start ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartAsked:
    """What a start asks for: the version and logic it runs, its start point as asked (the
    mode before ``auto`` is resolved, and the time of ``custom``), and the step asking."""

    version: int
    fingerprint: str
    mode: str
    at_us: int | None
    step: Step | None = None

    def start_point(self) -> dict[str, Any]:
        """What the run's context keeps of the start point (``asked``)."""
        return {"mode": self.mode, "at_us": self.at_us}


def adopt_start(asked: StartAsked, live: Any, relaunched_from: Sequence[Any] = ()) -> str | None:
    """Why a start takes over the job's live run ``live`` (a run row: ``id``, ``version``,
    ``fingerprint``, ``context``) rather than refusing; None: it refuses. ``relaunched_from``:
    the runs the supervisor relaunched ``live`` from, newest first, the start that began them
    last (see :func:`relaunch_of`)."""
    if asked.step is None or live.version != asked.version or live.fingerprint != asked.fingerprint:
        return None  # a start outside a DAG run (a shell's) is no retry: refused while the job runs
    origin = relaunched_from[-1] if relaunched_from else live
    began = recorded(origin.context)
    how = f", relaunched by the region supervisor from run {origin.id}" if origin is not live else ""
    if step_of(began) == asked.step:
        return f"run {live.id} was started by this step ({asked.step[1]} of DAG run {asked.step[0]}{how})"
    if began.get("asked") == asked.start_point():
        point = asked.mode if asked.at_us is None else f"{asked.mode} at {format_time_us(asked.at_us)}"
        return f"run {live.id} runs version {asked.version} from the start point this step asks for ({point}{how})"
    return None


def relaunch_of(run: Any) -> int | None:
    """The run the supervisor relaunched ``run`` from (None: a start of its own)."""
    previous = recorded(run.context).get("relaunch_of")
    return int(previous) if isinstance(previous, int) else None


# -- stop -----------------------------------------------------------------------------------


def adopt_stop(state: str, run: Any | None) -> str | None:
    """Why a stop takes over one already under way for ``run`` (the job's latest run, in
    ``state``); None: the stop asks for itself."""
    if run is None or state not in LIVE:
        return None
    if state == RunState.STOPPING:
        return f"run {run.id} is already stopping"
    if run.stop_requested_at is not None:
        return f"a stop of run {run.id} was already requested"
    return None


# -- rehearsal ------------------------------------------------------------------------------


def adopt_rehearsal(version: int, fingerprint: str, run: Any) -> bool:
    """Whether an estimate's rehearsal of ``version`` measures the rehearsal ``run`` in flight
    (a retried estimate's first attempt's) instead of being refused: the same version and logic,
    still live."""
    return run.kind == "rehearsal" and run.status in LIVE and (run.version, run.fingerprint) == (version, fingerprint)


# -- claim ----------------------------------------------------------------------------------


def adopt_procedure(held: Any, procedure: Any | None, kind: str, region: str | None, step: Step | None) -> str | None:
    """Why a claim takes over the job's procedure lock ``held`` (``procedure_id``, ``kind``,
    ``region``), whose procedure record is ``procedure`` (``result``, ``detail``); None: it is
    refused. Only the step that opened the record adopts it: the same DAG run and task."""
    if step is None or procedure is None or procedure.result != "running":
        return None
    if held.kind != kind or held.region != region or step_of(recorded(procedure.detail).get("step")) != step:
        return None
    return f"procedure {held.procedure_id} ({kind}) was opened by this step ({step[1]} of DAG run {step[0]})"


# -- what the controller reads and does for them ------------------------------------------


MAX_RELAUNCHES = 1000  # how far back a relaunch is followed to the start that began it


class RetriedSteps:
    """A start's take-over of a run in flight, as the controller's method (mixed into
    :class:`tidegate.runtime.jobs.controller.Controller`, over its ``db``, ``config`` and waits)."""

    db: Any
    config: Any
    actor: str
    _wait_started: Callable[[int, float], str]  # the controller's: until the run runs, or why it ended

    def take_over_start(
        self, asked: StartAsked, run_id: int, keep_running: bool | None, wait_s: float
    ) -> tuple[Any, str, str] | None:
        """Whether a start asking ``asked`` takes over the live run ``run_id``
        (:func:`adopt_start`); if so — the take-over recorded as the start's operation, the
        job kept running when the start asks it to, and the run waited for as a start waits
        for its own — the run's row, why, and its status; else None: the start refuses."""
        from tidegate.runtime.jobs.process import ensure_supervisor

        live = self.db.run(run_id)
        if live is None:
            return None
        chain: list[Any] = []
        previous = relaunch_of(live)
        while previous is not None and len(chain) < MAX_RELAUNCHES:
            if (row := self.db.run(previous)) is None:
                break
            chain.append(row)
            previous = relaunch_of(row)
        why = adopt_start(asked, live, chain)
        if why is None:
            return None
        job, region = live.job, live.region
        self.db.record_operation(
            "start",
            "done",
            job=job,
            region=region,
            actor=self.actor,
            detail={"run": live.id, "version": live.version, "mode": live.start_mode, "adopted": why},
        )
        if keep_running is not None:  # what the start asks of the job from now on, as a start of its own would
            self.db.set_deployment(
                job, region, version=live.version, desired="running", current_run=live.id, keep_running=keep_running
            )
            if keep_running and self.config.region(region).launcher == "local":
                ensure_supervisor(self.db, self.config, region)
        status = self._wait_started(live.id, wait_s) if wait_s else live.status
        return self.db.run(live.id), why, status


def adopted_plan(run: Any, why: str):
    """The plan of a run a start adopted, as its row recorded it."""
    from tidegate.runtime.jobs.planning import StartPlan

    offsets = recorded(run.starting_offsets)
    return StartPlan(
        mode=run.start_mode,
        output_start_us=run.output_start_us,
        lookback_us=run.lookback_us or 0,
        input_from_us=run.input_from_us,
        starting_offsets={int(p): int(o) for p, o in offsets.items()} or None,
        checkpoint=run.checkpoint,
        reason=f"adopted: {why}; {run.checkpoint_reason}",
        lineage_id=run.lineage,
        new_lineage=False,
        emit_after_us=None,
        partial=bool(run.partial),
        partial_reason=run.partial_reason,
    )
