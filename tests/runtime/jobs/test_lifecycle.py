"""The job lifecycle with real detached drivers, a real control database and real Spark (semantics §6).

The repeatability tests run one job over one event log in several ways and demand the same
output for every window ending after the first output time T:

    (a) uninterrupted                 (b) stopped and restarted at random batches, last-stopped
    (c) kill -9 of the driver twice   (d) a logic change replayed from a custom time
    (e) the batch recomputation       (f) the checkpoint lost: replay from the last output
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from platform_support import MIN, REPO, fill, first_arrival
from tidegate.eventtime.durations import format_time_us
from tidegate.inputs.event_log import EventLog
from tidegate.jobspec import load_spec
from tidegate.lineage.committed import compacted_through
from tidegate.lineage.layout import LAYOUT_COLUMNS, JobPaths
from tidegate.runtime.jobs.controller import ControllerError
from tidegate.runtime.jobs.planning import RetentionGuardError
from tidegate.runtime.jobs.process import driver, driver_alive, lease_holder
from tidegate.runtime.outputs.reader import read_region
from tidegate.spark.output import by_position
from tidegate.spark.pipeline.runner import run_batch
from tidegate.spark.tools.compare import compare

pytestmark = [pytest.mark.spark, pytest.mark.slow]
JOB = "device-fleet-counts"


@pytest.fixture(scope="module")
def shared_event_log(tmp_path_factory):
    event_log = tmp_path_factory.mktemp("shared") / "event-log"
    fill(event_log, 4_000, seed=11)
    return event_log


@pytest.fixture(scope="module")
def reference(spark, shared_event_log, tmp_path_factory):
    """(e) the batch path over the whole log: what every streaming run must equal."""
    spec = load_spec(REPO / "jobs" / "device_fleet.yaml")  # the source is not part of the logic
    result = run_batch(spark, spec, shared_event_log, tmp_path_factory.mktemp("reference") / "batch")
    return spark.read.parquet(str(result.paths.output)).drop(*LAYOUT_COLUMNS)


def after(df, t_us: int):
    from pyspark.sql import functions as F

    return df.where(F.unix_micros("window_end") > F.lit(t_us))


def start_time(event_log) -> int:
    """A first output time whose look-back begins at the log's first event: every window counts."""
    log = EventLog.open(event_log)
    return first_arrival(log) + 8 * MIN


def assert_same(spark, platform, reference, t_us: int, region: str = "east") -> None:
    ours = read_region(spark, platform.controller.db, JOB, region)
    diff = compare(after(reference, t_us), ours.select(*reference.columns))
    assert diff.equal, diff
    assert ours.count() > 100


@pytest.mark.parametrize("control_url", ["sqlite", "postgresql"], indirect=True)
def test_a_driver_outlives_the_command_that_started_it_and_status_finds_it(
    platform_factory, shared_event_log, control_url
):
    p = platform_factory("detached", shared_event_log, control_url)
    spec_path = p.spec_file()
    cli = [sys.executable, "-m", "tidegate.cli"]
    started = subprocess.run(
        [*cli, "job", "start", str(spec_path), "--region", "east", "--mode", "now"],
        env=p.cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert started.returncode == 0, started.stderr
    assert "running" in started.stdout and "start mode now" in started.stdout
    # the command has exited; its driver has not
    status = p.controller.status_of(JOB, "east")
    run = p.controller.db.run(status.run_id)
    assert status.state == "running" and driver_alive(run) and run.pid_started_at is not None
    assert status.active and status.checkpoint == "fresh"
    listed = subprocess.run([*cli, "job", "status", JOB], env=p.cli_env(), capture_output=True, text=True, timeout=120)
    assert JOB in listed.stdout and "running" in listed.stdout
    stopped = subprocess.run(
        [*cli, "job", "stop", JOB, "--region", "east"], env=p.cli_env(), capture_output=True, text=True, timeout=200
    )
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped" in stopped.stdout
    assert not driver(run).alive()
    run = p.controller.db.run(status.run_id)
    assert run.status == "stopped" and run.status_detail == "stop requested by the operator"
    assert p.controller.db.lease(f"job:{JOB}:east") is None


def test_two_concurrent_starts_launch_exactly_one_driver(platform_factory, shared_event_log):
    p = platform_factory("concurrent", shared_event_log)
    p.controller.deploy(p.spec_file())
    outcomes: list[object] = []
    barrier = threading.Barrier(2)

    def start() -> None:
        from tidegate.runtime.jobs.controller import Controller

        controller = Controller(p.config, actor="racer")
        barrier.wait()
        try:
            outcomes.append(controller.start(JOB, "east", mode="now"))
        except ControllerError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=start) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    started = [o for o in outcomes if not isinstance(o, Exception)]
    refused = [o for o in outcomes if isinstance(o, Exception)]
    assert len(started) == 1 and len(refused) == 1, outcomes
    assert "already runs" in str(refused[0]) or "at the same moment" in str(refused[0])
    live = [r for r in p.controller.db.runs(JOB, "east") if r.status in ("starting", "running") and driver_alive(r)]
    assert len(live) == 1
    p.controller.stop(JOB, "east")


def test_a_start_the_log_no_longer_holds_is_refused_naming_the_span(platform_factory, tmp_path):
    event_log = tmp_path / "short-event-log"
    log = fill(event_log, 1_500, seed=5, segment_bytes=4096, chunk_events=60)  # small segments retention can drop
    p = platform_factory("retention", event_log)
    p.controller.deploy(p.spec_file())
    wanted = first_arrival(log) + 9 * MIN  # reads back from the first minute of the log
    log.set_retention("1m", None)
    assert log.apply_retention()
    with pytest.raises(RetentionGuardError) as err:
        p.controller.start(JOB, "east", mode="custom", at=format_time_us(wanted))
    assert "no longer holds the input" in str(err.value) and "partition 0 offsets" in str(err.value)
    assert p.controller.db.runs(JOB, "east") == []  # nothing was started
    refused = p.controller.db.operations(JOB)[0]
    assert refused.action == "start" and refused.outcome == "refused"


def test_uninterrupted_run_equals_the_batch_path(spark, platform_factory, shared_event_log, reference):  # (a)
    p = platform_factory("a", shared_event_log)
    p.controller.deploy(p.spec_file())
    t = start_time(shared_event_log)
    p.controller.start(JOB, "east", mode="custom", at=t)
    p.wait_caught_up(JOB, "east")
    p.controller.stop(JOB, "east")
    assert_same(spark, p, reference, t)
    # the driver records each batch from the report the engine hands it, the one its metrics file holds
    db = p.controller.db
    recorded = db.batch_metrics(JOB, "east")
    assert recorded
    for row in recorded:
        paths = JobPaths(Path(db.lineage(db.run(row.run_id).lineage).root))
        written = json.loads(paths.find_metrics_file(row.batch_id).read_text())
        assert (row.watermark_delay_us, row.processing_lag_us, row.input_events) == (
            written["watermark_delay_us"],
            written["processing_time_lag_us"],
            written["input_events"],
        )


def test_random_stops_and_last_stopped_starts_equal_the_batch_path(
    spark, platform_factory, shared_event_log, reference
):  # (b): on S3 the same stop and resume is tests/runtime/jobs/test_lifecycle_on_s3.py's
    rng = random.Random(21)
    p = platform_factory("b", shared_event_log)
    p.controller.deploy(p.spec_file())
    t = start_time(shared_event_log)
    p.controller.start(JOB, "east", mode="custom", at=t)
    batch = 0
    for _ in range(2):
        batch += rng.randint(1, 2)
        p.wait_batches(JOB, "east", batch)
        p.controller.stop(JOB, "east")
        result = p.controller.start(JOB, "east", mode="last-stopped")
        assert result.plan.checkpoint == "reused" and "fingerprint is unchanged" in result.plan.reason
        batch = p.controller.db.run(result.run_id).last_batch_id or batch
    p.wait_caught_up(JOB, "east")
    p.controller.stop(JOB, "east")
    runs = p.controller.db.runs(JOB, "east")
    assert len(runs) == 3 and len({r.lineage for r in runs}) == 1
    assert_same(spark, p, reference, t)


def test_kill_9_of_the_driver_twice_then_restart_is_exactly_once(
    spark, platform_factory, shared_event_log, east_storage, request, monkeypatch, tmp_path
):  # (c)
    # the drivers also compact their outputs every second, so a kill lands beside a compaction too
    monkeypatch.setenv("TIDEGATE_COMPACTION_EVERY", "1s")
    monkeypatch.setenv("TIDEGATE_COMPACTION_GRACE", "1s")
    p = platform_factory("c", shared_event_log, env=east_storage.env)
    p.controller.deploy(p.spec_file())
    t = start_time(shared_event_log)
    p.controller.start(JOB, "east", mode="custom", at=t)
    for at_batch in (1, 3):
        p.wait_batches(JOB, "east", at_batch)
        time.sleep(random.Random(at_batch).uniform(0.0, 1.5))  # land anywhere inside the next batch
        p.kill_driver(JOB, "east")
        status = p.controller.status_of(JOB, "east")
        assert status.state == "lost" and "without saying so" in status.detail
        result = p.controller.start(JOB, "east", mode="last-stopped")
        assert result.plan.checkpoint == "reused"
    p.wait_caught_up(JOB, "east")
    p.controller.stop(JOB, "east")
    if east_storage.on_s3:  # nothing is compacted on S3 yet (decision 0010)
        east_storage.assert_equals_batch_path(p, JOB, t, tmp_path)
        return
    assert_same(spark, p, request.getfixturevalue("reference"), t)
    output = JobPaths(Path(p.controller.db.lineages(JOB, "east")[-1].root)).output
    assert (compacted_through(output) or 0) >= 1 and any(output.glob("date=*/hour=*/compacted-*.parquet"))


def test_a_lost_checkpoint_replays_from_the_last_output_without_gap_or_duplicate(
    spark, platform_factory, shared_event_log, reference
):  # (f)
    import shutil

    p = platform_factory("f", shared_event_log)
    p.controller.deploy(p.spec_file())
    t = start_time(shared_event_log)
    first = p.controller.start(JOB, "east", mode="custom", at=t)
    p.wait_batches(JOB, "east", 3)
    p.controller.stop(JOB, "east")
    lineage = p.controller.db.lineage(first.plan.lineage_id)
    shutil.rmtree(f"{lineage.root}/checkpoint")  # outputs stay, the checkpoint is gone
    second = p.controller.start(JOB, "east", mode="last-stopped")
    assert second.plan.checkpoint == "fresh" and "missing" in second.plan.reason
    # the new lineage takes over where the old one's output was final, as the driver recorded it
    assert second.plan.output_start_us > t
    assert p.controller.db.lineage(first.plan.lineage_id).output_until_us == second.plan.output_start_us
    p.wait_caught_up(JOB, "east")
    p.controller.stop(JOB, "east")
    assert_same(spark, p, reference, t)


def test_a_logic_change_replays_from_a_custom_time_and_equals_its_batch_path(
    spark, platform_factory, shared_event_log, tmp_path
):  # (d)
    # the planned stop of a changed query as the controller makes it (on an s3a:// root, where the
    # new version's replay writes a fresh lineage on the store: tests/dags/test_dag_runs.py)
    p = platform_factory("d", shared_event_log)
    p.controller.deploy(p.spec_file())
    t = start_time(shared_event_log)
    p.controller.start(JOB, "east", mode="custom", at=t)
    p.wait_batches(JOB, "east", 2)
    p.controller.stop(JOB, "east")
    v2 = p.spec_file(version=2, aggregates={"readings": "count(*)", "min_temperature": "min(temperature)"})
    with pytest.raises(Exception) as err:  # a changed logic under the same version number is refused
        p.controller.deploy(p.spec_file(aggregates={"readings": "count(*)"}))
    assert "new version number" in str(err.value)
    p.controller.deploy(v2)
    t2 = t + 6 * MIN
    result = p.controller.start(JOB, "east", mode="custom", at=t2, version=2)
    assert result.plan.checkpoint == "fresh" and result.plan.output_start_us == t2
    p.wait_caught_up(JOB, "east")
    p.controller.stop(JOB, "east")
    batch = run_batch(spark, load_spec(v2, log_dirs=p.config.log_dirs), shared_event_log, tmp_path / "batch-v2")
    expected = after(spark.read.parquet(str(batch.paths.output)).drop(*LAYOUT_COLUMNS), t2)
    ours = read_region(spark, p.controller.db, JOB, "east", from_us=t2)
    diff = compare(expected, ours.select(*expected.columns))
    assert diff.equal, diff
    runs = p.controller.db.runs(JOB, "east")
    assert [r.version for r in runs] == [2, 1]
    # the earlier lineage now ends where the new one begins
    first, second = p.controller.db.lineages(JOB, "east")
    assert first.output_until_us == t2 and second.output_from_us == t2


def test_a_per_event_job_restarted_at_an_earlier_time_takes_those_events_over_without_doubling(
    spark, platform_factory, tmp_path
):
    """semantics §6 for a query without windows: a start at ``T`` reads from the first event
    arriving at or after ``T``. Restarted at a time before its last output, the new lineage
    takes over every event from there; the region reads the old lineage's rows only up to the
    new one's first positions — each kept event once, equal to the batch path."""
    job, event_log = "hot-readings", tmp_path / "event-log"
    fill(event_log, 3_000, seed=17)
    p = platform_factory("per-event", event_log)
    spec_file = p.spec_file("hot_readings.yaml", filter="temperature > 20")
    p.controller.deploy(spec_file)
    t = start_time(event_log)
    p.controller.start(job, "east", mode="custom", at=t)
    p.wait_caught_up(job, "east")
    p.controller.stop(job, "east")
    first = p.controller.db.lineages(job, "east")[0]
    t2 = t + 6 * MIN
    assert first.emitted_through_us > t2  # the first lineage's output reaches past the new start
    p.controller.start(job, "east", mode="custom", at=t2)
    p.wait_caught_up(job, "east")
    p.controller.stop(job, "east")
    assert len(p.controller.db.lineages(job, "east")) == 2

    ours = read_region(spark, p.controller.db, job, "east").drop(*LAYOUT_COLUMNS)
    # the batch path judged from the policy's stretch before T, its rows from T's positions on
    spec = load_spec(spec_file, log_dirs=p.config.log_dirs)  # its event log: in the platform's log folders
    batch = run_batch(spark, spec, event_log, tmp_path / "batch", from_arrival_us=t - spec.replay_lookback_us)
    expected = by_position(spark.read.parquet(str(batch.paths.output)), emitted_from(p, first), before=False)
    expected = expected.drop(*LAYOUT_COLUMNS)
    assert ours.count() == ours.select("partition", "offset").distinct().count() > 100  # none doubled
    diff = compare(expected, ours.select(*expected.columns))
    assert diff.equal, diff
    # the consumer view for tools outside Spark cuts the first lineage at the positions the
    # second emits from, not where it began reading (the policy's stretch before them)
    second = p.controller.db.lineages(job, "east")[1]
    starts = emitted_from(p, second)
    read_from = json.loads(p.controller.db.run(second.created_by_run).starting_offsets)
    assert all(read_from[str(q)] < o for q, o in starts.items())
    view = (p.config.home / "views" / f"{job}.sql").read_text()
    assert all(f'("partition" = {q} AND "offset" < {o})' in view for q, o in starts.items()), view
    # and the completeness check after the second start compares the rows either side of it
    checked = subprocess.run(
        [sys.executable, "-m", "tidegate.cli", "output", "check", job, "--target", "east"],
        env=p.cli_env(),
        cwd=str(p.root),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-3000:]
    assert "passed" in checked.stdout

    # a changed query continues from the last output's positions; the rows of the events before
    # them are the old query's — early ones too, whose time lies after the handover — so the
    # check compares the new query's rows from those positions with its batch path
    fill(event_log, 600, seed=18, start_us=EventLog.open(event_log).clock_now_us() + 1_000_000)
    v2 = p.spec_file(
        "hot_readings.yaml",
        version=2,
        filter="temperature > 20",
        select={"deviceId": "deviceId", "temperature": "temperature", "temp_k": "temperature + 273.15"},
    )
    p.controller.deploy(v2)
    started = p.controller.start(job, "east", mode="last-stopped", version=2)
    assert started.plan.checkpoint == "fresh" and started.plan.starting_offsets is not None
    p.wait_caught_up(job, "east")
    p.controller.stop(job, "east")
    checked = subprocess.run(
        [sys.executable, "-m", "tidegate.cli", "output", "check", job, "--target", "east"],
        env=p.cli_env(),
        cwd=str(p.root),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-3000:]
    assert "passed" in checked.stdout and "rows compared" in checked.stdout


def emitted_from(p, lineage) -> dict[int, int]:
    """Where a per-event lineage's output begins, per partition (its run's context records it)."""
    context = json.loads(p.controller.db.run(lineage.created_by_run).context)
    return {int(q): o for q, o in context["emit_from_offsets"].items()}


def supervisor_running(p, region: str) -> bool:
    from tidegate.runtime.jobs.process import supervisor_lease

    lease = p.controller.db.lease(supervisor_lease(region))
    return lease is not None and (holder := lease_holder(lease)) is not None and holder.alive()


def test_keep_running_restarts_a_killed_driver_from_its_checkpoint(platform_factory, shared_event_log):
    p = platform_factory("keep", shared_event_log)
    p.controller.deploy(p.spec_file())
    first = p.controller.start(JOB, "east", mode="custom", at=start_time(shared_event_log), keep_running=True)
    p.wait_batches(JOB, "east", 1)
    assert supervisor_running(p, "east")  # keep_running started the region's supervisor
    p.kill_driver(JOB, "east")
    # that supervisor (the only one: it holds the region's supervisor lease) restarts it;
    # a second restarter ticking beside it would race it for the job's lease
    deadline = time.monotonic() + 60
    while (restarted := p.controller.db.latest_run(JOB, "east")).id == first.run_id:
        assert time.monotonic() < deadline, "the supervisor did not restart the killed driver within 60 s"
        time.sleep(0.2)
    assert restarted.id != first.run_id and restarted.start_mode == "last-stopped"
    assert restarted.checkpoint == "reused" and restarted.lineage == first.plan.lineage_id
    p.controller.wait_for(JOB, "east", lambda s: s.state == "running", 200, "running")
    ops = [o.action for o in p.controller.db.operations(JOB)]
    assert "auto-restart" in ops
    p.controller.stop(JOB, "east")
