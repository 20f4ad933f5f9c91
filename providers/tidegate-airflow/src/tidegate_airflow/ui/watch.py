"""Whether Tidegate's scheduled DAGs will run: the health watch (the only thing that fails a
job over without an operator) and the weekly drill.

Airflow's scheduler creates a DAG's runs only while Airflow has the DAG (parsed, its file
still there and importing) and it is unpaused (``DagModel.dags_needing_dagruns``). The page
reads that from Airflow's metadata database, which the API server this plugin runs in has
open (``airflow.utils.session.create_session``, as Airflow's own routes use it): a
``SELECT`` of two rows of ``dag`` and their latest ``dag_run``, nothing written. It needs
no Tidegate database, so it answers before the first deploy too.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

ON, PAUSED, NOT_LOADED, UNKNOWN = "on", "paused", "not loaded", "unknown"


@dataclass(frozen=True)
class WatchedDag:
    dag_id: str
    label: str
    stops: str  # what stops while the DAG does not run


WATCHED = (
    WatchedDag("tidegate_health_watch", "Health watch", "failover is manual"),
    WatchedDag("tidegate_drill", "Weekly drill", "no drill runs"),
)


def watch_state(watched: WatchedDag, dag: Any | None, last_run: Any | None) -> dict[str, Any]:
    """The page's view of one DAG from its ``dag`` row (None: Airflow has no such DAG) and its
    latest ``dag_run``: ``state`` (on | paused | not loaded), ``why``, and ``hint`` — what
    to do, None while it is on."""
    dag_id, stops = watched.dag_id, watched.stops
    if dag is None:
        state, why = NOT_LOADED, f"Airflow has no DAG {dag_id}"
        hint = (
            f"put dags/{dag_id}.py in Airflow's DAG folder and look for it in Airflow's import errors: "
            f"{stops} until it is loaded"
        )
    elif dag.is_stale:
        state, why = NOT_LOADED, f"its file {_file(dag, dag_id)} is gone from Airflow's DAG folder"
        hint = f"put dags/{dag_id}.py back in Airflow's DAG folder: {stops} until it is loaded"
    elif dag.has_import_errors:
        state, why = NOT_LOADED, f"its file {_file(dag, dag_id)} does not import: the scheduler starts no run of it"
        hint = (
            f"fix the import error Airflow shows for {_file(dag, dag_id)} (its import errors): "
            f"{stops} until it is loaded"
        )
    elif dag.is_paused:
        state, why = PAUSED, "paused in Airflow"
        hint = f"unpause {dag_id} in Airflow: {stops} while it is paused"
    else:
        state, why, hint = ON, "unpaused: Airflow's scheduler runs it", None
    next_run = getattr(dag, "next_dagrun_create_after", None) if state == ON else None
    return {
        "dag_id": dag_id,
        "label": watched.label,
        "state": state,
        "why": why,
        "hint": hint,
        "schedule": (dag.timetable_description or dag.timetable_summary) if dag is not None else None,
        "next_run_at": next_run.timestamp() if next_run is not None else None,
        "last_run": None
        if last_run is None
        else {
            "run_id": last_run.run_id,
            "state": str(last_run.state) if last_run.state is not None else None,
            "at": last_run.run_after.timestamp() if last_run.run_after is not None else None,
        },
    }


def _file(dag: Any, dag_id: str) -> str:
    return dag.relative_fileloc or f"{dag_id}.py"


def _airflow_session() -> AbstractContextManager:
    from airflow.utils.session import create_session

    return create_session(scoped=False)  # not the thread's scoped session: routes run on a thread pool


def read_watch(open_session: Callable[[], AbstractContextManager] = _airflow_session) -> list[dict[str, Any]]:
    """Every watched DAG's state; ``unknown`` (saying what to check) when Airflow's metadata
    database cannot be read."""
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from sqlalchemy import select
    from sqlalchemy.exc import SQLAlchemyError

    ids = [w.dag_id for w in WATCHED]
    try:
        with open_session() as session:
            dags = {d.dag_id: d for d in session.scalars(select(DagModel).where(DagModel.dag_id.in_(ids)))}
            last_runs = {}
            for dag_id in ids:
                last_runs[dag_id] = session.execute(
                    select(DagRun.run_id, DagRun.state, DagRun.run_after)
                    .where(DagRun.dag_id == dag_id)
                    .order_by(DagRun.run_after.desc(), DagRun.id.desc())
                    .limit(1)
                ).first()
            return [watch_state(w, dags.get(w.dag_id), last_runs[w.dag_id]) for w in WATCHED]
    except SQLAlchemyError as exc:
        why = f"cannot read Airflow's metadata database: {getattr(exc, 'orig', None) or exc}"
        return [
            {
                "dag_id": w.dag_id,
                "label": w.label,
                "state": UNKNOWN,
                "why": why,
                "hint": f"check the API server's [database] sql_alchemy_conn and that the database is up; until then, "
                f"see {w.dag_id} in Airflow's DAG list ({w.stops} while it is paused)",
                "schedule": None,
                "next_run_at": None,
                "last_run": None,
            }
            for w in WATCHED
        ]
