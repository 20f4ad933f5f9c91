"""Paired regions end to end (semantics §7–§8): failover, a failed upgrade rolled back, and the pair's refusals.

One live pair for the whole module — a job running in east and west over one event log —
goes through everything an operator would put it through, in order. After each step the
consumer view must equal the batch recomputation: no row lost, none doubled. The drills run
under live traffic in tests/bench/test_bench_drills.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from airflow_support import dags_test, migrate, tail
from platform_support import REPO, Platform, fill
from tidegate.jobspec import load_spec
from tidegate.lineage.layout import LAYOUT_COLUMNS
from tidegate.runtime.jobs.controller import ControllerError
from tidegate.runtime.outputs.reader import read_consumer_view
from tidegate.spark.pipeline.runner import run_batch
from tidegate.spark.tools.compare import compare

pytestmark = [pytest.mark.spark, pytest.mark.slow]
JOB = "device-fleet-counts"


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow-pair")
    migrate(home)
    return home


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair")
    event_log = root / "event-log"
    fill(event_log, 3_000, seed=41)
    platform_root = root / "platform"
    platform_root.mkdir()
    p = Platform(platform_root, event_log)
    p.t = p.start_pair(JOB)
    yield p
    p.stop_everything()


@pytest.fixture(scope="module")
def reference(spark, pair, tmp_path_factory):
    batch = run_batch(
        spark,
        load_spec(REPO / "jobs" / "device_fleet.yaml"),
        pair.event_log,
        tmp_path_factory.mktemp("pair-reference") / "batch",
        emit_after_us=pair.t,
    )
    return spark.read.parquet(str(batch.paths.output)).drop(*LAYOUT_COLUMNS)


def assert_consumers_see_everything_once(spark, pair, reference):
    _, view = read_consumer_view(spark, pair.controller.db, JOB)
    diff = compare(reference, view.select(*reference.columns))
    assert diff.equal, diff


def dag(airflow_home, pair, dag_id, conf):
    done = dags_test(airflow_home, dag_id, conf, pair.env, pair.root)
    assert done.returncode == 0, tail(done)
    return done


def test_consumers_never_move_to_a_lagging_partner(pair):
    c = pair.controller
    assert c.db.active_region(JOB).region == "east"
    c.stop(JOB, "west")  # east is healthy: west may stop
    with pytest.raises(ControllerError) as refused:
        c.stop(JOB, "east")
    assert "last healthy duplicate" in str(refused.value)
    cli = subprocess.run(
        [sys.executable, "-m", "tidegate.cli", "job", "failover", JOB, "--to", "west"],
        env=pair.cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 2 and "refusing to move consumers" in cli.stderr and "stopped" in cli.stderr
    assert c.db.active_region(JOB).region == "east"
    c.start(JOB, "west", mode="last-stopped")
    pair.wait_caught_up(JOB, "west")
    assert c.switch_active(JOB, "west", "test: west has caught up")["switched"]
    assert c.switch_active(JOB, "east", "test: back")["switched"]
    view = (pair.config.home / "views" / f"{JOB}.sql").read_text()
    assert "region east" in view and "read_parquet" in view


def test_failover_moves_consumers_and_restores_the_failed_region_as_standby(spark, airflow_home, pair, reference):
    pair.kill_driver(JOB, "east")
    dag(
        airflow_home,
        pair,
        "tidegate_failover",
        {"job": JOB, "from_region": "active", "only_if_unhealthy": True, "reason": "test: east killed"},
    )
    c = pair.controller
    active = c.db.active_region(JOB)
    assert active.region == "west" and "east the driver is lost" in active.reason
    east = c.status_of(JOB, "east")
    assert east.state == "running" and east.caught_up and not east.active
    failover = c.db.procedures(JOB)[0]
    assert failover.kind == "failover" and failover.result == "passed"
    assert_consumers_see_everything_once(spark, pair, reference)


def test_a_new_version_that_never_becomes_healthy_is_rolled_back(spark, airflow_home, pair, reference):
    c = pair.controller
    standby = pair.config.partner(c.db.active_region(JOB).region).name
    before = c.status_of(JOB, standby).version
    # a valid spec whose logic fails on its first batch: device ids are not numbers (ANSI casts raise)
    broken = pair.spec_file(version=before + 1, filter="cast(deviceId as int) >= 0")
    done = dags_test(
        airflow_home,
        "tidegate_planned_stop",
        {"new_spec": str(broken), "region": standby, "rehearsal": False, "allowed_delay_s": 3600, "timeout_s": 240},
        pair.env,
        pair.root,
    )
    assert done.returncode != 0, tail(done)  # the upgrade did not happen: the run says so
    planned = c.db.procedures(JOB, kind_prefix="planned-stop")
    assert planned and planned[0].result == "rolled-back", tail(done)
    planned = planned[0]
    assert f"rolled back to version {before}" in tail(done) or f'"restored_version": {before}' in planned.detail
    status = c.status_of(JOB, standby)
    assert status.state == "running" and status.version == before and status.caught_up
    assert any(op.action == "rollback" and op.outcome == "done" for op in c.db.operations(JOB, limit=20))
    assert c.db.procedure_lock(JOB) is None  # the job is free for the next procedure
    assert_consumers_see_everything_once(spark, pair, reference)
    # the rolled-back region itself: no gap, no duplicate across the failed version and the rollback, from
    # where its oldest lineage with output on disk begins (a lost region keeps nothing before its restore)
    from pyspark.sql import functions as F

    from tidegate.runtime.outputs.reader import read_region, region_spans

    kept = [s for s in region_spans(c.db, JOB, standby) if s.output.exists()]
    since = kept[0].from_us
    assert since is not None and len(kept) >= 2, kept  # the rollback's lineage follows the failed version's
    region = read_region(spark, c.db, JOB, standby).select(*reference.columns)
    diff = compare(reference.where(F.unix_micros("window_end") > F.lit(since)), region)
    assert diff.equal, diff


def append_when_started(pair, region: str, version: int, events: int, seed: int) -> threading.Thread:
    """Append ``events`` to the pair's log as soon as ``version`` is started in ``region``, before
    its first batch: what it then emits past its handover is what its check compares."""

    def append() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            run = pair.controller.db.latest_run(JOB, region)
            if run is not None and run.version == version:
                fill(pair.event_log, events, seed=seed)
                return
            time.sleep(0.2)

    thread = threading.Thread(target=append, daemon=True)
    thread.start()
    return thread


def test_a_planned_stop_of_the_pair_keeps_the_consumer_view_within_its_allowed_delay(airflow_home, pair):
    c = pair.controller
    active = c.db.active_region(JOB).region
    allowed_s = 600
    # the same logic under a new version number: each region resumes its checkpoint
    version = c.spec(JOB)[0] + 1
    spec = pair.spec_file(version=version)
    since = c.db.now()
    # ~100 s of live input arrives as the active region restarts: its consumers wait for it
    appended = append_when_started(pair, active, version, 200, seed=47)
    done = dags_test(
        airflow_home,
        "tidegate_planned_stop",
        {"new_spec": str(spec), "region": "pair", "rehearsal": False, "allowed_delay_s": allowed_s, "timeout_s": 240},
        pair.env,
        pair.root,
    )
    appended.join(timeout=5)
    assert done.returncode == 0, tail(done)
    turns = sorted(
        (p for p in c.db.procedures(JOB, kind_prefix="planned-stop") if p.started_at >= since), key=lambda p: p.id
    )
    assert [(p.region, p.result) for p in turns] == [(pair.config.partner(active).name, "passed"), (active, "passed")]
    for turn in turns:
        gap = json.loads(turn.detail)["consumer_gap"]
        assert gap["allowed_delay_s"] == allowed_s and gap["moments"] > 0, gap
        assert gap["max_delay_s"] <= allowed_s and gap["beyond_allowed_s"] == 0, (turn.region, gap)


def test_a_new_version_whose_output_fails_its_check_is_rolled_back_and_the_pair_goes_no_further(
    spark, airflow_home, pair, tmp_path
):
    c = pair.controller
    active = c.db.active_region(JOB).region
    standby = pair.config.partner(active).name
    running = {r: c.status_of(JOB, r).version for r in (active, standby)}
    # really wrong, and only the check can tell: it catches up like any version, but drops one device's
    # readings from its peak, so that device's windows carry a null the suite's no-null rule finds
    aggregates = {
        "readings": "count(*)",
        "avg_temperature": "avg(temperature)",
        "max_temperature": "max(CASE WHEN deviceId <> 'dev-0003' THEN temperature END)",
    }
    version = c.spec(JOB)[0] + 1
    wrong = pair.spec_file(version=version, aggregates=aggregates)
    since = c.db.now()
    appended = append_when_started(pair, standby, version, 1_200, seed=43)  # windows to close after the handover
    done = dags_test(
        airflow_home,
        "tidegate_planned_stop",
        {"new_spec": str(wrong), "region": "pair", "rehearsal": False, "allowed_delay_s": 3600, "timeout_s": 240},
        pair.env,
        pair.root,
    )
    appended.join(timeout=5)
    assert done.returncode != 0, tail(done)
    turns = [p for p in c.db.procedures(JOB, kind_prefix="planned-stop") if p.started_at >= since]
    assert [(p.region, p.result) for p in turns] == [(standby, "rolled-back")], tail(done)  # no second turn
    detail = json.loads(turns[0].detail)
    assert [f["target"] for f in detail["failed_checks"]] == [standby], detail
    assert "null" in detail["failed_checks"][0]["message"].lower(), detail["failed_checks"]
    rolled = detail["rollback"]
    assert rolled["restored_version"] == running[standby] and rolled["resumed_from_us"] is not None
    assert rolled["discarded_lineages"], rolled
    assert detail["consumer_gap"]["max_delay_s"] is not None
    # consumers never moved, the active region was never touched, the standby runs its old version again
    assert c.db.active_region(JOB).region == active
    assert c.status_of(JOB, active).version == running[active]
    status = c.status_of(JOB, standby)
    assert status.state == "running" and status.version == running[standby] and status.caught_up
    assert c.db.procedure_lock(JOB) is None
    pair.wait_caught_up(JOB, active)
    batch = run_batch(
        spark, load_spec(REPO / "jobs" / "device_fleet.yaml"), pair.event_log, tmp_path / "batch", emit_after_us=pair.t
    )
    reference = spark.read.parquet(str(batch.paths.output)).drop(*LAYOUT_COLUMNS)
    assert_consumers_see_everything_once(spark, pair, reference)
    # no row of the failed version is read any more: the standby equals the batch path again
    from pyspark.sql import functions as F

    from tidegate.runtime.outputs.reader import read_region, region_spans

    since_us = [s for s in region_spans(c.db, JOB, standby) if s.output.exists()][0].from_us
    region = read_region(spark, c.db, JOB, standby).select(*reference.columns)
    diff = compare(reference.where(F.unix_micros("window_end") > F.lit(since_us)) if since_us else reference, region)
    assert diff.equal, diff
