"""The release gate with a real driver under live traffic: a caught-up windowed job reads its
input when a window can close, no later than the stretch — and a kill -9 while it holds input
back loses and doubles nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pyspark.sql import functions as F

from support import wait_for
from tidegate.inputs.event_log import EventLog
from tidegate.lineage.layout import LAYOUT_COLUMNS, JobPaths
from tidegate.processes import Recorded
from tidegate.runtime.outputs.reader import read_region
from tidegate.runtime.procedures.faults import kill_group
from tidegate.spark.pipeline.runner import run_batch
from tidegate.spark.tools.compare import compare

pytestmark = [pytest.mark.spark, pytest.mark.slow]
JOB = "device-fleet-counts"
STRETCH_S = 10.0  # twice the window: a gate that waited for the stretch alone reads too late
TRIGGER_S = 1.0
SLACK_S = 3.0  # a trigger's planning and start on a loaded machine
HELD = 4  # batches of each run after it caught up: three spans between reads


def held_batches(platform, run_id: int) -> list[dict]:
    """The run's batches once it had caught up (the gate engaged), each with its metrics file:
    when it read its input, and how far its watermarks then were from the next window end."""
    db = platform.controller.db
    run = db.run(run_id)
    assert run.caught_up_at is not None, f"run {run_id} never caught up"
    paths = JobPaths.at(db.lineage(run.lineage).root, region="east")
    found = []
    for row in db.batch_metrics(JOB, "east", run_id=run_id):
        if row.processed_at > run.caught_up_at:
            written = json.loads(paths.find_metrics_file(row.batch_id).read_text())
            found.append(
                {
                    "read_at": row.processed_at - row.batch_seconds,
                    "seconds": row.batch_seconds,
                    "next_close_in_s": (written["next_close_in_us"] or 0) / 1e6,
                }
            )
    return found


def held(platform, run_id: int) -> None:
    """Run ``run_id`` caught up and then ran :data:`HELD` batches."""
    platform.wait_caught_up(JOB, "east", timeout_s=240)
    wait_for(lambda: len(held_batches(platform, run_id)) >= HELD, 90, f"{HELD} batches after run {run_id} caught up",
             every_s=1.0)  # fmt: skip


def test_a_held_job_reads_when_a_window_can_close_and_a_kill_while_it_holds_is_exactly_once(
    spark, platform_factory, tmp_path, monkeypatch
):
    monkeypatch.setenv("TIDEGATE_TRIGGER_STRETCH", f"{STRETCH_S:g}s")
    log = tmp_path / "event-log"
    EventLog.create(log, partitions=3, clock="wall")
    generator = subprocess.Popen(
        [sys.executable, "-m", "tidegate.cli", "event-log", "generate", str(log), "--mode", "realtime",
         "--rate", "50", "--duration", "10m", "--devices", "4", "--seed", "3"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        p = platform_factory("gate", log)
        spec_file = p.spec_file(
            window={"kind": "tumbling", "size": "5s"},
            policy={"late_arrival_tolerance": "3s", "out_of_order_tolerance": "1s"},
        )
        p.controller.deploy(spec_file)
        runs = [p.controller.start(JOB, "east", mode="now").run_id]
        held(p, runs[-1])
        p.kill_driver(JOB, "east")  # most of the time it is holding input back
        runs.append(p.controller.start(JOB, "east", mode="last-stopped").run_id)
        held(p, runs[-1])
        p.controller.stop(JOB, "east")
    finally:
        kill_group(Recorded.of(generator.pid))

    for run_id in runs:
        batches = held_batches(p, run_id)
        span = batches[-1]["read_at"] - batches[0]["read_at"]
        # held: a 5 s window closes once per 5 s, and a batch every trigger would be one per second
        assert len(batches) >= HELD and len(batches) - 1 <= 0.6 * span / TRIGGER_S, batches
        for before, after in zip(batches, batches[1:], strict=False):
            due = min(before["next_close_in_s"], before["seconds"] + STRETCH_S)
            # read again when the nearest watermark was due at the next window end (or at the
            # stretch), within a trigger and the time a trigger takes to plan
            assert after["read_at"] - before["read_at"] <= due + TRIGGER_S + SLACK_S, (before, after)

    _, spec = p.controller.spec(JOB, 1)
    ours = read_region(spark, p.controller.db, JOB, "east")
    bounds = ours.agg(F.min("window_end").alias("lo"), F.max("window_end").alias("hi")).first()
    batch = run_batch(spark, spec, log, tmp_path / "batch")
    reference = spark.read.parquet(str(batch.paths.output)).drop(*LAYOUT_COLUMNS)
    expected = reference.where(F.col("window_end").between(bounds.lo, bounds.hi))
    diff = compare(expected, ours.select(*reference.columns))
    assert diff.equal, diff
    # each held batch after a run's first read a window's end: four devices' rows every time
    assert ours.count() >= 4 * 2 * (HELD - 1)
