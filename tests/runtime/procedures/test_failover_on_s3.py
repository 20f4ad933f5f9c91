"""Losing a region whose storage is an S3 store (semantics §7): the store stops answering.

On a local root a lost region's folder is gone; on S3 nothing is "gone" that a client could
see — the store just does not answer. The failover's assessment must call that a loss, and
within the store's own bounds (``S3Settings``: attempts × timeouts), not after S3A's minutes
of retries. Decisions over a control database with a fake clock and no driver, as in
test_failover.py; the store is a real SeaweedFS server (tests/s3.py), stopped.
"""

from __future__ import annotations

import time

import pytest

from platform_support import fill
from s3 import BUCKETS, region_env
from tidegate.runtime.jobs.process import job_lease
from tidegate.runtime.procedures.failover import fail_over, region_gone, storage_lost

JOB = "device-fleet-counts"


@pytest.fixture
def s3_pair(s3_stores, platform_factory, tmp_path, monkeypatch):
    """east on s3a://tidegate-east/…, active and final through 100 s; west local, final through 101 s."""
    for name, value in region_env("east", s3_stores["east"]).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TIDEGATE_S3_EAST_CONNECT_TIMEOUT_S", "1")
    fill(tmp_path / "event-log", 200, seed=3)
    root = f"s3a://{BUCKETS['east']}/failover-{time.time_ns()}"
    p = platform_factory("failover-s3", tmp_path / "event-log", env={"TIDEGATE_REGION_EAST_STORAGE": root})
    p.controller.deploy(p.spec_file())
    db = p.controller.db
    version, spec = p.controller.spec(JOB, None)
    for region, through in (("east", 100_000_000), ("west", 101_000_000)):
        reg = p.config.region(region)
        lineage = f"lin-{region}"
        lineage_root = reg.lineage_root(JOB, "lineages", lineage)
        store = reg.store()
        store.write_bytes(store.path_of(reg.job_root(JOB)) / "lineages" / lineage / "lineage.json", b"{}")
        db.create_lineage(
            id=lineage,
            job=JOB,
            region=region,
            version=version,
            fingerprint=spec.fingerprint,
            root=lineage_root,
            windowed=True,
            emitted_through_us=through,
        )
        run = db.create_run(
            job=JOB,
            region=region,
            version=version,
            fingerprint=spec.fingerprint,
            lineage=lineage,
            kind="job",
            input=str(p.event_log),
            start_mode="now",
            checkpoint="fresh",
            checkpoint_reason="first start",
            status="running",
            host=f"driver-host-{region}",
            pid=4242,
            started_at=time.time(),
            caught_up_at=time.time(),
        )
        db.acquire_lease(job_lease(JOB, region), f"run-{run}", 600, host=f"driver-host-{region}", pid=4242)
    db.set_active_region(JOB, "east", "first region started")
    return p


def test_an_s3_region_serves_while_its_store_answers_and_its_jobs_place_is_there(s3_pair):
    east = s3_pair.config.region("east")
    assert storage_lost(east, JOB) is None
    assert region_gone(s3_pair.controller, JOB, "east") is None
    assert storage_lost(east, "never-deployed") == "its storage is gone"


def test_a_stopped_store_is_a_lost_region_within_the_stores_timeouts_and_consumers_fail_over(s3_pair, s3_stores):
    east = s3_pair.config.region("east")
    s3_stores["east"].stop()

    began = time.monotonic()
    gone = region_gone(s3_pair.controller, JOB, "east")
    took_s = time.monotonic() - began
    settings = east.s3_settings()
    assert gone is not None and gone.startswith("its storage does not answer"), gone
    assert took_s < settings.attempts * (settings.connect_timeout_s + 1) + 2, took_s  # bounded, not S3A's minutes

    s3_pair.controller.db.release_lease(
        job_lease(JOB, "east"), s3_pair.controller.db.lease(job_lease(JOB, "east")).holder
    )
    result = fail_over(s3_pair.controller, JOB, "east", "test", sleep=lambda s: None, monotonic=time.monotonic)
    assert result.switched and result.to_region == "west", result
    assert s3_pair.controller.db.active_region(JOB).region == "west"
