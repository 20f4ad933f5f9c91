"""Every few minutes: is each job's active region healthy? If not, fail its consumers over."""

from __future__ import annotations

from datetime import timedelta

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import Param, dag, task

from tidegate_airflow.dag_defaults import dag_defaults

DOC = """
### Health watch

For every registered job, assesses its **active** region: unhealthy when the driver is not
running, when it has made no progress for **for_s** while events wait in the log, or when
its watermark delay has stayed above **max_delay_s** for **for_s**. For each unhealthy
active region it triggers `tidegate_failover` with the reason, which moves consumers to the
partner (if that has caught up) and restores the failed region as the standby.
"""


@dag(
    dag_id="tidegate_health_watch",
    schedule=timedelta(minutes=5),
    **dag_defaults(),
    max_active_runs=1,
    tags=["tidegate", "procedures"],
    doc_md=DOC,
    is_paused_upon_creation=False,  # the watch is on from the start: a paused watch fails nothing over
    params={
        "max_delay_s": Param(300, type="number", minimum=0, title="Watermark delay threshold (s)"),
        "for_s": Param(120, type="number", minimum=0, title="… held for (s)"),
    },
)
def tidegate_health_watch():
    @task
    def unhealthy_regions(params=None) -> list[dict]:
        from tidegate.runtime.health import assess_region

        from tidegate_airflow.hooks import TidegateHook

        c = TidegateHook(actor="health-watch").controller
        confs = []
        for job in c.db.jobs():
            active = c.db.active_region(job)
            if active is None or c.db.deployment(job, active.region) is None:
                continue
            running = c.db.procedure_lock(job)
            if running is not None:  # a drill, failover or planned stop owns the job right now
                print(f"{job}: {running.kind} is running (procedure {running.procedure_id}); not assessed")
                continue
            health = assess_region(c, job, active.region, max_delay_s=float(params["max_delay_s"]),
                                   for_s=float(params["for_s"]), stalled_after_s=float(params["for_s"]))
            print(f"{job} in {active.region}: {'healthy' if health.healthy else 'UNHEALTHY'} — {health.reason}")
            if not health.healthy:
                confs.append({"job": job, "from_region": active.region, "reason": "health watch",
                              "only_if_unhealthy": True, "max_delay_s": params["max_delay_s"],
                              "for_s": params["for_s"]})
        return confs

    TriggerDagRunOperator.partial(task_id="fail_over", trigger_dag_id="tidegate_failover").expand(
        conf=unhealthy_regions())


tidegate_health_watch()
