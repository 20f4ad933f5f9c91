"""A job over the event log: streaming equals the batch path, across stops, restarts and
kill -9 of the driver — no row lost, none doubled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tidegate.inputs.event_log import EventLog
from tidegate.inputs.event_log.generator import GeneratorConfig, generate
from tidegate.jobspec import load_spec, parse_spec
from tidegate.spark.output import by_position
from tidegate.spark.pipeline.runner import run_batch, run_stream
from tidegate.spark.tools.compare import compare

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[3]


def fill(event_log: Path, events: int, seed: int, start_us: int | None = None) -> None:
    log = (
        EventLog.open(event_log)
        if EventLog.exists(event_log)
        else EventLog.create(event_log, partitions=3, clock="manual")
    )
    generate(
        log,
        GeneratorConfig(
            devices=12,
            partitions=3,
            events=events,
            seed=seed,
            mode="backfill",
            rate_per_s=5.0,
            idle_partitions=1,
            late_fraction=0.03,
            early_fraction=0.01,
            malformed_fraction=0.01,
            start_us=start_us,
        ),
    )


def output(spark, root: Path):
    return spark.read.parquet(str(root / "output"))


def test_stream_in_many_micro_batches_equals_the_batch_path(spark, tmp_path):
    spec = load_spec(REPO / "jobs" / "device_fleet.yaml")
    event_log = tmp_path / "event-log"
    fill(event_log, 6_000, seed=1)
    streamed = run_stream(spark, spec, event_log, tmp_path / "stream", extra_options={"maxEventsPerBatch": "1500"})
    batch = run_batch(spark, spec, event_log, tmp_path / "batch")
    assert streamed.batches >= 4
    assert streamed.input_events == batch.input_events == 6_000
    assert batch.rows_emitted > 50
    diff = compare(output(spark, batch.paths.root), output(spark, streamed.paths.root))
    assert diff.equal, diff


def test_a_per_event_job_started_at_t_judges_the_policys_stretch_before_it_and_emits_what_the_batch_path_does(
    spark, tmp_path
):
    # every reading, no substreams: the devices' clocks, up to 30 s apart, put events out of
    # order across devices, so the policy's outcomes right after T depend on what arrived before it
    spec = parse_spec(load_spec(REPO / "jobs" / "hot_readings.yaml").to_dict() | {"filter": None, "over": None})
    assert not spec.needs_lookback and spec.replay_lookback_us == 7 * 60_000_000  # late 2m + early 5m
    event_log = tmp_path / "event-log"
    log = EventLog.create(event_log, partitions=3, clock="manual")
    generate(
        log,
        GeneratorConfig(
            devices=12,
            partitions=3,
            events=3_000,
            seed=4,
            mode="backfill",
            rate_per_s=2.0,
            late_fraction=0.02,
            early_fraction=0.01,
            malformed_fraction=0.0,
            clock_skew_max_us=30_000_000,
        ),
    )
    reference = output(spark, run_batch(spark, spec, event_log, tmp_path / "batch").paths.root)
    first = min(i.first_arrival_us for i in log.describe())
    t = first + 15 * 60_000_000  # mid-history: the log holds the whole stretch before it

    def start_at(arrival_us: int) -> dict[int, int]:
        return {p: log.offset_for_arrival(p, arrival_us) for p in range(log.partitions)}

    emit_from = start_at(t)
    options = {"startingOffsets": json.dumps(start_at(t - spec.replay_lookback_us)), "maxEventsPerBatch": "400"}
    fresh = run_stream(spark, spec, event_log, tmp_path / "fresh", extra_options=options, emit_from_offsets=emit_from)
    expected = by_position(reference, emit_from, before=False)
    assert fresh.batches >= 4 and expected.count() > 500
    diff = compare(expected, output(spark, tmp_path / "fresh"))
    assert diff.equal, diff
    # the stretch is what makes them equal: judged from T alone, events right after it differ
    blind = run_stream(
        spark, spec, event_log, tmp_path / "blind", extra_options={"startingOffsets": json.dumps(emit_from)}
    )
    assert not compare(expected, output(spark, blind.paths.root)).equal


def test_stop_and_start_on_the_same_checkpoint_loses_and_doubles_nothing(spark, tmp_path):
    spec = load_spec(REPO / "jobs" / "fleet_hopping.yaml")
    event_log = tmp_path / "event-log"
    fill(event_log, 3_000, seed=2)
    first = run_stream(spark, spec, event_log, tmp_path / "run", extra_options={"maxEventsPerBatch": "1000"})
    # more traffic arrives while the job is stopped
    last_arrival = max(info.last_arrival_us for info in EventLog.open(event_log).describe() if info.last_arrival_us)
    fill(event_log, 3_000, seed=3, start_us=last_arrival + 1_000_000)
    second = run_stream(spark, spec, event_log, tmp_path / "run", extra_options={"maxEventsPerBatch": "1000"})
    assert first.input_events + second.input_events == 6_000
    batch = run_batch(spark, spec, event_log, tmp_path / "batch")
    diff = compare(output(spark, batch.paths.root), output(spark, tmp_path / "run"))
    assert diff.equal, diff


DRIVER = """
import sys
from pathlib import Path
from tidegate.jobspec import load_spec
from tidegate.spark.pipeline.runner import run_stream
from tidegate.spark.session import build_session
spark = build_session("kill-test")
run_stream(spark, load_spec(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]),
           extra_options={"maxEventsPerBatch": "700"}, progress=True)
print("CAUGHT-UP", flush=True)
"""


@pytest.mark.slow
def test_kill_9_of_the_driver_mid_stream_then_restart_is_exactly_once(spark, tmp_path):
    spec_path = REPO / "jobs" / "device_fleet.yaml"
    event_log = tmp_path / "event-log"
    fill(event_log, 5_000, seed=4)
    root = tmp_path / "run"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    args = [sys.executable, str(script), str(spec_path), str(event_log), str(root)]
    for _ in range(2):  # killed twice, at different points
        proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 240
        committed = root / "checkpoint" / "commits"
        before = len(list(committed.glob("[0-9]*"))) if committed.exists() else 0
        while time.monotonic() < deadline and proc.poll() is None:
            done = len(list(committed.glob("[0-9]*"))) if committed.exists() else 0
            if done >= before + 2:
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.stdout.read().decode()[-2000:]
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its Python workers, mid-batch
        proc.wait()
    final = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert "CAUGHT-UP" in final.stdout, final.stdout[-2000:] + final.stderr[-2000:]
    batch = run_batch(spark, load_spec(spec_path), event_log, tmp_path / "batch")
    diff = compare(output(spark, batch.paths.root), output(spark, root))
    assert diff.equal, diff
    audit = spark.read.parquet(str(root / "audit"))
    quarantine = spark.read.parquet(str(root / "quarantine"))
    assert audit.count() + quarantine.count() == 5_000
    assert audit.select("partition", "offset").distinct().count() == audit.count()
