"""The estimate-then-replay procedure around a planned stop (semantics §7): one region, or the pair."""

from __future__ import annotations

from airflow.sdk import Param, TaskGroup, dag, task

from tidegate_airflow.dag_defaults import SPEC, dag_defaults, region_param
from tidegate_airflow.hooks.tidegate import TidegateHook
from tidegate_airflow.operators.lifecycle import TidegateDeployOperator, TidegateStartOperator, TidegateStopOperator
from tidegate_airflow.operators.spark_submit import TidegateCompletenessOperator
from tidegate_airflow.procedures import check_outcomes, planned_stop, task_step, warm_checks
from tidegate_airflow.sensors.job_state import TidegateWaitSensor

DOC = """
### Planned stop (query change or upgrade)

The first task starts the check service (not waiting for it), so the checks find Spark and
Great Expectations loaded; the rehearsal counts its warm-up as load the restart will not see.

**deploy** registers the new spec (refused, with the reason, when it is not a spec the
platform accepts) and the order of the regions is chosen. Then for **region** (or, with
`pair`, the standby region first and then the active one), one at a time:

1. **estimate** the catch-up of the new version: the model (input rate × gap / throughput
   measured on this job) and a rehearsal (the new version run with start mode `now` into a
   scratch checkpoint and sink, timed to first output and to caught up);
2. **decide** against **allowed_delay_s**: proceed; or, when the active region would keep
   consumers waiting longer, move consumers to the partner first (if it has caught up);
   otherwise abort, saying why;
3. **stop** the region gracefully — refused while its partner is not healthy;
4. **start** the new version with **mode** (`last-stopped`: replay from the last output
   minus the look-back when the logic changed);
5. **wait** until caught up (deferred: no worker slot held);
6. **validate** with Great Expectations: the region's output and the consumer view over
   the affected span, against the batch recomputation;
7. **record** estimate vs measured catch-up (the Tidegate page shows the history).

**A failed upgrade rolls back.** When the new version does not become healthy — its driver
fails while starting, dies, or has not caught up within **timeout_s** — the previous version
is started again from where the output is final (a replay in a lineage of its own: no gap,
no duplicate). When it caught up but its output **fails a completeness check**, the previous
version resumes from where it stopped, so no reader sees the failed version's rows again.
Either way consumers stay on or move to a region that runs (never the one being rolled
back), the procedure is recorded as `rolled-back` with what failed and what was rolled back,
and the DAG run fails without touching the other region: a pair's second turn does not run.

Every step returns its figures through XCom and logs them.
"""


def upgrade(position: int, turns, deployed) -> TaskGroup:
    """One region's turn: ``position`` 0 or 1 in the order the plan chose (``turns``, the
    XComArg of :func:`tidegate_airflow.procedures.planned_stop.turns`; ``deployed``, the deploy's)."""
    order, region = turns["regions"], turns[f"turn_{position + 1}"]
    job, version = deployed["job"], deployed["version"]
    group_id = f"region_{position + 1}"
    with TaskGroup(group_id=group_id) as group:

        @task.short_circuit(task_id="has_turn")
        def has_turn(regions: list[str]) -> bool:
            return len(regions) > position

        @task(task_id="open_record")
        def open_record(regions: list[str], version: dict, params=None, ti=None) -> int:
            opened = planned_stop.open_record(
                TidegateHook(),
                version["job"],
                regions[position],
                version["version"],
                params["allowed_delay_s"],
                step=task_step(ti),  # a retry adopts the record its first attempt opened
            )
            ti.xcom_push(key="previous_version", value=opened["previous_version"])  # what a rollback restores
            return opened["procedure"]

        @task(task_id="estimate")
        def estimate(regions: list[str], version: dict, params=None) -> dict:
            return TidegateHook().estimate(
                version["job"], regions[position], rehearsal=params["rehearsal"], version=version["version"]
            )

        @task.branch(task_id="decide")
        def decide(regions: list[str], version: dict, figures: dict, record_id: int, params=None) -> str:
            planned_stop.go_or_abort(
                TidegateHook(), record_id, version["job"], regions[position], figures, float(params["allowed_delay_s"])
            )
            return f"{group_id}.stop"

        stop = TidegateStopOperator(task_id="stop", job=job, region=region)
        start = TidegateStartOperator(
            task_id="start",
            job=job,
            region=region,
            mode="{{ params.mode }}",
            version=version,
            keep_running=True,
            retries=0,
        )
        run_id = start.output["run_id"]  # type: ignore[index]  # BaseOperator.output is typed XComArg, not PlainXComArg
        wait = TidegateWaitSensor(
            task_id="wait_caught_up",
            job=job,
            region=region,
            run_id=run_id,
            timeout_s="{{ params.timeout_s }}",
            retries=0,
        )
        # the region and the consumer view, in one Spark session against one batch reference
        check = TidegateCompletenessOperator(
            task_id="check_completeness", job=job, target=[region, "consumer"], region=region, run=run_id, retries=0
        )

        @task(task_id="rollback", trigger_rule="one_failed", retries=0)
        def rollback(record_id: int, regions: list[str], version: dict, params=None, ti=None) -> dict:
            previous = ti.xcom_pull(task_ids=f"{group_id}.open_record", key="previous_version", default=None)
            return planned_stop.roll_back(
                TidegateHook(actor="planned-stop"),
                record_id,
                version,
                regions,
                position,
                previous,
                timeout_s=float(params["timeout_s"]),
                checks=check_outcomes(ti, f"{group_id}.check_completeness"),
            )

        @task(task_id="record", trigger_rule="all_done", retries=0)
        def record(record_id: int, figures: dict, ti=None) -> dict:
            return planned_stop.record(
                TidegateHook(),
                record_id,
                figures,
                rolled=ti.xcom_pull(task_ids=f"{group_id}.rollback", default=None),
                started=ti.xcom_pull(task_ids=f"{group_id}.start", default=None),
                checks=check_outcomes(ti, f"{group_id}.check_completeness"),
            )

        # Airflow types a @task call as taking the function's own parameter types, not the XComArg
        # each argument resolves from when the task runs: hence the ignores
        record_id = open_record(order, deployed)
        figures = estimate(order, deployed)
        chosen = decide(order, deployed, figures, record_id)  # type: ignore[arg-type]  # XComArgs: see above
        has_turn(order) >> [record_id, figures]  # a pair's second turn only when a second region
        recorded = record(record_id, figures)  # type: ignore[arg-type]  # XComArgs: see above
        chosen >> stop >> start >> wait >> check >> recorded
        [start, wait, check] >> rollback(record_id, order, deployed) >> recorded  # type: ignore[arg-type]  # as above
    return group


@dag(
    dag_id="tidegate_planned_stop",
    schedule=None,
    **dag_defaults(),
    tags=["tidegate", "procedures"],
    doc_md=DOC,
    params={
        "new_spec": Param(
            SPEC,
            type="string",
            title="New job spec (file)",
            description="The version to deploy; its logic may differ (it is then replayed). A YAML "
            "file in the spec folders (TIDEGATE_SPEC_DIRS, default jobs/)",
        ),
        "region": region_param(
            default="pair", first=("pair",), description="pair: the standby region first, then the active one"
        ),
        "allowed_delay_s": Param(
            600,
            type="number",
            minimum=0,
            title="Allowed delay (s)",
            description="How long consumers may wait for a region to catch up",
        ),
        "mode": Param("last-stopped", enum=["last-stopped", "now", "custom"], title="Start mode after the stop"),
        "rehearsal": Param(True, type="boolean", title="Rehearse the catch-up before deciding"),
        "timeout_s": Param(1800, type="integer", minimum=10, title="Catch-up timeout (s)"),
    },
)
def tidegate_planned_stop():
    deploy = TidegateDeployOperator(task_id="deploy", spec_path="{{ params.new_spec }}")

    @task(task_id="order", multiple_outputs=True)  # turns["regions"], ["turn_1"], ["turn_2"]
    def order(deployed: dict, params=None) -> dict:
        return planned_stop.turns(TidegateHook(), deployed["job"], params["region"])

    @task(task_id="warm_checks", retries=0)
    def start_check_service() -> dict:
        return warm_checks(TidegateHook(actor="planned-stop"))

    start_check_service()  # beside the turns, not before them: the checks find the service warm
    turns = order(deploy.output)
    upgrade(0, turns, deploy.output) >> upgrade(1, turns, deploy.output)


tidegate_planned_stop()
