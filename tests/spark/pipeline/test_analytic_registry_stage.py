"""A function registered through the registry alone runs in the analytic stage: the golden
transcript's events, one batch and one event per micro-batch (a new driver half way), give
the core's values, typed as the function declares."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from support import SEEN_CALL, SEEN_GOLDEN, TRANSCRIPTS
from tidegate.eventtime.durations import parse_time_us
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine

pytestmark = pytest.mark.spark
GOLDEN = yaml.safe_load((TRANSCRIPTS / "analytics_golden.yaml").read_text())
RAW = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
DAY = 86_400_000_000


def rows():
    """The transcript's events as the log holds them (an arrival time of their own where given)."""
    out, next_offset = [], {}
    for time, partition, device, temperature, *arrived in GOLDEN["events"]:
        at = f"{GOLDEN['date']}T{time}:00Z"
        arrival = f"{GOLDEN['date']}T{arrived[0]}Z" if arrived else at
        offset = next_offset[partition] = next_offset.get(partition, -1) + 1
        out.append(
            (
                partition,
                offset,
                parse_time_us(arrival),
                device,
                json.dumps({"device": device, "eventTime": at, "temperature": temperature}),
            )
        )
    return out


@pytest.mark.parametrize("per_event", [False, True], ids=["one-batch", "per-event"])
def test_a_registered_function_runs_in_the_stage(spark, tmp_path, seen, per_event):
    spec = parse_spec(
        {
            "name": "registry",
            "version": 1,
            "payload": {"device": "string", "eventTime": "string", "temperature": "double"},
            "timestamp_by": "eventTime",
            "over": "device",
            "analytics": {"n_recent": SEEN_CALL},
        }
    )
    events = rows()
    clocks = np.maximum.accumulate([r[2] for r in events])  # the broker's clock never goes back
    batches = [([r], int(c)) for r, c in zip(events, clocks, strict=True)] if per_event else [(events, int(clocks[-1]))]
    batches.append(([], max(r[2] for r in events) + DAY))
    engine = Engine(spark, spec, JobPaths(tmp_path), [0, 1])
    for batch_id, (batch, clock) in enumerate(batches):
        if batch_id == len(batches) // 2 and len(batches) > 2:
            engine = Engine(spark, spec, JobPaths(tmp_path), [0, 1])
        raw = spark.createDataFrame(batch, RAW).select(
            "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload"
        )
        engine.process_batch(raw, batch_id, clock)
    out = spark.read.parquet(str(engine.paths.output))
    assert out.schema["n_recent"].dataType == LongType()
    got = [r["n_recent"] for r in out.orderBy("system_time", "partition", "offset").collect()]
    assert got == SEEN_GOLDEN
