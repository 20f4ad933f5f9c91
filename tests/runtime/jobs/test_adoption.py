"""What a retried step adopts and what it still refuses: the pure decisions, row by row.

The rows are plain namespaces with the columns the decisions read; a step is (DAG run, task).
"""

from __future__ import annotations

import json
from types import SimpleNamespace as NS

import pytest

from tidegate.runtime.jobs.adoption import StartAsked, adopt_procedure, adopt_start, adopt_stop, relaunch_of, step_of

FP = "f" * 64
STEP = ("manual__2026-11-29T18:00:00+00:00", "start")
BY_STEP = {"dag_run": STEP[0], "task": STEP[1]}
AUTO = {"mode": "auto", "at_us": None}


def run(id=7, version=2, fingerprint=FP, **context):
    return NS(id=id, version=version, fingerprint=fingerprint, context=json.dumps(context) if context else None)


def asked(version=2, fingerprint=FP, mode="auto", at_us=None, step=STEP):
    return StartAsked(version, fingerprint, mode, at_us, step)


# -- start ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("live", "chain", "adopts"),
    [
        # the run this step started, still starting when its first attempt gave up
        (run(**BY_STEP, asked=AUTO), [], "run 7 was started by this step (start of DAG run manual__"),
        # the supervisor's relaunch of the run this step started, which died while starting
        (run(8, auto_restart=1, relaunch_of=7), [run(7, **BY_STEP, asked=AUTO)], "relaunched by the region supervisor"),
        # … relaunched twice: followed back to the start that began it
        (
            run(9, auto_restart=2, relaunch_of=8),
            [run(8, auto_restart=1, relaunch_of=7), run(7, **BY_STEP, asked=AUTO)],
            "from run 7",
        ),
        # someone else's start of the same version from the same start point: what this step asks for
        (run(actor="cli", asked=AUTO), [], "runs version 2 from the start point this step asks for (auto"),
        # a different version: refused, whoever started it
        (run(version=3, **BY_STEP, asked=AUTO), [], None),
        # the same version number with other logic (a re-registered database): refused
        (run(fingerprint="e" * 64, **BY_STEP, asked=AUTO), [], None),
        # someone else's start of the same version from another start point: refused
        (run(actor="cli", asked={"mode": "now", "at_us": None}), [], None),
        # another step of the same DAG run (a rollback's start): not this step's
        (run(dag_run=STEP[0], task="rollback", asked={"mode": "last-stopped", "at_us": None}), [], None),
        # a run recorded before starts kept what they asked: nothing to compare, refused
        (run(), [], None),
    ],
)
def test_a_start_adopts_a_live_run_of_what_it_asks_for_and_refuses_any_other(live, chain, adopts):
    why = adopt_start(asked(), live, chain)
    if adopts is None:
        assert why is None
    else:
        assert why is not None and adopts in why


def test_a_custom_start_adopts_only_the_same_first_output_time():
    live = run(actor="cli", asked={"mode": "custom", "at_us": 1_000})
    assert adopt_start(asked(mode="custom", at_us=1_000), live) is not None
    assert adopt_start(asked(mode="custom", at_us=2_000), live) is None


def test_a_start_outside_a_dag_run_is_no_retry_and_adopts_nothing():
    """Two starts from a shell: the second is refused as ever, even of the same version and start point."""
    assert adopt_start(asked(step=None), run(actor="cli", asked=AUTO)) is None
    assert adopt_start(asked(step=None), run(**BY_STEP, asked=AUTO)) is None


def test_a_relaunch_names_the_run_it_relaunched_and_a_start_names_none():
    assert relaunch_of(run(8, auto_restart=1, relaunch_of=7)) == 7
    assert relaunch_of(run(**BY_STEP)) is None and relaunch_of(NS(context="not json")) is None


# -- stop -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "stop_requested_at", "adopts"),
    [
        ("stopping", 100.0, "run 7 is already stopping"),
        ("stopping", None, "run 7 is already stopping"),  # the supervisor's SIGTERM, or the driver's own
        ("running", 100.0, "a stop of run 7 was already requested"),  # asked; its driver not yet at it
        ("starting", 100.0, "a stop of run 7 was already requested"),
        ("running", None, None),  # nothing under way: a stop of its own, partner check and all
        ("stopped", 100.0, None),  # ended: reported as it is, not waited for
        ("lost", None, None),
    ],
)
def test_a_stop_adopts_a_stop_already_under_way(state, stop_requested_at, adopts):
    assert adopt_stop(state, NS(id=7, stop_requested_at=stop_requested_at)) == adopts


def test_a_stop_of_a_job_that_never_ran_adopts_nothing():
    assert adopt_stop("never", None) is None


# -- claim ------------------------------------------------------------------------------------

CLAIM = ("manual__1", "claim")
LOCK = NS(procedure_id=5, kind="restart", region="east")


def record(result="running", step=CLAIM, **detail):
    named = {"dag_run": step[0], "task": step[1]} if step else None
    return NS(result=result, detail=json.dumps({"by": "airflow", "step": named, **detail}))


@pytest.mark.parametrize(
    ("procedure", "kind", "region", "step", "adopts"),
    [
        (record(), "restart", "east", CLAIM, True),  # this step's own lock: the first attempt took it
        (record(step=("manual__2", "claim")), "restart", "east", CLAIM, False),  # another DAG run's
        (record(step=("manual__1", "open_record")), "restart", "east", CLAIM, False),  # another step's
        (record(), "planned-stop", "east", CLAIM, False),  # another procedure on the job
        (record(), "restart", "west", CLAIM, False),  # the same procedure kind for another region
        (record(step=None), "restart", "east", CLAIM, False),  # opened outside Airflow (the CLI, a drill)
        (record(), "restart", "east", None, False),  # a claim that names no step adopts nothing
        (record(result="failed"), "restart", "east", CLAIM, False),  # ended: its lock is not this one's
        (None, "restart", "east", CLAIM, False),
    ],
)
def test_a_claim_adopts_only_the_lock_its_own_step_took(procedure, kind, region, step, adopts):
    why = adopt_procedure(LOCK, procedure, kind, region, step)
    assert (why is not None) == adopts
    if adopts:
        assert why == "procedure 5 (restart) was opened by this step (claim of DAG run manual__1)"


def test_a_record_that_is_not_json_is_adopted_by_nobody():
    assert adopt_procedure(LOCK, NS(result="running", detail="{not json"), "restart", "east", CLAIM) is None


def test_a_step_is_its_dag_run_and_task():
    assert step_of(BY_STEP) == STEP
    assert step_of({"dag_run": "manual__1"}) is None and step_of(None) is None and step_of("manual__1") is None
