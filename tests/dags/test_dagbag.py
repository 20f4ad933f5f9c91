"""Every DAG file imports cleanly, declares what operators need, and does no work at import."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_support import REPO, airflow_env, environment

DAG_FILES = sorted((REPO / "dags").glob("*.py"))


@pytest.fixture(scope="module")
def dagbag(tmp_path_factory):
    sys.path.insert(0, str(REPO / "plugins"))
    try:
        with environment(airflow_env(tmp_path_factory.mktemp("airflow"))):
            from airflow.dag_processing.dagbag import DagBag

            yield DagBag(str(REPO / "dags"))
    finally:
        sys.path.remove(str(REPO / "plugins"))


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
    "tidegate.runtime",
    "tidegate.runtime.jobs",
    "tidegate.runtime.jobs.config_file",
}


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: p.stem)
def test_a_dag_file_imports_neither_spark_nor_great_expectations(path, tmp_path):
    # parsing happens every few seconds in the dag processor: no heavy imports, no work
    code = (
        f"import runpy, sys; sys.path.insert(0, {str(REPO / 'plugins')!r}); runpy.run_path({str(path)!r}); "
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
    monkeypatch.syspath_prepend(str(REPO / "plugins"))
    from tidegate_airflow.dag_defaults import region_param, regions_param

    monkeypatch.delenv("TIDEGATE_CONFIG", raising=False)
    monkeypatch.setenv("TIDEGATE_REGIONS", "north,south")
    one = region_param()
    assert (one.value, one.schema["enum"]) == ("north", ["north", "south"])
    assert region_param(default="active", first=("active",)).schema["enum"] == ["active", "north", "south"]
    assert regions_param().value == ["north", "south"]


def test_every_dag_is_on_from_the_start(dagbag):
    # a fresh Airflow creates DAGs paused: a paused watch fails nothing over, and a run
    # triggered on a paused DAG (the failover the watch asks for, a deploy from the CLI) waits
    # queued for ever
    assert {d.dag_id for d in dagbag.dags.values() if d.is_paused_upon_creation is not False} == set()
    scheduled = {
        "tidegate_health_watch",
        "tidegate_drill",
        "tidegate_upkeep",  # on a schedule of their own
        "tidegate_reference_capture",
    }
    for dag_id in scheduled:
        assert type(dagbag.dags[dag_id].timetable).__name__ != "NullTimetable", dag_id
    manual = {d.dag_id for d in dagbag.dags.values() if type(d.timetable).__name__ == "NullTimetable"}
    assert manual == set(dagbag.dags) - scheduled  # the rest only when triggered


def test_every_dag_starts_and_retries_as_dag_defaults_says(dagbag):
    from tidegate_airflow.dag_defaults import dag_defaults

    defaults = dag_defaults()
    for dag in dagbag.dags.values():
        assert dag.catchup is False, dag.dag_id
        assert dag.start_date.replace(tzinfo=None) == defaults["start_date"], dag.dag_id
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
    assert dag.get_task("restart_failed").upstream_task_ids == {"estimate_restore"}
    assert dag.get_task("record").upstream_task_ids == {"check_consumer_view", "check_restored_region"}
