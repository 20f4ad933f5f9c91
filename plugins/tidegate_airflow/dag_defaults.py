"""What every Tidegate DAG declares alike: its start, no catch-up, one retry, and the common params.

A DAG file spreads :func:`dag_defaults` into ``@dag(...)`` and builds its ``job`` and
region params with :func:`job_param` and :func:`region_param`, so the forms in the UI and
the scheduling rules read the same in every DAG (``tests/dags`` holds them to it).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import Param

START_DATE = datetime(2026, 1, 1)  # before any run: every DAG is manual or on a schedule from now on
REGIONS = ("east", "west")
JOB = "device-fleet-counts"


def dag_defaults(*, retry_delay: timedelta = timedelta(seconds=30)) -> dict[str, Any]:
    """The ``@dag`` keywords every DAG shares: one retry of a failed task after ``retry_delay``
    (a task that must not retry says ``retries=0`` itself), no catch-up of missed runs — a
    procedure runs for the state of the platform now, never for a past interval — and on from
    the start. A fresh Airflow creates DAGs paused, and a run triggered on a paused DAG waits
    queued: the failover the health watch asks for would never run, nor a deploy triggered
    from the command line. A DAG without a schedule runs only when triggered, so on is safe."""
    return {"start_date": START_DATE, "catchup": False, "is_paused_upon_creation": False,
            "default_args": {"retries": 1, "retry_delay": retry_delay}}


def job_param() -> Param:
    return Param(JOB, type="string", title="Job name")


def region_param(title: str = "Region", *, default: str = "east", first: tuple[str, ...] = (),
                 description: str | None = None) -> Param:
    """One region of the pair, or one of the choices in ``first`` (``pair``, ``active``, …)
    that the DAG resolves itself."""
    return Param(default, enum=[*first, *REGIONS], title=title, description=description)
