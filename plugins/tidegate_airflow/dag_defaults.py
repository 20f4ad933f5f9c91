"""What every Tidegate DAG declares alike: its start, no catch-up, one retry, and the common params.

A DAG file spreads :func:`dag_defaults` into ``@dag(...)`` and builds its ``job`` and
region params with :func:`job_param` and :func:`region_param`, so the forms in the UI and
the scheduling rules read the same in every DAG (``tests/dags`` holds them to it).

The region choices are the platform's configured regions
(:func:`tidegate.runtime.jobs.config_file.region_names`: ``TIDEGATE_REGIONS``, else
``$TIDEGATE_CONFIG``'s, else the defaults), read from the environment the dag processor
parses the DAG files in; the job and spec defaults are the demo's
(:mod:`tidegate.examples`). Both modules import nothing heavy: this runs at every parse.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import Param

from tidegate.examples import DEMO_JOB, DEMO_SPEC
from tidegate.runtime.jobs.config_file import region_names

START_DATE = datetime(2026, 1, 1)  # before any run: every DAG is manual or on a schedule from now on
JOB = DEMO_JOB
SPEC = f"jobs/{DEMO_SPEC}"  # relative to the checkout, as the deploy and planned-stop forms take it


def dag_defaults(*, retry_delay: timedelta = timedelta(seconds=30)) -> dict[str, Any]:
    """The ``@dag`` keywords every DAG shares: one retry of a failed task after ``retry_delay``
    (a task that must not retry says ``retries=0`` itself), no catch-up of missed runs — a
    procedure runs for the state of the platform now, never for a past interval — and on from
    the start. A fresh Airflow creates DAGs paused, and a run triggered on a paused DAG waits
    queued: the failover the health watch asks for would never run, nor a deploy triggered
    from the command line. A DAG without a schedule runs only when triggered, so on is safe."""
    return {
        "start_date": START_DATE,
        "catchup": False,
        "is_paused_upon_creation": False,
        "default_args": {"retries": 1, "retry_delay": retry_delay},
    }


def job_param() -> Param:
    return Param(JOB, type="string", title="Job name")


def region_param(
    title: str = "Region", *, default: str | None = None, first: tuple[str, ...] = (), description: str | None = None
) -> Param:
    """One of the configured regions, or one of the choices in ``first`` (``pair``,
    ``active``, …) that the DAG resolves itself; ``default`` None is the first region."""
    regions = region_names()
    return Param(default or regions[0], enum=[*first, *regions], title=title, description=description)


def regions_param() -> Param:
    """Some of the configured regions, all of them by default (a deploy's)."""
    regions = list(region_names())
    return Param(
        regions,
        type="array",
        items={"type": "string", "enum": regions},
        title="Regions",
        description="Where to start the job (both, for a paired job)",
    )
