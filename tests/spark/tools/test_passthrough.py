"""The passthrough job under ``spark-submit``: ``kill -9`` mid-run, restart, every event exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from tidegate.eventtime.durations import parse_time_us
from tidegate.inputs.event_log import EventLog
from tidegate.spark.tools.passthrough import build_parser

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
JOB = REPO / "jobs" / "passthrough.py"
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
T0 = parse_time_us("2026-03-01T12:00:00Z")


def submit(*args: str) -> list[str]:
    return [str(SPARK_SUBMIT), "--master", "local[2]", str(JOB), *args]


def job_env() -> dict[str, str]:
    return os.environ | {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}


def wait_for(path: Path, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, f"the job ended early with code {proc.returncode}"
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout_s} s"
        time.sleep(0.05)


def test_the_cli_modes_are_exclusive():
    base = ["--event-log", "h", "--output", "o", "--checkpoint", "c"]
    assert build_parser().parse_args([*base, "--available-now"]).available_now
    with pytest.raises(SystemExit):
        build_parser().parse_args([*base, "--available-now", "--until-caught-up"])


def test_kill_9_of_the_driver_mid_run_then_restart_writes_every_event_exactly_once(spark, tmp_path):
    log = EventLog.create(tmp_path / "event-log", partitions=3, clock="manual")
    log.advance_clock(T0)
    per_partition = 200
    for p in range(3):
        log.append(
            p,
            [f"dev{i % 7}" for i in range(per_partition)],
            [json.dumps({"p": p, "i": i}) for i in range(per_partition)],
            arrival_times=[T0 + i * 10_000 for i in range(per_partition)],
        )
    out, ck = tmp_path / "out", tmp_path / "ck"
    args = ["--event-log", str(log.root), "--output", str(out), "--checkpoint", str(ck), "--max-events-per-batch", "30"]
    batches = 3 * per_partition // 30

    with open(tmp_path / "killed.log", "wb") as job_log:
        # its own session (process group): the kill takes the JVM driver and its Python together
        proc = subprocess.Popen(submit(*args), env=job_env(), stdout=job_log, stderr=job_log, start_new_session=True)
        try:
            wait_for(ck / "commits" / "2", proc, timeout_s=180)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    committed = len([n for n in os.listdir(ck / "commits") if n.isdigit()])
    assert 3 <= committed < batches, "the kill should land mid-run"

    # without the limit: Spark re-runs the interrupted batch with the offsets it recorded,
    # then reads the rest in one batch
    restart = subprocess.run(submit(*args[:-2], "--available-now"), env=job_env(), capture_output=True, timeout=300)
    assert restart.returncode == 0, restart.stderr.decode()[-3000:]

    written = spark.read.parquet(str(out))  # through _spark_metadata: only committed files
    assert written.count() == 3 * per_partition
    assert written.select("partition", "offset").distinct().count() == 3 * per_partition
    expected = {
        (p, i, f"dev{i % 7}", json.dumps({"p": p, "i": i}), T0 + i * 10_000)
        for p in range(3)
        for i in range(per_partition)
    }
    got = written.select("partition", "offset", "key", "payload", F.unix_micros("arrival_time")).collect()
    assert {tuple(r) for r in got} == expected
