"""A DAG's claim of the job's procedure lock, run again by Airflow (a retry, a cleared task): it
adopts the lock its own first attempt took, and is refused any other procedure's.

On a real SQLite control database (the ``hook`` fixture); each call is the task body's.
"""

from __future__ import annotations

import json

import pytest
from airflow.sdk.exceptions import AirflowFailException

from tidegate_airflow.procedures import claim, open_procedure, task_step
from tidegate_airflow.procedures.planned_stop import open_record

JOB = "fleet"
RUN = "manual__2026-11-29T18:00:00+00:00"


class TaskInstance:
    """What :func:`task_step` reads of Airflow's task instance."""

    def __init__(self, task_id: str, run_id: str = RUN) -> None:
        self.task_id, self.run_id = task_id, run_id


def test_a_claim_run_again_in_the_same_dag_run_adopts_the_lock_its_first_attempt_took(hook):
    step = task_step(TaskInstance("claim"))
    first = claim("restart", JOB, "east", step=step, hook=hook)
    again = claim("restart", JOB, "east", step=step, hook=hook)  # the first attempt died after committing
    assert again == first
    assert [p.id for p in hook.controller.db.procedures(JOB)] == [first]  # one procedure, one record
    assert json.loads(hook.controller.procedure(first).detail)["step"] == {"dag_run": RUN, "task": "claim"}


@pytest.mark.parametrize(
    ("kind", "region", "ti"),
    [
        ("restart", "east", TaskInstance("claim", run_id="manual__2026-11-29T18:05:00+00:00")),  # another DAG run
        ("restart", "east", TaskInstance("open_record")),  # another step of the same DAG run
        ("deploy", None, TaskInstance("claim")),  # another procedure
        ("restart", "west", TaskInstance("claim")),  # the same kind for another region
        ("restart", "east", None),  # a claim that names no step (a caller outside Airflow)
    ],
)
def test_a_claim_is_refused_a_lock_any_other_step_holds_naming_the_running_procedure(hook, kind, region, ti):
    holder = claim("restart", JOB, "east", step=task_step(TaskInstance("claim")), hook=hook)
    with pytest.raises(
        AirflowFailException, match=f"refused: restart of {JOB} in east is already running .procedure {holder}"
    ):
        claim(kind, JOB, region, step=task_step(ti), hook=hook)


def test_a_lock_taken_outside_airflow_is_adopted_by_nobody(hook):
    open_procedure(hook, "drill:node-failure", JOB, "east", {})
    with pytest.raises(AirflowFailException, match="already running"):
        claim("drill:node-failure", JOB, "east", step=task_step(TaskInstance("claim")), hook=hook)


def test_a_planned_stops_record_opened_again_by_its_retry_is_the_same_record(hook):
    step = task_step(TaskInstance("region_1.open_record"))
    first = open_record(hook, JOB, "east", 2, 600.0, step=step)
    again = open_record(hook, JOB, "east", 2, 600.0, step=step)
    assert again == first == {"procedure": first["procedure"], "previous_version": None}
    # the pair's second turn opens its own record once the first one ended, and never adopts it
    with pytest.raises(AirflowFailException, match="planned-stop of fleet in east is already running"):
        open_record(hook, JOB, "west", 2, 600.0, step=task_step(TaskInstance("region_2.open_record")))


@pytest.mark.parametrize("kind", ["node-failure", "upgrade", "region-loss"])
def test_a_drill_break_other_than_a_lost_control_region_is_not_tried_twice(hook, kind):
    from tidegate_airflow.procedures import drill

    prepared = {"job": JOB, "kind": kind, "region": "east", "procedure": 1}
    with pytest.raises(AirflowFailException, match=f"a {kind} drill's break is not tried twice"):
        drill.break_region(hook, prepared, try_number=2)
    assert hook.controller.db.procedures(JOB) == []  # nothing broken, nothing recorded
