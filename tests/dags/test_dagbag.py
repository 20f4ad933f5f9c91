"""Every DAG file imports cleanly, declares what operators need, and does no work at import."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airflow_support import REPO, airflow_env, environment

DAG_FILES = sorted((REPO / "dags").glob("*.py"))


@pytest.fixture(scope="module")
def dagbag(tmp_path_factory):
    with environment(airflow_env(tmp_path_factory.mktemp("airflow")) | {"TIDEGATE_DRILL_SCHEDULE_ACTIVE": ""}):
        from airflow.dag_processing.dagbag import DagBag

        yield DagBag(str(REPO / "dags"))


def test_there_are_dag_files():
    assert {p.stem for p in DAG_FILES} >= {
        "tidegate_deploy",
        "tidegate_restart",
        "tidegate_planned_stop",
        "tidegate_batch_reference",
    }


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: p.stem)
def test_each_dag_file_imports_without_errors_and_follows_the_rules(dagbag, path):
    assert not {k: v for k, v in dagbag.import_errors.items() if Path(k) == path}
    dags = [d for d in dagbag.dags.values() if Path(d.fileloc) == path]
    assert len(dags) == 1, f"{path.name} declares {len(dags)} DAGs"
    dag = dags[0]
    assert dag.dag_id == path.stem
    assert "tidegate" in dag.tags
    assert dag.doc_md and len(dag.doc_md) > 200
    assert dag.default_args.get("retries", 0) >= 1
    # a form in the UI: every param has a default and a type, so no JSON is needed
    for name, param in dag.params.items():
        assert param.value is not None, f"{dag.dag_id}.{name} has no default"
        assert "type" in param.schema or "enum" in param.schema, f"{dag.dag_id}.{name} has no type"


# What a DAG file may load of Tidegate: the regions' names from the platform's configuration
# and the demo's job, in modules that import nothing else of it.
LIGHT = {
    "tidegate",
    "tidegate.errors",
    "tidegate.examples",
    "tidegate.eventtime",  # its __init__ imports nothing; for
    "tidegate.eventtime.durations",  # the health watch's interval: re, math and datetime only
    "tidegate.runtime",
    "tidegate.runtime.jobs",
    "tidegate.runtime.jobs.config_file",
}


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: p.stem)
def test_a_dag_file_imports_neither_spark_nor_great_expectations(path, tmp_path):
    # parsing happens every few seconds in the dag processor: no heavy imports, no work
    code = (
        f"import runpy, sys; runpy.run_path({str(path)!r}); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'great_expectations', "
        "'tidegate')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | airflow_env(tmp_path),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert set(loaded) <= LIGHT, f"{path.name} loads {sorted(set(loaded) - LIGHT)} at every parse"


def test_the_region_forms_offer_the_platforms_regions(monkeypatch):
    from tidegate_airflow.dag_defaults import region_param, regions_param

    monkeypatch.delenv("TIDEGATE_CONFIG", raising=False)
    monkeypatch.setenv("TIDEGATE_REGIONS", "north,south")
    one = region_param()
    assert (one.value, one.schema["enum"]) == ("north", ["north", "south"])
    assert region_param(default="active", first=("active",)).schema["enum"] == ["active", "north", "south"]
    assert regions_param().value == ["north", "south"]


SCHEDULED = {"tidegate_health_watch", "tidegate_drill", "tidegate_upkeep", "tidegate_reference_capture"}


def test_every_dag_but_the_drill_is_on_from_the_start(dagbag):
    # a fresh Airflow creates DAGs paused: a paused watch fails nothing over, and a run
    # triggered on a paused DAG (the failover the watch asks for, a deploy from the CLI) waits
    # queued for ever; the weekly drill breaks a region on purpose, so it waits for an operator
    paused = {d.dag_id for d in dagbag.dags.values() if d.is_paused_upon_creation is not False}
    assert paused == {"tidegate_drill"}
    for dag_id in SCHEDULED:  # on a schedule of their own
        assert type(dagbag.dags[dag_id].timetable).__name__ != "NullTimetable", dag_id
    manual = {d.dag_id for d in dagbag.dags.values() if type(d.timetable).__name__ == "NullTimetable"}
    assert manual == set(dagbag.dags) - SCHEDULED  # the rest only when triggered


def _drill_dag(tmp_path, drill_schedule_active: str, **settings: str):
    """The drill DAG file parsed alone, as the dag processor parses it, with the settings given."""
    from airflow.dag_processing.dagbag import DagBag

    env = airflow_env(tmp_path) | {"TIDEGATE_DRILL_SCHEDULE_ACTIVE": drill_schedule_active} | settings
    with environment(env):
        bag = DagBag(str(REPO / "dags" / "tidegate_drill.py"))
    return bag.dags.get("tidegate_drill"), bag.import_errors


@pytest.mark.parametrize(
    "setting, paused",
    [("", True), ("false", True), ("0", True), ("true", False), ("1", False), ("Yes", False)],
)
def test_the_drill_is_created_paused_unless_its_schedule_is_set_active(tmp_path, setting, paused):
    dag, errors = _drill_dag(tmp_path, setting)
    assert not errors and dag is not None
    assert dag.is_paused_upon_creation is paused
    assert dag.schedule == "0 3 * * 0"  # the schedule is the same either way


def test_unpausing_the_weekly_drill_waits_for_its_next_tick_and_breaks_nothing_at_once(tmp_path):
    # with a start date, Airflow runs the latest tick a DAG missed as soon as it is unpaused:
    # an operator unpausing the drill to run one by hand got a node-failure drill as well
    from airflow.timetables.base import TimeRestriction
    from airflow.timetables.trigger import CronTriggerTimetable

    from tidegate_airflow.dag_defaults import START_DATE

    dag, errors = _drill_dag(tmp_path, "")
    assert not errors and dag is not None and dag.start_date is None
    timetable = CronTriggerTimetable(dag.schedule, timezone="UTC")  # the scheduler's, from the DAG's schedule
    now = datetime.now(UTC)

    def first_run(earliest):
        restriction = TimeRestriction(earliest=earliest, latest=None, catchup=False)
        return timetable.next_dagrun_info(last_automated_data_interval=None, restriction=restriction).run_after

    assert now < first_run(dag.start_date) <= now + timedelta(days=7)
    assert first_run(dag.start_date).weekday() == 6 and first_run(dag.start_date).hour == 3
    assert first_run(START_DATE.replace(tzinfo=UTC)) < now  # what a start date would have done


@pytest.mark.parametrize(
    ("setting", "kind", "region"),
    [("", "node-failure", "standby"), ("region-loss", "region-loss", "standby"),
     ("control-region-loss", "control-region-loss", "primary")],
)  # fmt: skip
def test_the_weekly_drill_runs_the_kind_its_setting_names_against_the_region_that_kind_breaks(
    tmp_path, setting, kind, region
):
    dag, errors = _drill_dag(tmp_path, "", TIDEGATE_DRILL_KIND=setting)
    assert not errors and dag is not None
    assert (dag.params["kind"], dag.params["region"]) == (kind, region)
    assert "primary" in dag.params.get_param("region").schema["enum"]


def test_the_drills_the_form_offers_are_the_runtimes(tmp_path):
    from tidegate.runtime.procedures import control_drill, drills
    from tidegate_airflow.dag_defaults import DRILL_KINDS
    from tidegate_airflow.ui.app import TRIGGERS

    dag, _ = _drill_dag(tmp_path, "")
    assert tuple(dag.params.get_param("kind").schema["enum"]) == DRILL_KINDS == (*drills.KINDS, control_drill.KIND)
    page = next(p for p in TRIGGERS["drill"]["params"] if p["name"] == "kind")
    assert tuple(page["choices"]) == DRILL_KINDS


def test_a_drill_kind_setting_that_is_no_drill_is_an_import_error_naming_the_drills(tmp_path):
    dag, errors = _drill_dag(tmp_path, "", TIDEGATE_DRILL_KIND="chaos")
    assert dag is None
    (message,) = errors.values()
    assert "TIDEGATE_DRILL_KIND='chaos' is not a drill" in message and "control-region-loss" in message


def test_a_drill_setting_that_is_neither_true_nor_false_is_an_import_error_saying_what_to_set(tmp_path):
    dag, errors = _drill_dag(tmp_path, "weekly")
    assert dag is None
    (message,) = errors.values()
    assert "TIDEGATE_DRILL_SCHEDULE_ACTIVE='weekly' is neither true nor false" in message
    assert "set it to true" in message


def test_every_dag_renders_its_templates_as_native_objects(dagbag):
    # operators take typed values: an int version, None for an empty field, a bool
    assert {d.dag_id for d in dagbag.dags.values() if not d.render_template_as_native_obj} == set()


def test_every_dag_starts_and_retries_as_dag_defaults_says(dagbag):
    from tidegate_airflow.dag_defaults import dag_defaults

    defaults = dag_defaults()
    for dag in dagbag.dags.values():
        assert dag.catchup is False, dag.dag_id
        # the drill has none: unpausing it must not run last week's drill at once (below)
        start = None if dag.dag_id == "tidegate_drill" else defaults["start_date"]
        assert (dag.start_date and dag.start_date.replace(tzinfo=None)) == start, dag.dag_id
        assert dag.default_args["retries"] == defaults["default_args"]["retries"], dag.dag_id
    # one DAG keeps a retry delay of its own (a minute): dag_defaults(retry_delay=...) says so in its file
    slower = {
        d.dag_id
        for d in dagbag.dags.values()
        if d.default_args["retry_delay"] != defaults["default_args"]["retry_delay"]
    }
    assert slower == {"tidegate_drill"}


@pytest.mark.parametrize(
    ("dag_id", "after"),
    [
        ("tidegate_drill", set()),
        ("tidegate_planned_stop", set()),
        ("tidegate_restart", {"claim"}),
        ("tidegate_failover", {"assess"}),
    ],
)
def test_a_procedure_starts_the_check_service_in_a_first_task_that_nothing_waits_for(dagbag, dag_id, after):
    """A restart warms it once the job is claimed, a failover once it is due (a failover found
    not needed, or a restart refused, starts no Spark session)."""
    dag = dagbag.dags[dag_id]
    warm = dag.get_task("warm_checks")
    assert warm.upstream_task_ids == after and not warm.downstream_task_ids


def test_a_failover_restores_the_failed_region_after_the_consumer_views_check_whatever_it_found(dagbag):
    dag = dagbag.dags["tidegate_failover"]
    estimate = dag.get_task("estimate_restore")
    assert estimate.upstream_task_ids == {"check_consumer_view", "stop_failed"}
    assert estimate.trigger_rule == "all_done"  # a failed check leaves the region to restore all the same
    # the restart waits for the estimate; the region it restores is the assessment's (an XComArg)
    assert dag.get_task("restart_failed").upstream_task_ids == {"estimate_restore", "assess"}
    assert dag.get_task("record").upstream_task_ids == {"check_consumer_view", "check_restored_region"}


@pytest.mark.parametrize(
    ("form", "version", "at"),
    [("", None, None), ("3", 3, None), ("", None, "2026-01-01T12:00:00Z")],
)
def test_the_restart_form_reaches_its_start_as_native_values(dagbag, form, version, at):
    """An empty version field is None (the latest), a number an int; an empty first output time
    None, a time its ISO text: what the start operator takes."""
    dag = dagbag.dags["tidegate_restart"]
    start = dag.get_task("start")
    context = {"params": {"version": form, "at": at or ""}}
    env = dag.get_template_env()
    assert start.render_template(start.version, context, env) == version
    assert start.render_template(start.at, context, env) == at


def _health_watch(tmp_path, every: str):
    from airflow.dag_processing.dagbag import DagBag

    with environment(airflow_env(tmp_path) | {"TIDEGATE_HEALTH_WATCH_EVERY": every}):
        bag = DagBag(str(REPO / "dags" / "tidegate_health_watch.py"))
    return bag.dags.get("tidegate_health_watch"), bag.import_errors


@pytest.mark.parametrize("setting, every", [("", timedelta(minutes=5)), ("20s", timedelta(seconds=20))])
def test_the_health_watch_looks_as_often_as_its_setting_says(tmp_path, setting, every):
    dag, errors = _health_watch(tmp_path, setting)
    assert not errors and dag is not None
    assert dag.schedule == every


@pytest.mark.parametrize("setting, says", [("2s", "shorter than 10 s"), ("often", "TIDEGATE_HEALTH_WATCH_EVERY")])
def test_a_health_watch_interval_too_short_or_unreadable_is_an_import_error_saying_what_to_give(
    tmp_path, setting, says
):
    dag, errors = _health_watch(tmp_path, setting)
    assert dag is None
    (message,) = errors.values()
    assert says in message


def test_a_retried_failover_request_finds_the_run_its_first_attempt_triggered_and_is_skipped(dagbag):
    """A retry of the health watch's request would otherwise ask for a second failover of the job."""
    request = dagbag.dags["tidegate_health_watch"].get_task("fail_over")
    assert request.partial_kwargs["skip_when_already_exists"] is True
    assert request.partial_kwargs["trigger_run_id"] == "{{ run_id }}__fail_over_{{ ti.map_index }}"
