"""A promotion of the control database in the middle of a planned stop (semantics §7): the
procedure either completes or rolls back cleanly, and either way consumers see every row once.

A live pair on a database of its own in the session's replicated cluster (``ha_cluster``);
``tidegate_planned_stop`` takes the standby to a new version (the same logic: it resumes
its checkpoint) through ``airflow dags test``. The moment the new version's run is recorded —
its driver starting, taking its lease, committing its first batches — the primary's whole
database site is killed (PostgreSQL, Patroni, etcd member) and the other region's is promoted
under the procedure. The lost site comes back as the standby at the end.
"""

from __future__ import annotations

import itertools
import json
import os
import threading

import pytest

from airflow_support import dags_test, migrate, tail
from platform_support import REPO, fill
from tidegate.control.db import ControlDB
from tidegate.control.ha.cluster import REGIONS
from tidegate.jobspec import load_spec
from tidegate.lineage.layout import LAYOUT_COLUMNS
from tidegate.runtime.outputs.reader import read_consumer_view, read_region
from tidegate.spark.pipeline.runner import run_batch
from tidegate.spark.tools.compare import compare

pytestmark = [pytest.mark.spark, pytest.mark.slow]
JOB = "device-fleet-counts"
_databases = itertools.count(1)


class KillWhenStarted(threading.Thread):
    """Kills the cluster's primary site once ``region`` has a run of ``version`` recorded."""

    def __init__(self, cluster, url: str, region: str, version: int) -> None:
        super().__init__(daemon=True)
        self.cluster, self.db, self.region, self.version = cluster, ControlDB(url), region, version
        self.killed: str | None = None
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.2):
            run = self.db.latest_run(JOB, self.region)
            if run is not None and run.version == self.version:
                self.killed = self.cluster.wait_for_primary()
                self.cluster.kill_site(self.killed)
                return


@pytest.fixture
def pair_on_cluster(ha_cluster, platform_factory, tmp_path, monkeypatch):
    event_log = tmp_path / "event-log"
    fill(event_log, 3_000, seed=61)
    url = ha_cluster.create_database(f"planned_stop_{os.getpid()}_{next(_databases)}")
    # leases outlast a promotion (Patroni's ttl, 20 s, and the standby's recovery), as the guide says:
    # what is under test is the procedure across it, not a driver giving up its lease
    # (the drivers this process starts take it from its environment, those the DAG starts from the platform's)
    monkeypatch.setenv("TIDEGATE_LEASE_TTL_S", "35")
    p = platform_factory("promotion", event_log, control_url=url, env={"TIDEGATE_LEASE_TTL_S": "35"})
    p.t = p.start_pair(JOB)
    primary = ha_cluster.wait_for_primary(timeout_s=60)
    yield p
    # the lost site comes back as the standby, and the primary moves back where it was: the
    # session's cluster is as the tests after this one found it
    for region in REGIONS:
        ha_cluster.start_site(region)
    ha_cluster.switchover(primary)


def test_a_promotion_during_a_planned_stop_completes_it_or_rolls_it_back_and_loses_no_row(
    spark, ha_cluster, pair_on_cluster, tmp_path
):
    p, c = pair_on_cluster, pair_on_cluster.controller
    home = tmp_path / "airflow"
    migrate(home)
    active = c.db.active_region(JOB).region
    standby = p.config.partner(active).name
    before = {r: c.status_of(JOB, r).version for r in (active, standby)}
    version = c.spec(JOB)[0] + 1
    spec = p.spec_file(version=version)
    since = c.db.now()
    killer = KillWhenStarted(ha_cluster, c.config.control_db, standby, version)
    killer.start()
    try:
        done = dags_test(
            home,
            "tidegate_planned_stop",
            {"new_spec": str(spec), "region": standby, "rehearsal": False, "allowed_delay_s": 3600, "timeout_s": 300},
            p.env,
            p.root,
        )
    finally:
        killer.halt.set()
        killer.join(10)
    assert killer.killed is not None, f"the new version never started, so nothing was promoted under it:\n{tail(done)}"
    kept = next(r for r in REGIONS if r != killer.killed)
    assert ha_cluster.wait_for_primary(timeout_s=60) == kept  # the procedure ran on across a real promotion

    turns = [t for t in c.db.procedures(JOB, kind_prefix="planned-stop") if t.started_at >= since]
    assert len(turns) == 1 and turns[0].region == standby, turns
    turn = turns[0]
    status = c.status_of(JOB, standby)
    if turn.result == "passed":  # completed: the new version runs, checked
        assert done.returncode == 0, tail(done)
        assert status.version == version
        assert all(check["success"] for check in json.loads(turn.detail)["checks"]), turn.detail
    else:  # or rolled back cleanly: the old version runs again, and the record says why
        assert turn.result == "rolled-back", (turn.result, turn.detail, tail(done))
        assert done.returncode != 0 and status.version == before[standby]
        assert json.loads(turn.detail)["rollback"]["restored_version"] == before[standby]
    # either way: the job is free, consumers never moved, both regions run caught up
    assert c.db.procedure_lock(JOB) is None
    assert c.db.active_region(JOB).region == active and c.status_of(JOB, active).version == before[active]
    for region in (active, standby):
        p.wait_caught_up(JOB, region)
    print(f"\npromotion {killer.killed} → {kept} during the planned stop of {standby}: {turn.result}")

    batch = run_batch(
        spark, load_spec(REPO / "jobs" / "device_fleet.yaml"), p.event_log, tmp_path / "batch", emit_after_us=p.t
    )
    reference = spark.read.parquet(str(batch.paths.output)).drop(*LAYOUT_COLUMNS)
    _, view = read_consumer_view(spark, c.db, JOB)
    diff = compare(reference, view.select(*reference.columns))
    assert diff.equal, diff
    for region in (active, standby):  # and each region alone: the promotion doubled nothing in either
        diff = compare(reference, read_region(spark, c.db, JOB, region).select(*reference.columns))
        assert diff.equal, (region, diff)
