"""One real batch reference for every completeness test, and a GX project per test.

The reference is ``jobs/device_fleet.yaml`` run on the batch path over a small generated
log: 4 devices, one reading per second for a few minutes, so a handful of one-minute
windows per device. Tests take it as the output, break one thing, and check it against
the untouched reference.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from tidegate.inputs.event_log import EventLog
from tidegate.inputs.event_log.generator import GeneratorConfig, generate
from tidegate.jobspec import JobSpec, load_spec
from tidegate.spark.pipeline.runner import run_batch

REPO = Path(__file__).resolve().parents[2]
COMMITTED_PROJECT = REPO / "expectations"


@dataclass(frozen=True)
class Fleet:
    spec: JobSpec
    output_dir: Path  # the batch reference's output directory (batch_id=0/ inside)
    rows: list  # its rows ordered by window end, then device; with start_us and end_us
    event_log: Path  # the log it read


@pytest.fixture(scope="session")
def fleet(spark, tmp_path_factory) -> Fleet:
    root = tmp_path_factory.mktemp("fleet")
    log = EventLog.create(root / "event-log", partitions=2, clock="manual")
    generate(log, GeneratorConfig(devices=4, partitions=2, events=400, seed=7, mode="backfill", rate_per_s=1.0,
                                  bursts=0, late_fraction=0.0, early_fraction=0.0, malformed_fraction=0.0))  # fmt: skip
    spec = load_spec(REPO / "jobs" / "device_fleet.yaml")
    run_batch(spark, spec, root / "event-log", root / "reference")
    output_dir = root / "reference" / "output"
    rows = (
        spark.read.parquet(str(output_dir))
        .withColumn("start_us", F.unix_micros("window_start"))
        .withColumn("end_us", F.unix_micros("window_end"))
        .orderBy("end_us", "deviceId")
        .collect()
    )
    assert len({r.end_us for r in rows}) >= 4 and len({r.deviceId for r in rows}) == 4, rows
    return Fleet(spec, output_dir, rows, root / "event-log")


@pytest.fixture
def reference(spark, fleet):
    """The batch reference as read from its directory, ``batch_id`` partition column included."""
    return spark.read.parquet(str(fleet.output_dir))


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the committed GX project: checks write results and Data Docs there, not in the repo."""
    target = tmp_path / "expectations"
    shutil.copytree(COMMITTED_PROJECT, target, ignore=shutil.ignore_patterns("uncommitted"))
    return target
