"""Deploy a job version and start it in the regions of the pair."""

from __future__ import annotations

from airflow.sdk import Param, dag, task

from tidegate_airflow.dag_defaults import SPEC, dag_defaults, regions_param
from tidegate_airflow.operators.lifecycle import (
    TidegateDeployOperator,
    TidegateStartOperator,
    TidegateTranslateOperator,
)
from tidegate_airflow.sensors.job_state import TidegateWaitSensor

DOC = """
### Deploy a Tidegate job

Registers the job version in **spec** (a YAML file under `jobs/`; its logic is fingerprinted
and may never change under the same version number) and starts it in each chosen region,
then waits — on the triggerer, holding no worker slot — until every duplicate has caught up.

* Instead of a spec, **query** deploys a Stream Analytics query (a `.asaql` file in the spec
  folders) with its side file **inputs**: the step `translate` makes it a spec, or fails naming
  the query's line and column. The version records the query's path, SHA-256 and text, and the
  side file's path and SHA-256; the Tidegate page shows them.

* **mode** `auto` continues where the job last stopped in a region if it ran there before
  (reusing the checkpoint when the logic is unchanged, replaying otherwise), else starts at
  `now`. `custom` starts the output at **at**.
* The drivers run detached: this DAG run ending (or Airflow restarting) does not stop them.
"""


@dag(
    dag_id="tidegate_deploy",
    schedule=None,
    **dag_defaults(),
    tags=["tidegate", "lifecycle"],
    doc_md=DOC,
    params={
        "spec": Param(
            SPEC,
            type="string",
            title="Job spec file",
            description="Path of the job's YAML spec, relative to the Tidegate checkout; it must "
            "lie in the spec folders (TIDEGATE_SPEC_DIRS, default jobs/). Left at its default or "
            "cleared when a query is given",
        ),
        "query": Param(
            "",
            type="string",
            title="Stream Analytics query (instead of a spec)",
            description="Path of a .asaql query in the spec folders, translated into the job's spec as "
            "tidegate asa import does; empty to deploy the spec",
        ),
        "inputs": Param(
            "",
            type="string",
            title="The query's side file",
            description="Path of the query's side file (.yaml: event ordering policy, inputs, outputs) in "
            "the spec folders; empty for none, or when deploying a spec",
        ),
        "regions": regions_param(),
        "mode": Param("auto", enum=["auto", "now", "custom", "last-stopped"], title="Start mode"),
        "at": Param(
            "",
            type="string",
            title="First output time (custom mode)",
            description="ISO-8601, e.g. 2026-01-01T12:00:00Z; empty for other modes",
        ),
        "keep_running": Param(True, type="boolean", title="Restart the driver whenever it dies"),
    },
)
def tidegate_deploy():
    source = {
        "spec_path": "{{ params.spec }}",
        "query_path": "{{ params.query }}",
        "inputs_path": "{{ params.inputs }}",
    }
    translate = TidegateTranslateOperator(task_id="translate", retries=0, **source)
    deploy = TidegateDeployOperator(task_id="deploy", **source)
    translate >> deploy
    job = deploy.output["job"]

    @task
    def regions(params=None) -> list[str]:
        return list(params["regions"])

    chosen = regions()
    start = TidegateStartOperator.partial(
        task_id="start",
        job=job,
        mode="{{ params.mode }}",
        at="{{ params.at or None }}",
        version=deploy.output["version"],
        keep_running="{{ params.keep_running }}",
    ).expand(region=chosen)
    wait = TidegateWaitSensor.partial(
        task_id="wait_caught_up", job=job, condition="caught_up", timeout_s=1800, retries=0
    ).expand(region=chosen)

    @task(retries=0)
    def claim(job: str, ti=None) -> int:
        from tidegate_airflow.procedures import claim as take
        from tidegate_airflow.procedures import task_step

        return take("deploy", job, step=task_step(ti))  # cleared and run again, it adopts its own lock

    @task(trigger_rule="all_done", retries=0)
    def release(ti=None) -> None:
        from tidegate_airflow.procedures import release as free

        waited = ti.xcom_pull(task_ids="wait_caught_up", default=None)
        free(ti.xcom_pull(task_ids="claim", default=None), bool(waited) and None not in list(waited), "the deploy")

    claim(job) >> chosen >> start >> wait >> release()


tidegate_deploy()
