"""Steps through the engine: the steps transcript in one batch, in random micro-batch cuts and
across a new driver half way (a restart from the checkpoint), all with the same rows."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from pyspark.sql import functions as F
from support import TRANSCRIPTS

from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine

pytestmark = pytest.mark.spark
GOLDEN = yaml.safe_load((TRANSCRIPTS / "steps_golden.yaml").read_text())
RAW = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
DAY = 86_400_000_000
PAYLOADS = {
    "readings": {"deviceId": "string", "eventTime": "string", "temperature": "double"},
    "orders": {"kind": "string", "orderId": "string", "eventTime": "string"},
}
CASES = {c["name"]: c for c in GOLDEN["cases"]}


def case_spec(case: dict):
    return parse_spec({"name": case["name"].replace("_", "-"), "version": 1, "payload": PAYLOADS[case["events"]],
                       "timestamp_by": "eventTime", "steps": case["steps"]}
                      | ({"inputs": case["inputs"]} if "inputs" in case else {}))


def case_rows(case: dict) -> list[tuple]:
    """The case's events as one log partition holds them, on time, in the transcript's order."""
    rows = []
    for offset, (time, a, b) in enumerate(GOLDEN[case["events"]]):
        at = f"{GOLDEN['date']}T{time}:00Z"
        payload = ({"deviceId": a, "temperature": b} if case["events"] == "readings" else {"kind": a, "orderId": b})
        rows.append((0, offset, parse_time_us(at), None, json.dumps(payload | {"eventTime": at})))
    return rows


def cuts(rows: list, seed: int | None) -> list[tuple[list, int]]:
    """(rows, clock) per micro-batch: one batch closed a day later, or the log cut in 2–5 random
    places, each batch closed at its last arrival, then an empty batch a day later."""
    end = rows[-1][2] + DAY
    if seed is None:
        return [(rows, end)]
    rng = np.random.default_rng(seed)
    at = sorted(rng.choice(np.arange(1, len(rows)), int(rng.integers(2, 6)), replace=False))
    batches = [rows[a:b] for a, b in zip([0, *at], [*at, len(rows)])]
    return [(b, b[-1][2]) for b in batches] + [([], end)]


def run(spark, root, spec, batches, restart: bool = False) -> list[list]:
    """The engine over ``batches``, a new driver half way when ``restart``; the output rows
    ordered, times as HH:MM."""
    make = lambda: Engine(spark, spec, JobPaths(root), [0])  # noqa: E731
    engine = make()
    for batch_id, (batch, clock) in enumerate(batches):
        if restart and batch_id == len(batches) // 2:
            engine = make()  # a new driver resumes from the last committed state version
        raw = spark.createDataFrame(batch, RAW).select(
            "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload")
        engine.process_batch(raw, batch_id, clock)
    out = spark.read.parquet(str(engine.paths.output))
    columns = [c for c in out.columns if c not in ("window_start", "window_end", "batch_id", "date", "hour")]
    rows = out.select(F.unix_micros("window_start").alias("s"), F.unix_micros("window_end").alias("e"), *columns)
    return sorted([format_time_us(r["s"])[11:16], format_time_us(r["e"])[11:16],
                   *[int(v) if isinstance(v, float) else v for v in r[2:]]] for r in rows.collect())


@pytest.mark.parametrize("name", list(CASES))
def test_the_steps_transcript_in_one_batch(spark, tmp_path, name):
    case = CASES[name]
    assert run(spark, tmp_path, case_spec(case), cuts(case_rows(case), None)) == case["expect"]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_random_micro_batch_cuts_and_a_restart_give_the_one_batch_rows(spark, tmp_path, name):
    """Two random cuts (seeds 1, 2), the second with a new driver half way."""
    case = CASES[name]
    for seed in (1, 2):
        got = run(spark, tmp_path / str(seed), case_spec(case), cuts(case_rows(case), seed), restart=seed == 2)
        assert got == case["expect"], f"seed {seed}"


@pytest.mark.slow
def test_with_substreams_the_first_step_waits_per_key_and_later_steps_for_the_job(spark, tmp_path):
    """``over: deviceId`` with LAG partitioned by it: the analytic step emits each device's rows
    on its own watermark, the hourly step closes on the job's; the rows are the same."""
    case = CASES["analytic_filter_window"]
    spec = parse_spec(case_spec(case).to_dict() | {"over": "deviceId"})
    for seed in (1, 2):
        got = run(spark, tmp_path / str(seed), spec, cuts(case_rows(case), seed), restart=seed == 2)
        assert got == case["expect"], f"seed {seed}"
