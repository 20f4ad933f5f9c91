"""Scheduled recovery drills: break a region on purpose, recover, prove nothing was lost or doubled."""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param, dag, task

from tidegate_airflow.dag_defaults import (
    DRILL_KINDS,
    dag_defaults,
    drill_kind,
    drill_schedule_active,
    job_param,
    region_param,
)
from tidegate_airflow.hooks.tidegate import TidegateHook
from tidegate_airflow.operators.spark_submit import TidegateCompletenessOperator
from tidegate_airflow.procedures import check_outcomes, drill, warm_checks
from tidegate_airflow.sensors.job_state import TidegateWaitSensor

DOC = """
### Recovery drill

Runs on demand, and weekly once unpaused (the drill `TIDEGATE_DRILL_KIND` names, `node-failure`
when unset), against a live job, in **region**. It breaks a
region on purpose, so Airflow creates it **paused** unless `TIDEGATE_DRILL_SCHEDULE_ACTIVE`
is true where the DAG processor runs; unpause it (or set that) to run the weekly schedule:

* `node-failure` — kill -9 of the driver; restart from the checkpoint (only the gap since
  the last commit is reprocessed);
* `upgrade` — a planned engine upgrade: stop, then replay from where the output is final
  in a fresh checkpoint;
* `region-loss` — the region's driver killed and its storage made unavailable; consumers
  fail over to the partner if the region served them; the region is restored by replay
  and becomes the standby.
* `control-region-loss` — the region that holds the control database's primary (region
  `primary`) is taken down whole: its drivers, its storage for the job, and through
  `TIDEGATE_CONTROL_FAULTS` its PostgreSQL, etcd member and Airflow. The other region's
  database is promoted by the quorum and its health watch fails consumers over, with nobody
  acting; then the region comes back, its PostgreSQL as the standby, and the job there is
  rebuilt by replay. The drill's own break step may run in the region it loses: the other
  region's scheduler runs it again, and it goes on from what it recorded.

Its first task starts the check service (not waiting for it), so the check finds Spark
and Great Expectations loaded. Each drill estimates its recovery before breaking
anything, times it from the break to caught up, runs the Great Expectations completeness
suite on the recovered region and on the consumer view, and records the result — pass/fail,
estimate, actual, what was checked — which `tidegate drill history` and the Tidegate page show. A
drill that finds anything lost or doubled fails loudly.
"""

JOB = "{{ params.job }}"
KIND = drill_kind()  # the scheduled run's drill: TIDEGATE_DRILL_KIND, node-failure when unset


@dag(
    dag_id="tidegate_drill",
    schedule="0 3 * * 0",
    **dag_defaults(retry_delay=timedelta(minutes=1), paused=not drill_schedule_active(), start_date=None),
    max_active_runs=1,
    tags=["tidegate", "drills"],
    doc_md=DOC,
    params={
        "job": job_param(),
        "kind": Param(KIND, enum=list(DRILL_KINDS), title="Drill"),
        "region": region_param(
            "Region to break",
            default="primary" if KIND == "control-region-loss" else "standby",
            first=("standby", "active", "primary"),
            description="standby: the region consumers are not reading; primary: the region that holds "
            "the control database's primary (the control-region-loss drill's only target)",
        ),
        "timeout_s": Param(1800, type="integer", minimum=10, title="Recovery timeout (s)"),
        "max_lag_s": Param(
            60,
            type="number",
            minimum=0,
            title="Partner may lag by (s)",
            description="a precondition: the partner's output is final within this of the region's",
        ),
    },
)
def tidegate_drill():
    @task(retries=0, multiple_outputs=True)  # prepared["region"]
    def prepare(params=None) -> dict:
        return drill.prepare(
            TidegateHook(actor="drill"),
            params["job"],
            params["kind"],
            params["region"],
            timeout_s=float(params["timeout_s"]),
            max_lag_s=float(params["max_lag_s"]),
        )

    # tried again only when a control-region-loss drill's first try died with the region it
    # took down (the other kinds refuse a second try): the other region goes on from the record
    @task(task_id="break", retries=2, retry_delay=timedelta(seconds=5))
    def break_it(prepared: dict, ti=None) -> dict:
        return drill.break_region(TidegateHook(actor="drill"), prepared, try_number=ti.try_number)

    @task(retries=0, multiple_outputs=True)  # recovered["run_id"], ["check_from"]
    def recover(broken: dict, params=None) -> dict:
        return drill.recover(TidegateHook(actor="drill"), broken, timeout_s=float(params["timeout_s"]))

    @task(trigger_rule="all_done", retries=0)
    def finish(ti=None) -> dict:
        return drill.finish(
            TidegateHook(actor="drill"),
            ti.xcom_pull(task_ids="prepare", default=None),
            ti.xcom_pull(task_ids="break", default=None),
            ti.xcom_pull(task_ids="recover", default=None),
            check_outcomes(ti, "check_completeness"),
        )

    @task(task_id="warm_checks", retries=0)
    def start_check_service() -> dict:
        return warm_checks(TidegateHook(actor="drill"))

    start_check_service()  # beside the drill, not before it: the check finds the service warm
    prepared = prepare()
    broken = break_it(prepared)
    recovered = recover(broken)
    region, run = prepared["region"], recovered["run_id"]
    wait = TidegateWaitSensor(
        task_id="wait_caught_up", job=JOB, region=region, run_id=run, timeout_s="{{ params.timeout_s }}", retries=0
    )
    # the region and the consumer view, in one Spark session against one batch reference; a
    # lost region from its restore point (recover's check_from)
    check = TidegateCompletenessOperator(
        task_id="check_completeness",
        job=JOB,
        target=[region, "consumer"],
        region=region,
        run=run,
        span_from=recovered["check_from"],
        retries=0,
    )
    recovered >> wait >> check >> finish()


tidegate_drill()
