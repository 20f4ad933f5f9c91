"""Every few minutes: is each job's active region healthy? If not, fail its consumers over."""

from __future__ import annotations

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import Param, dag, task

from tidegate_airflow.dag_defaults import dag_defaults, health_watch_every
from tidegate_airflow.hooks.tidegate import TidegateHook
from tidegate_airflow.procedures import failover

DOC = """
### Health watch

Every five minutes (`TIDEGATE_HEALTH_WATCH_EVERY` when the DAG is parsed says otherwise), for
every registered job, assesses its **active** region: unhealthy when the driver is not
running, when it has made no progress for **for_s** while events wait in the log, or when
its watermark delay has stayed above **max_delay_s** for **for_s**. For each unhealthy
active region it triggers `tidegate_failover` with the reason, which moves consumers to the
partner (if that has caught up) and restores the failed region as the standby.
"""


@dag(
    dag_id="tidegate_health_watch",
    schedule=health_watch_every(),
    **dag_defaults(),
    max_active_runs=1,
    tags=["tidegate", "procedures"],
    doc_md=DOC,
    params={
        "max_delay_s": Param(300, type="number", minimum=0, title="Watermark delay threshold (s)"),
        "for_s": Param(120, type="number", minimum=0, title="… held for (s)"),
    },
)
def tidegate_health_watch():
    @task
    def unhealthy_regions(params=None) -> list[dict]:
        return failover.unhealthy_regions(TidegateHook(actor="health-watch"), params["max_delay_s"], params["for_s"])

    # one failover run per watch run and job, named so: a retry finds the run its first attempt
    # triggered and is skipped, rather than asking for a second failover
    TriggerDagRunOperator.partial(
        task_id="fail_over",
        trigger_dag_id="tidegate_failover",
        trigger_run_id="{{ run_id }}__fail_over_{{ ti.map_index }}",
        skip_when_already_exists=True,
    ).expand(conf=unhealthy_regions())


tidegate_health_watch()
