"""Fail a job's consumers over to the partner region, then restore the failed region as standby."""

from __future__ import annotations

from airflow.sdk import Param, dag, task

from tidegate_airflow.dag_defaults import dag_defaults, job_param, region_param
from tidegate_airflow.hooks.tidegate import TidegateHook
from tidegate_airflow.operators.lifecycle import TidegateStartOperator, TidegateStopOperator
from tidegate_airflow.operators.spark_submit import TidegateCompletenessOperator
from tidegate_airflow.procedures import check_outcomes, failover, warm_checks
from tidegate_airflow.sensors.job_state import TidegateWaitSensor

DOC = """
### Failover

Moves consumers of **job** from the failing region (default: the active one) to its
partner — refused when the partner has not caught up past the active region's last output,
since consumers would miss rows — and records why. Beside the switch it starts the check
service, so the checks below find Spark and Great Expectations loaded. Then:

1. stops what is left of the failed region and, meanwhile, validates the consumer view (now
   the partner) with Great Expectations over the span around the switch;
2. then restores the failed region, whatever the check found: estimates the restore, starts
   it again in `last-stopped` mode (from its checkpoint, or by replay when the checkpoint is
   gone), waits until it has caught up — it is now the standby — and validates its output.
   The restart waits for the consumer view's check so that the two do not share the machine:
   the restore's estimate then holds, and the check answers sooner.

Triggered by the health watch (`tidegate_health_watch`) when the active region stops
making progress or its watermark delay stays above a threshold, or by an operator.
With **only_if_unhealthy** the DAG first checks the region and does nothing if it is fine.
"""

JOB = "{{ params.job }}"


@dag(
    dag_id="tidegate_failover",
    schedule=None,
    **dag_defaults(),
    tags=["tidegate", "procedures"],
    doc_md=DOC,
    max_active_runs=1,
    params={
        "job": job_param(),
        "from_region": region_param("Region failing", default="active", first=("active",)),
        "reason": Param("operator request", type="string", title="Why (recorded)"),
        "only_if_unhealthy": Param(False, type="boolean", title="Only if the region is unhealthy"),
        "max_delay_s": Param(300, type="number", minimum=0, title="Unhealthy: watermark delay above (s)"),
        "for_s": Param(120, type="number", minimum=0, title="… for this long (s)"),
        "timeout_s": Param(1800, type="integer", minimum=10, title="Restore timeout (s)"),
    },
)
def tidegate_failover():
    @task.short_circuit(retries=0, multiple_outputs=True)  # assessed["from"], ["to"]; {}: nothing to do
    def assess(params=None) -> dict:
        return failover.assess(
            TidegateHook(actor="failover"),
            params["job"],
            params["from_region"],
            params["reason"],
            only_if_unhealthy=bool(params["only_if_unhealthy"]),
            max_delay_s=float(params["max_delay_s"]),
            for_s=float(params["for_s"]),
        )

    @task(retries=0)
    def switch(assessed: dict, params=None, ti=None) -> dict:
        return failover.switch(TidegateHook(actor="failover"), assessed, timeout_s=float(params["timeout_s"]), ti=ti)

    @task(task_id="warm_checks", retries=0)
    def start_check_service() -> dict:
        return warm_checks(TidegateHook(actor="failover"))

    assessed = assess()
    assessed >> start_check_service()  # once a failover is due, beside the switch: the checks find it warm
    switched = switch(assessed)
    failed = assessed["from"]
    check_consumers = TidegateCompletenessOperator(
        task_id="check_consumer_view", job=JOB, target="consumer", region=assessed["to"], retries=0
    )
    stop = TidegateStopOperator(task_id="stop_failed", job=JOB, region=failed, grace_s=30, force=True)
    start = TidegateStartOperator(
        task_id="restart_failed", job=JOB, region=failed, mode="last-stopped", keep_running=True, retries=0
    )
    restore_run = start.output["run_id"]
    wait = TidegateWaitSensor(
        task_id="wait_standby_caught_up",
        job=JOB,
        region=failed,
        run_id=restore_run,
        timeout_s="{{ params.timeout_s }}",
        retries=0,
    )
    check_region = TidegateCompletenessOperator(
        task_id="check_restored_region", job=JOB, target=failed, region=failed, run=restore_run, retries=0
    )

    # after the consumer view's check whatever it found (the region is needed back either way),
    # and only once the stop ended: the restart then runs without the check beside it
    @task(trigger_rule="all_done", retries=0)
    def estimate_restore(ti=None) -> dict:
        return failover.before_restore(TidegateHook(actor="failover"), ti.xcom_pull(task_ids="switch", default=None))

    @task(trigger_rule="all_done", retries=0)
    def record(ti=None) -> dict:
        return failover.record(
            TidegateHook(actor="failover"),
            ti.xcom_pull(task_ids="switch", default=None),
            check_outcomes(ti, "check_consumer_view", "check_restored_region"),
            ti.xcom_pull(task_ids="restart_failed", default=None),
            refused=ti.xcom_pull(task_ids="switch", key="refused", default=None),
            estimated=ti.xcom_pull(task_ids="estimate_restore", default=None),
        )

    switched >> [check_consumers, stop]
    [check_consumers, stop] >> estimate_restore() >> start >> wait >> check_region
    [check_consumers, check_region] >> record()


tidegate_failover()
