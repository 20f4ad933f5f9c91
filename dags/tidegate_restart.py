"""Restart a streaming job in one region with a chosen start mode, then prove nothing was lost."""

from __future__ import annotations

from airflow.sdk import Param, dag, task

from tidegate_airflow.dag_defaults import dag_defaults, job_param, region_param
from tidegate_airflow.operators.lifecycle import TidegateStartOperator, TidegateStopOperator
from tidegate_airflow.operators.spark_submit import TidegateCompletenessOperator
from tidegate_airflow.sensors.job_state import TidegateWaitSensor

DOC = """
### Restart a Tidegate job

Stops the job in **region** gracefully (the micro-batch in flight finishes and commits),
starts it again with **mode**, waits until it has caught up, and runs the Great
Expectations completeness suite over the span the restart affected — from the handover
point minus the job's look-back to what is final now — against the batch recomputation.
Once the job is claimed, the check service starts beside the restart, so the check finds
Spark and Great Expectations loaded.

* `last-stopped` (default): output continues just after the last emitted window. The
  checkpoint is reused when the job's logic is unchanged; otherwise the job replays from
  the last output minus its look-back in a fresh checkpoint (the task log says which, and why).
* `now` / `custom`: output starts at the start time / at **at**, replaying the look-back.
* Stopping is refused when it would leave a paired job with no healthy duplicate.
"""

JOB = "{{ params.job }}"
REGION = "{{ params.region }}"


@dag(
    dag_id="tidegate_restart",
    schedule=None,
    **dag_defaults(),
    tags=["tidegate", "lifecycle"],
    doc_md=DOC,
    params={
        "job": job_param(),
        "region": region_param(),
        "mode": Param("last-stopped", enum=["last-stopped", "now", "custom"], title="Start mode"),
        "at": Param("", type="string", title="First output time (custom mode)", description="ISO-8601"),
        "version": Param("", type="string", title="Version", description="empty: the latest registered"),
    },
)
def tidegate_restart():
    stop = TidegateStopOperator(task_id="stop", job=JOB, region=REGION)
    start = TidegateStartOperator(
        task_id="start",
        job=JOB,
        region=REGION,
        mode="{{ params.mode }}",
        at="{{ params.at or None }}",
        version="{{ params.version or None }}",  # empty: None, the latest registered
        retries=0,
    )
    run = start.output["run_id"]
    wait = TidegateWaitSensor(
        task_id="wait_caught_up", job=JOB, region=REGION, condition="caught_up", run_id=run, timeout_s=1800, retries=0
    )
    check = TidegateCompletenessOperator(
        task_id="check_completeness", job=JOB, target=REGION, region=REGION, run=run, retries=0
    )

    @task(retries=0)
    def claim(params=None, ti=None) -> int:
        from tidegate_airflow.procedures import claim as take
        from tidegate_airflow.procedures import task_step

        return take("restart", params["job"], params["region"], step=task_step(ti))  # cleared: adopts its lock

    @task(task_id="warm_checks", retries=0)
    def start_check_service() -> dict:
        from tidegate_airflow.hooks.tidegate import TidegateHook
        from tidegate_airflow.procedures import warm_checks

        return warm_checks(TidegateHook(actor="restart"))

    @task(trigger_rule="all_done", retries=0)
    def release(ti=None) -> None:
        from tidegate_airflow.procedures import check_outcomes
        from tidegate_airflow.procedures import release as free

        outcomes = check_outcomes(ti, "check_completeness")
        free(ti.xcom_pull(task_ids="claim", default=None), all(o and o.get("success") for o in outcomes), "the restart")

    claimed = claim()
    claimed >> start_check_service()  # beside the restart: its check finds Spark and GX loaded
    claimed >> stop >> start >> wait >> check >> release()


tidegate_restart()
