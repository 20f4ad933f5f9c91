"""On a schedule: capture each configured database table as a reference snapshot."""

from __future__ import annotations

import os

from airflow.sdk import Param, dag, task

from tidegate_airflow.dag_defaults import dag_defaults
from tidegate_airflow.hooks.tidegate import TidegateHook
from tidegate_airflow.procedures import reference_capture

# the refresh schedule is the operator's: a cron expression or preset, read when the DAG is parsed
SCHEDULE = os.environ.get("TIDEGATE_REFERENCE_CAPTURE_SCHEDULE") or "*/15 * * * *"

DOC = """
### Reference capture

Refreshes reference tables that live in a database: each table listed under
`reference_captures` in `$TIDEGATE_CONFIG` is read whole through its configured connection
and published as a snapshot `valid_from=<capture time>/table.parquet` in its folder — the
folder a job's `reference.path` names (`tidegate reference capture`, once per table). A table
unchanged since its newest snapshot publishes nothing. Runs every 15 minutes unless
`TIDEGATE_REFERENCE_CAPTURE_SCHEDULE` (a cron expression or preset) says otherwise.

Triggered by hand with **connection**, **table** and **folder**, it captures that one table
instead: the connection must be configured and the folder inside the reference folders
(`TIDEGATE_REFERENCE_DIRS`). Every capture is tried; the run fails naming those that failed.
"""


@dag(
    dag_id="tidegate_reference_capture",
    schedule=SCHEDULE,
    **dag_defaults(),
    max_active_runs=1,
    tags=["tidegate", "reference"],
    doc_md=DOC,
    params={
        "connection": Param("", type="string", title="Connection", description="empty: every configured capture"),
        "table": Param("", type="string", title="Table (name or schema.name)"),
        "folder": Param("", type="string", title="Snapshot folder (inside the reference folders)"),
    },
)
def tidegate_reference_capture():
    @task
    def capture(params=None) -> list[dict]:
        return reference_capture.capture(
            TidegateHook(actor="reference-capture"), params["connection"], params["table"], params["folder"]
        )

    capture()


tidegate_reference_capture()
