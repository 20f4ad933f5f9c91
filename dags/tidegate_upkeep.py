"""Daily: compact every job's outputs and remove what is past its retention."""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param, dag, task

from tidegate_airflow.dag_defaults import dag_defaults
from tidegate_airflow.hooks.tidegate import TidegateHook
from tidegate_airflow.procedures import upkeep

DOC = """
### Upkeep

For every registered job: merges each hour's batch folders of every lineage into one file
(`tidegate output compact`, safe while the job runs), then removes audit and quarantine hours,
metrics days and retired lineages past their retention (`tidegate output clean`; settings
`TIDEGATE_RETAIN_*`). Never removes what a running lineage, the next start or the consumer
view needs. With **dry_run** it only lists what would go.
"""


@dag(
    dag_id="tidegate_upkeep",
    schedule=timedelta(days=1),
    **dag_defaults(),
    max_active_runs=1,
    tags=["tidegate", "upkeep"],
    doc_md=DOC,
    params={"dry_run": Param(False, type="boolean", title="Only list what would be removed")},
)
def tidegate_upkeep():
    @task
    def compact_and_clean(params=None) -> list[dict]:
        return upkeep.upkeep_all(TidegateHook(actor="upkeep"), dry_run=params["dry_run"])

    compact_and_clean()


tidegate_upkeep()
