"""A paused driver against its successor, with real detached drivers and real Spark (semantics §6):
at most one driver of a job and region commits.

    A: batch 0 .. batch k |SIGSTOP ...................................| SIGCONT -> commits nothing, exits
    B:                          (lease expired) start, batches ... stop |
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest

from platform_support import MIN, REPO, fill, first_arrival
from tidegate.inputs.event_log import EventLog
from tidegate.jobspec import load_spec
from tidegate.lineage.commits import committed_batches, committed_files
from tidegate.lineage.layout import COMMITS_DIR, COMMITTED_FILE, LAYOUT_COLUMNS, JobPaths
from tidegate.runtime.outputs.reader import read_region
from tidegate.runtime.procedures.faults import freeze_holding_no_lock, freeze_mid_write, thaw
from tidegate.spark.pipeline.runner import run_batch
from tidegate.spark.tools.compare import compare

pytestmark = [pytest.mark.spark, pytest.mark.slow]
JOB = "device-fleet-counts"
TTL_S = 4


@pytest.fixture(scope="module")
def event_log(tmp_path_factory):
    path = tmp_path_factory.mktemp("fencing") / "event-log"
    fill(path, 3_000, seed=17)
    return path


@pytest.fixture
def short_lease(monkeypatch):
    monkeypatch.setenv("TIDEGATE_LEASE_TTL_S", str(TTL_S))  # drivers inherit it


def committed(paths: JobPaths) -> dict[str, tuple]:
    """Every visible file a commit makes (outputs, state, metrics, Spark's offsets and commits),
    with its size and content, and on a local root its modification time."""
    store = paths.store
    visible = _named_on_store(paths) if paths.on_object_store else None
    seen = {}
    for part in (paths.output, paths.quarantine, paths.metrics, paths.state, paths.commits, paths.offsets):
        for entry in store.list(part, recursive=True):
            relative = entry.path.relative_to(paths.root)
            if entry.is_dir or any(x.startswith(".") for x in relative.parts):
                continue
            if (
                visible is not None
                and part in (paths.output, paths.quarantine, paths.state)
                and not ({entry.path, *entry.path.parents} & visible)
            ):
                continue
            data = store.read_bytes(entry.path)
            mtime = Path(entry.path).stat().st_mtime_ns if store.is_local else None
            seen[str(relative)] = (len(data), hashlib.sha256(data).hexdigest(), mtime)
    return seen


def _named_on_store(paths: JobPaths) -> set:
    """On an object store, what is visible of the outputs and the state: the commit records and
    the files they name, each committed state version's ``_committed.json`` and the attempt it
    names. A stale driver's files that nothing names are not output."""
    store = paths.store
    named = set()
    for base in (paths.output, paths.quarantine):
        named.update(base / COMMITS_DIR / f"{b}.json" for b in committed_batches(store, base))
        named.update(committed_files(store, base))
    for version in store.list(paths.state):
        meta = store.read_json(version.path / COMMITTED_FILE) if version.is_dir else None
        if meta is not None:
            named.update((version.path / COMMITTED_FILE, version.path / meta["attempt"]))
    return named


def wait_lost(controller, run_id: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if controller.status_of(JOB, "east").state == "lost":
            return
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} was not declared lost within {timeout_s} s")


def test_a_paused_driver_woken_after_its_successor_took_over_commits_nothing(
    spark, platform_factory, event_log, short_lease, east_storage, tmp_path
):
    p = platform_factory("paused", event_log, env=east_storage.env)
    db = p.controller.db
    p.controller.deploy(p.spec_file())
    t = first_arrival(EventLog.open(event_log)) + 8 * MIN
    a = p.controller.start(JOB, "east", mode="custom", at=t)
    p.wait_batches(JOB, "east", 1)
    freeze_mid_write(
        a.process, JobPaths.at(db.lineage(a.plan.lineage_id).root, region="east"), db_lock_free=db.write_lock_free
    )
    # a frozen VM elsewhere: this host's controller cannot kill it, only fencing can stop it
    db.update_run(a.run_id, host="frozen-vm")
    a_batches = db.run(a.run_id).last_batch_id
    wait_lost(p.controller, a.run_id)
    b = p.controller.start(JOB, "east", mode="last-stopped")
    assert b.plan.checkpoint == "reused"
    p.wait_batches(JOB, "east", a_batches + 2)
    p.controller.stop(JOB, "east")
    paths = JobPaths.at(db.lineage(b.plan.lineage_id).root, region="east")
    before = committed(paths)
    metrics_before = len(db.batch_metrics(JOB, "east", run_id=a.run_id))

    thaw(a.process)
    deadline = time.monotonic() + 90
    while a.process.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not a.process.alive(), "the stale driver did not stop by itself"
    assert committed(paths) == before  # not one output, state, metrics or checkpoint file
    assert len(db.batch_metrics(JOB, "east", run_id=a.run_id)) == metrics_before
    stale = db.run(a.run_id)
    assert stale.status == "lost" and ("lease" in stale.status_detail), stale.status_detail

    # the job finishes under a third driver: the output equals the batch path exactly
    p.controller.start(JOB, "east", mode="last-stopped")
    p.wait_caught_up(JOB, "east")
    p.controller.stop(JOB, "east")
    if east_storage.on_s3:
        east_storage.assert_equals_batch_path(p, JOB, t, tmp_path)
        return
    spec = load_spec(REPO / "jobs" / "device_fleet.yaml")
    reference = spark.read.parquet(str(run_batch(spark, spec, event_log, tmp_path / "batch").paths.output))
    from pyspark.sql import functions as F

    reference = reference.drop(*LAYOUT_COLUMNS).where(F.unix_micros("window_end") > F.lit(t))
    ours = read_region(spark, db, JOB, "east")
    diff = compare(reference, ours.select(*reference.columns))
    assert diff.equal, diff


def test_a_lost_driver_still_present_on_this_host_is_killed_before_its_successor_starts(
    platform_factory, event_log, short_lease
):
    p = platform_factory("same-host", event_log)
    p.controller.deploy(p.spec_file())
    a = p.controller.start(JOB, "east", mode="now")
    p.wait_batches(JOB, "east", 0)
    root = JobPaths.at(p.controller.db.lineage(a.plan.lineage_id).root)
    assert any(freeze_holding_no_lock(a.process, root, p.controller.db.write_lock_free) for _ in range(200))
    wait_lost(p.controller, a.run_id)
    # status only reads: the frozen driver is still there, its run still recorded running
    assert a.process.alive() and p.controller.db.run(a.run_id).status == "running"
    b = p.controller.start(JOB, "east", mode="last-stopped")
    assert not a.process.alive()
    lost = p.controller.db.run(a.run_id)
    assert lost.status == "lost" and "was still present: killed" in lost.status_detail
    assert lost.ended_at <= p.controller.db.run(b.run_id).requested_at  # killed before its successor was planned
    p.wait_batches(JOB, "east", (p.controller.db.run(a.run_id).last_batch_id or 0) + 1)
    assert p.controller.status_of(JOB, "east").run_id == b.run_id
    p.controller.stop(JOB, "east")
