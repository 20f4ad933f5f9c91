"""Controller decisions that need a control database and an event log, but no driver."""

from __future__ import annotations

import time

import pytest

from platform_support import fill
from tidegate.runtime.jobs.controller import Controller, ControllerError, JobStatus
from tidegate.runtime.jobs.process import job_lease

JOB = "device-fleet-counts"


def test_a_start_that_loses_the_lease_race_leaves_the_winner_as_the_jobs_run(platform_factory, tmp_path, monkeypatch):
    fill(tmp_path / "event-log", 300, seed=3)
    p = platform_factory("race", tmp_path / "event-log")
    p.controller.deploy(p.spec_file())
    db = p.controller.db
    version, spec = p.controller.spec(JOB, None)
    # the winner: a driver another controller launched on another host, holding the job's lease
    winner = db.create_run(
        job=JOB, region="east", version=version, fingerprint=spec.fingerprint, lineage="lin-winner", kind="job",
        input=str(p.event_log), start_mode="now", checkpoint="fresh", checkpoint_reason="first start", status="running",
        host="driver-host-elsewhere", pid=4242, started_at=time.time(),
    )  # fmt: skip
    assert db.acquire_lease(job_lease(JOB, "east"), f"run-{winner}", 60, host="driver-host-elsewhere", pid=4242)
    # the loser looked before the winner was recorded: both saw no live driver
    loser = Controller(p.config, actor="racer")
    monkeypatch.setattr(loser, "status_of", lambda job, region: JobStatus(job, region, "never"))

    with pytest.raises(ControllerError, match="at the same moment"):
        loser.start(JOB, "east", mode="now")

    status = p.controller.status_of(JOB, "east")
    assert (status.state, status.run_id) == ("running", winner)
    assert db.latest_run(JOB, "east").id == winner  # what the supervisor tends
    attempts = db.runs(JOB, "east")  # the history still shows the refused attempt, newest first
    assert [r.status for r in attempts] == ["refused", "running"]
    assert f"the lease is held by run-{winner}" in attempts[0].status_detail
    assert db.operations(JOB)[0].outcome == "refused"


def test_status_after_a_restart_on_the_same_checkpoint_shows_the_lineages_output_watermark_and_totals(
    platform_factory, tmp_path
):
    fill(tmp_path / "event-log", 300, seed=3)
    p = platform_factory("lineage-status", tmp_path / "event-log")
    p.controller.deploy(p.spec_file())
    db = p.controller.db
    version, spec = p.controller.spec(JOB, None)
    common = dict(
        job=JOB,
        region="east",
        version=version,
        fingerprint=spec.fingerprint,
        lineage="lin-1",
        kind="job",
        input=str(p.event_log),
        start_mode="custom",
    )
    db.create_lineage(
        id="lin-1",
        job=JOB,
        region="east",
        version=version,
        fingerprint=spec.fingerprint,
        root=str(tmp_path / "lin-1"),
        windowed=True,
        last_output_us=5_000_000,
        emitted_through_us=5_000_000,
    )
    first = db.create_run(**common, checkpoint="fresh", checkpoint_reason="first start", status="stopped")
    for batch, events in ((0, 120), (1, 80)):
        db.record_batch(
            run_id=first,
            batch_id=batch,
            job=JOB,
            region="east",
            processed_at=time.time(),
            batch_seconds=1.0,
            input_events=events,
            quarantined=2,
            rows_emitted=7,
            job_watermark_us=4_000_000 + batch,
            last_output_us=5_000_000,
        )
    # the restart on the same checkpoint: running, no batch of its own yet
    second = db.create_run(
        **common,
        checkpoint="reused",
        checkpoint_reason="fingerprint is unchanged",
        status="running",
        host="driver-host-elsewhere",
        pid=4242,
        started_at=time.time(),
    )
    db.acquire_lease(job_lease(JOB, "east"), f"run-{second}", 60, host="driver-host-elsewhere", pid=4242)

    status = p.controller.status_of(JOB, "east")
    assert (status.state, status.run_id) == ("running", second)
    assert status.last_output_us == 5_000_000  # not "—"
    assert status.job_watermark_us == 4_000_001  # the lineage's last batch
    assert (status.counts["input_events"], status.counts["quarantined"], status.counts["rows_emitted"]) == (200, 4, 14)


def test_status_reads_a_lost_driver_without_recording_it_and_reconcile_records_it(platform_factory, tmp_path):
    fill(tmp_path / "event-log", 300, seed=3)
    p = platform_factory("reads-only", tmp_path / "event-log")
    p.controller.deploy(p.spec_file())
    db = p.controller.db
    version, spec = p.controller.spec(JOB, None)
    run = db.create_run(
        job=JOB, region="east", version=version, fingerprint=spec.fingerprint, lineage="lin-1", kind="job",
        input=str(p.event_log), start_mode="now", checkpoint="fresh", checkpoint_reason="first start", status="running",
        host="driver-host-elsewhere", pid=4242, started_at=time.time() - 60, heartbeat_at=time.time() - 20,
    )  # fmt: skip
    lease = job_lease(JOB, "east")
    assert db.acquire_lease(lease, f"run-{run}", -5, host="driver-host-elsewhere", pid=4242)  # lapsed 5 s ago

    for _ in range(2):  # as often as anyone asks: the same answer, nothing written
        status = p.controller.status_of(JOB, "east")
        assert (status.state, status.run_id, status.alive) == ("lost", run, False)
        assert status.detail.startswith("the driver stopped without saying so: its lease expired")
        assert db.run(run).status == "running" and db.lease(lease) is not None

    status = p.controller.reconcile(JOB, "east")
    assert status.state == "lost"
    recorded = db.run(run)
    assert recorded.status == "lost" and recorded.ended_at is not None
    assert recorded.status_detail.startswith("the driver stopped without saying so: its lease expired")
    assert "; last heartbeat 2" in recorded.status_detail  # 20 s ago, give or take the test's own time
    assert db.lease(lease) is None  # freed for the next driver
    assert p.controller.reconcile(JOB, "east").detail == recorded.status_detail  # recorded once


def test_a_new_lineage_of_a_reference_job_starts_with_its_predecessors_snapshot_records(platform_factory, tmp_path):
    """A replay into a new lineage joins each snapshot from the effective start the stream
    recorded — also one that came late — so the new lineage begins with those records, of
    every table of the job."""
    from platform_support import REPO
    from tidegate.eventtime.durations import parse_time_us
    from tidegate.lineage.layout import JobPaths
    from tidegate.lineage.reference_records import record_snapshots, recorded_snapshots
    from tidegate.runtime.jobs.planning import StartPlan

    fill(tmp_path / "event-log", 100, seed=3)
    p = platform_factory("reference-records", tmp_path / "event-log")
    job, noon, minute = "device-over-limit", parse_time_us("2026-03-01T12:00:00Z"), 60_000_000
    reference = {
        "name": "devices",
        "path": str(REPO / "jobs" / "samples" / "device_sites"),
        "format": "csv",
        "columns": {"deviceId": "string"},
        "keys": ["deviceId = devices.deviceId"],
    }
    sites = {"name": "sites", "path": str(REPO / "jobs" / "samples" / "sites"), "columns": {"siteId": "string"},
             "keys": ["devices.deviceId = sites.siteId"], "type": "left"}  # fmt: skip
    p.controller.deploy(p.spec_file("device_over_limit.yaml", reference=[reference, sites], filter=None, select=None))
    version, spec = p.controller.spec(job, None)
    db = p.controller.db
    db.set_active_region(job, "west", "consumers read the partner")
    db.create_lineage(
        id="lin-1",
        job=job,
        region="east",
        version=version,
        fingerprint=spec.fingerprint,
        root=str(tmp_path / "lin-1"),
        windowed=False,
        created_at=1.0,
    )
    record_snapshots(
        JobPaths(tmp_path / "lin-1"),
        "devices",
        [(noon, [["devices.csv", 1, "ab" * 32]])],
        watermark_us=noon + minute,
        processed_through_us=noon + 5 * minute,
    )  # came late
    record_snapshots(JobPaths(tmp_path / "lin-1"), "sites", [(noon, [["sites.csv", 1, "cd" * 32]])])
    run = db.create_run(
        job=job,
        region="east",
        version=version,
        fingerprint=spec.fingerprint,
        lineage="lin-2",
        kind="job",
        input=str(p.event_log),
        start_mode="custom",
        checkpoint="fresh",
        checkpoint_reason="a replay",
        status="starting",
    )
    plan = StartPlan(
        mode="custom",
        output_start_us=noon + 30 * minute,
        lookback_us=0,
        input_from_us=None,
        starting_offsets=None,
        checkpoint="fresh",
        reason="a replay",
        lineage_id="lin-2",
        new_lineage=True,
        emit_after_us=None,
    )
    p.controller._open_lineage(job, "east", version, spec, plan, str(tmp_path / "lin-2"), run)
    kept = recorded_snapshots(JobPaths(tmp_path / "lin-2"), "devices")
    assert kept == recorded_snapshots(JobPaths(tmp_path / "lin-1"), "devices")
    assert kept[0]["effective_from"] == "2026-03-01T12:05:00.000001Z"
    sites_kept = recorded_snapshots(JobPaths(tmp_path / "lin-2"), "sites")
    assert [r["files"] for r in sites_kept] == [[["sites.csv", 1, "cd" * 32]]]
