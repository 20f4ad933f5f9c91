"""Whether the health watch and the weekly drill will run, from the row Airflow keeps for
each DAG: a pure function over every state the scheduler distinguishes, and what the page
says when Airflow's database cannot be read. (Against a real Airflow: test_api.py.)"""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

NEXT = datetime(2026, 1, 4, 3, 0, tzinfo=UTC)


def dag(**fields) -> SimpleNamespace:
    row = dict(
        is_paused=False,
        is_stale=False,
        has_import_errors=False,
        timetable_summary="*/5 * * * *",
        timetable_description="Every 5 minutes",
        next_dagrun_create_after=NEXT,
        relative_fileloc="tidegate_health_watch.py",
    )
    return SimpleNamespace(**{**row, **fields})


@pytest.mark.parametrize(
    "row, state, why, hint",
    [
        # loaded, unpaused, imports: the scheduler runs it
        (dag(), "on", "unpaused: Airflow's scheduler runs it", None),
        # paused in Airflow
        (
            dag(is_paused=True),
            "paused",
            "paused in Airflow",
            "unpause tidegate_health_watch in Airflow: failover is manual while it is paused",
        ),
        # never parsed: no row
        (
            None,
            "not loaded",
            "Airflow has no DAG tidegate_health_watch",
            "put dags/tidegate_health_watch.py in Airflow's DAG folder and look for it in Airflow's import errors: "
            "failover is manual until it is loaded",
        ),
        # its file was removed: stale, whatever its pause flag says
        (
            dag(is_stale=True, is_paused=True),
            "not loaded",
            "its file tidegate_health_watch.py is gone from Airflow's DAG folder",
            "put dags/tidegate_health_watch.py back in Airflow's DAG folder: failover is manual until it is loaded",
        ),
        # its file no longer imports: the scheduler starts no run of it
        (
            dag(has_import_errors=True),
            "not loaded",
            "its file tidegate_health_watch.py does not import: the scheduler starts no run of it",
            "fix the import error Airflow shows for tidegate_health_watch.py (its import errors): "
            "failover is manual until it is loaded",
        ),
    ],
)
def test_the_state_of_the_health_watch(row, state, why, hint):
    from tidegate_airflow.ui.watch import WATCHED, watch_state

    health = watch_state(WATCHED[0], row, None)
    assert health["dag_id"] == "tidegate_health_watch"
    assert (health["state"], health["why"], health["hint"]) == (state, why, hint)
    assert health["next_run_at"] == (NEXT.timestamp() if state == "on" else None)


def test_the_drill_schedule_says_what_stops_while_it_is_off():
    from tidegate_airflow.ui.watch import WATCHED, watch_state

    drill = watch_state(WATCHED[1], dag(is_paused=True, timetable_description="At 03:00, only on Sunday"), None)
    assert drill["label"] == "Weekly drill" and drill["schedule"] == "At 03:00, only on Sunday"
    assert drill["hint"] == "unpause tidegate_drill in Airflow: no drill runs while it is paused"


def test_the_last_run_is_its_state_and_when():
    from tidegate_airflow.ui.watch import WATCHED, watch_state

    run = SimpleNamespace(run_id="scheduled__2026-01-04T02:55:00+00:00", state="failed", run_after=NEXT)
    assert watch_state(WATCHED[0], dag(), run)["last_run"] == {
        "run_id": run.run_id,
        "state": "failed",
        "at": NEXT.timestamp(),
    }


def test_when_airflows_database_cannot_be_read_the_state_is_unknown_and_says_what_to_check():
    from sqlalchemy.exc import OperationalError

    from tidegate_airflow.ui.watch import read_watch

    def unreachable():
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    watch = read_watch(open_session=unreachable)
    assert [w["state"] for w in watch] == ["unknown", "unknown"]
    assert "cannot read Airflow's metadata database" in watch[0]["why"] and "connection refused" in watch[0]["why"]
    assert "[database] sql_alchemy_conn" in watch[0]["hint"] and "tidegate_health_watch" in watch[0]["hint"]
