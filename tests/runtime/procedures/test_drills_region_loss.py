"""A region lost and restored by replay, live (semantics §7–§8): real drivers in both regions,
the control database, Great Expectations, and — on an object store — a real SeaweedFS server
per region (tests/s3.py).

* The region-loss drill as the drill DAG runs it (prepare, break, recover, check, finish),
  with the east region on a local root and on an S3 one: the job's place in east's storage
  is moved aside through its store, consumers fail over, east is rebuilt by replay and checked.
* A region lost as an object store loses it: east's server stops. Consumers fail over and
  events keep arriving; east comes back as an empty store and is restored by replay from what
  the control database recorded; both checks pass and its output equals the batch path row
  for row.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from platform_support import fill
from s3 import BUCKETS, assert_east_equals_batch_path, region_env, start_empty
from tidegate.eventtime.durations import format_time_us
from tidegate.runtime.procedures import drills
from tidegate.runtime.procedures.failover import fail_over, storage_lost

pytestmark = [pytest.mark.spark, pytest.mark.slow]
JOB = "device-fleet-counts"
ROWS = 10  # a small log (2,000 events: a drill takes minutes) gives 16 window rows after T


@pytest.fixture(scope="module")
def event_log(tmp_path_factory):
    event_log = tmp_path_factory.mktemp("region-loss") / "event-log"
    fill(event_log, 2_000, seed=53)
    return event_log


def completeness(p, targets: list[str], from_us: int, tmp_path) -> list[dict]:
    """The Great Expectations check the drill DAG runs (``tidegate output check``: its own Spark, with
    every region's store settings), of ``targets`` from ``from_us``; its outcomes."""
    result = tmp_path / f"check-{time.time_ns()}.json"
    args = [
        sys.executable,
        "-m",
        "tidegate.cli",
        "output",
        "check",
        JOB,
        *(a for t in targets for a in ("--target", t)),
        "--from",
        format_time_us(from_us),
        "--result",
        str(result),
        "--here",
    ]
    done = subprocess.run(args, env=p.cli_env(), capture_output=True, text=True, timeout=600)
    assert result.exists(), done.stdout[-2000:] + done.stderr[-4000:]
    outcomes = json.loads(result.read_text())
    assert [o["target"] for o in outcomes] == targets
    assert done.returncode == 0 and all(o["success"] for o in outcomes), [o.get("message") for o in outcomes]
    return outcomes


# on a local root the same drill runs in CI through its DAG, under live traffic
# (tests/bench/test_bench_drills.py: region-loss / active): here only the S3 case
@pytest.mark.parametrize("east_storage", ["s3"], indirect=True)
def test_a_region_loss_drill_moves_the_storage_aside_through_the_store_and_restores_it_by_replay(
    platform_factory, event_log, east_storage, tmp_path
):
    p = platform_factory("drill", event_log, env=east_storage.env)
    t = p.start_pair(JOB)
    assert p.controller.db.active_region(JOB).region == "east"
    c, east = p.controller, p.config.region("east")
    store = east.store()
    place = store.path_of(east.job_root(JOB))
    assert store.list(place, recursive=True)

    prepared = drills.prepare(c, JOB, "region-loss", "active", timeout_s=300, wait_s=60)
    assert prepared["region"] == "east" and prepared["estimate_s"] is not None
    broken = drills.break_region(c, JOB, "region-loss", "east")
    moved = broken.detail["storage_moved_to"]
    assert moved.startswith("s3a://tidegate-east/") if east_storage.on_s3 else moved.startswith(str(east.storage.path))
    assert not store.exists(place)  # the job's checkpoints and outputs are gone from east …
    aside = store.path_of(east.storage.child("lost", moved.rsplit("/", 1)[-1]))
    assert any("/checkpoint/" in str(e.path) for e in store.list(aside, recursive=True))  # … moved aside whole
    if east_storage.on_s3:  # its driver logs are not its storage: they stay in the work folder on this host
        assert any(east.job_dir(JOB).joinpath("drivers").iterdir())
    assert drills.state_of(c, JOB)["regions"]["east"]["storage"] is False
    assert broken.detail["failover"]["switched"] and c.db.active_region(JOB).region == "west"

    recovered = drills.recover(c, broken)
    assert recovered["checkpoint"] == "fresh" and recovered["output_start_us"] == t  # its whole history replayed
    p.wait_caught_up(JOB, "east")
    checks = completeness(p, ["east", "consumer"], recovered["output_start_us"], tmp_path)
    summary = drills.finish(
        c,
        prepared["procedure"],
        broken.to_dict(),
        recovered,
        checks,
        prepared["estimate_s"],
        prepared["estimate_basis"],
    )
    assert c.db.procedure(prepared["procedure"]).result == "passed" and summary["actual_s"] > 0
    assert summary["storage_removed"] and not store.exists(aside)
    assert drills.state_of(c, JOB)["regions"]["east"]["storage"] is True
    if east_storage.on_s3:
        east_storage.assert_equals_batch_path(p, JOB, t, tmp_path, min_rows=ROWS)


def test_an_object_store_that_stops_answering_is_failed_over_and_restored_by_replay_into_an_empty_store(
    platform_factory, event_log, s3_stores, monkeypatch, tmp_path
):
    """Region loss on an object store: its server stops (the driver with it). Brought back, the
    store has lost everything — its data folder wiped, its bucket made again as a replacement
    store would come — so nothing of east's lineages survives: the restore is the replay."""
    env = {}
    for region in ("east", "west"):  # both regions on their own object store
        for name, value in region_env(region, s3_stores[region]).items():
            monkeypatch.setenv(name, value)
        env[f"TIDEGATE_REGION_{region.upper()}_STORAGE"] = f"s3a://{BUCKETS[region]}/loss-{time.time_ns()}"
    monkeypatch.setenv("TIDEGATE_S3_EAST_CONNECT_TIMEOUT_S", "1")  # a stopped store is found lost in seconds
    p = platform_factory("store-loss", event_log, env=env)
    t = p.start_pair(JOB)
    assert p.controller.db.active_region(JOB).region == "east"
    c, east = p.controller, p.config.region("east")
    final = c.emitted_through(JOB, "east")

    p.kill_driver(JOB, "east")  # the region goes as a whole: its driver and its store
    s3_stores["east"].stop()
    assert storage_lost(east, JOB).startswith("its storage does not answer")
    moved = fail_over(c, JOB, "east", "test: east's store is gone")
    assert moved.switched and moved.to_region == "west" and moved.catching_up_through_us is None, moved
    assert "its storage does not answer" in c.db.active_region(JOB).reason
    assert c.emitted_through(JOB, "west") >= final  # consumers lost nothing they had read
    fill(event_log, 300, seed=59)  # traffic goes on while east is lost: west serves it, east's replay must hold it

    start_empty(s3_stores["east"])  # the bucket, and nothing in it
    assert storage_lost(east, JOB) == "its storage is gone"
    restored = c.start(JOB, "east", mode="last-stopped")
    assert restored.plan.checkpoint == "fresh" and restored.plan.output_start_us == t, restored.plan.reason
    p.wait_caught_up(JOB, "east")
    assert storage_lost(east, JOB) is None
    p.wait_caught_up(JOB, "west")

    completeness(p, ["east", "consumer"], t, tmp_path)
    assert_east_equals_batch_path(s3_stores, p, JOB, t, tmp_path, min_rows=ROWS)
