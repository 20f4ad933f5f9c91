"""A controlled job whose region keeps its lineages on S3 (semantics §6, on an object store).

Two SeaweedFS stores stand for the regions' stores (tests/s3.py); the east region's storage
root is ``s3a://tidegate-east/…`` and its keys reach the controller and the driver through
``TIDEGATE_S3_EAST_*`` only. The job runs over a log, stops, resumes from its checkpoint on
the store, and its output read back through the reader equals the batch path row for row —
with the driver compacting every second beside its query and a last compaction after it, so
the read takes compacted files and the batches after them.
Reading ``s3a://`` needs hadoop-aws on the JVM's class path from its start, so the reading
and comparing happen in a Spark child process (tests/s3.py), not the shared session.
"""

from __future__ import annotations

import time

import pytest

from platform_support import MIN, fill, first_arrival
from s3 import BUCKETS, assert_east_equals_batch_path, region_env
from tidegate.lineage.layout import COMPACTIONS_DIR
from tidegate.runtime.outputs.upkeep import compact_job

pytestmark = [pytest.mark.spark, pytest.mark.slow]
JOB = "device-fleet-counts"


def test_a_job_on_an_s3_region_stops_resumes_from_its_checkpoint_and_equals_the_batch_path(
    s3_stores, platform_factory, tmp_path, monkeypatch
):
    event_log = tmp_path / "event-log"
    log = fill(event_log, 3_000, seed=11)
    root = f"s3a://{BUCKETS['east']}/platform-{time.time_ns()}"
    for name, value in region_env("east", s3_stores["east"]).items():
        monkeypatch.setenv(name, value)  # the controller's and, through its allowlist, the driver's
    monkeypatch.setenv("TIDEGATE_COMPACTION_EVERY", "1s")
    monkeypatch.setenv("TIDEGATE_COMPACTION_GRACE", "1s")
    p = platform_factory("s3", event_log, env={"TIDEGATE_REGION_EAST_STORAGE": root})
    east = p.config.region("east")
    assert east.on_object_store and not p.config.region("west").on_object_store

    p.controller.deploy(p.spec_file())
    t = first_arrival(log) + 8 * MIN  # the look-back begins at the log's first event: every window counts
    first = p.controller.start(JOB, "east", mode="custom", at=t)
    p.wait_batches(JOB, "east", 2)
    p.controller.stop(JOB, "east")
    again = p.controller.start(JOB, "east", mode="last-stopped")
    assert again.plan.checkpoint == "reused", again.plan.reason
    p.wait_caught_up(JOB, "east")
    p.controller.stop(JOB, "east")

    db = p.controller.db
    runs = db.runs(JOB, "east")
    assert sorted(r.id for r in runs) == [first.run_id, again.run_id] and len({r.lineage for r in runs}) == 1
    lineage = db.lineage(runs[0].lineage)
    assert lineage.root == f"{root}/jobs/{JOB}/lineages/{lineage.id}"
    store = east.store()
    assert store.exists(store.path_of(east.job_root(JOB)).joinpath("lineages", lineage.id, "checkpoint", "commits"))
    assert (east.job_dir(JOB) / "drivers" / f"run-{again.run_id}.log").is_file()  # driver logs stay on the host
    assert not (east.work / "jobs" / JOB / "lineages").exists()

    done = compact_job(p.controller, JOB)
    output = store.path_of(east.job_root(JOB)).joinpath("lineages", lineage.id, "output")
    assert any(c.through_batch is not None for c in done)
    assert store.list(output / COMPACTIONS_DIR), "nothing was compacted on the store"

    assert_east_equals_batch_path(s3_stores, p, JOB, t, tmp_path)
