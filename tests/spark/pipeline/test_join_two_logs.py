"""A join of inputs that read their own logs, through the engine: the golden transcript with
orders and payments in two logs (their own fields and time formats), each input judged by its
own policy, and the example job's stream across a restart equal to the batch path and to a
replay from ``T − L``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from pyspark.sql import functions as F

from platform_support import fill_two_logs
from support import (
    TRANSCRIPTS,
    assert_stream_is_the_batch_path_and_a_replay_its_tail,
    join_transcript_cuts,
    run_join_transcript,
)
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.inputs.log_set import InputLayout, LogSet
from tidegate.jobspec import load_spec, parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine
from tidegate.spark.pipeline.runner import run_stream

pytestmark = pytest.mark.spark
GOLDEN = yaml.safe_load((TRANSCRIPTS / "join_golden.yaml").read_text())
REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "jobs" / "orders_payments_two_logs.yaml"
RAW = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
MIN = 60_000_000
LAYOUT = InputLayout(("orders", "payments"), (1, 2))  # the orders' one partition, then the payments' two


def golden_spec():
    job = load_spec(EXAMPLE).to_dict()
    job["inputs"]["orders"]["payload"] |= {"id": "string"}
    job["inputs"]["payments"]["payload"] |= {"id": "string"}
    return parse_spec(job | {"select": {"left_id": "orders.id", "right_id": "payments.id"}})


def golden_rows():
    """The transcript's events in two logs: orders in the orders' log, payments in the
    payments' (its partition 1 holds the transcript's partition-1 payments: job partition 2)."""
    rows, next_offset = [], {}
    for event_id, side, order, at, partition in GOLDEN["events"]:
        t = parse_time_us(f"{GOLDEN['date']}T{at}:00Z")
        if side == "left":
            job_partition = 0
            payload = {"orderId": order, "id": event_id, "orderedAt": format_time_us(t), "amount": 1.0}
        else:
            job_partition = 1 + partition  # transcript partition 0 → payments' 0, 1 → payments' 1
            payload = {
                "orderId": order,
                "id": event_id,
                "paid": 1.0,
                "paidAt": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t // 1_000_000)),
            }
        offset = next_offset[job_partition] = next_offset.get(job_partition, -1) + 1
        rows.append((job_partition, offset, t, None, json.dumps(payload)))
    return rows


def run_engine(spark, root, batches):
    rows, reports = run_join_transcript(
        spark, lambda: Engine(spark, golden_spec(), JobPaths(root), [0, 1, 2], layout=LAYOUT), batches, RAW
    )
    if len(batches) == 1:  # the metrics show each input, per partition: each input has its own
        counts = reports[0].counts
        assert {p: counts[p]["inputs"] for p in (0, 1, 2)} == {
            0: {"orders": 5, "payments": 0},
            1: {"orders": 0, "payments": 1},
            2: {"orders": 0, "payments": 6},
        }
    return rows


def test_the_golden_transcript_from_two_logs_in_one_batch_and_in_several(spark, tmp_path):
    """In one batch, in the transcript's micro-batches (a new driver half way) and cut at random."""
    expected = [[left, right, t] for left, right, t in GOLDEN["left_rows"]]
    for name, batches in join_transcript_cuts(golden_rows(), GOLDEN, random_cuts=1).items():
        assert run_engine(spark, tmp_path / name, batches) == expected, name


def test_each_input_is_judged_by_its_own_policy_and_the_stream_equals_the_batch_path(spark, tmp_path):
    spec = load_spec(EXAMPLE)
    event_logs = LogSet((("orders", tmp_path / "orders"), ("payments", tmp_path / "payments")))
    start = parse_time_us("2026-01-01T00:00:00Z")
    last = fill_two_logs(tmp_path / "orders", tmp_path / "payments", 120, seed=3, start_us=start)
    first = run_stream(spark, spec, event_logs, tmp_path / "run", extra_options={"maxEventsPerBatch": "70"})
    last = fill_two_logs(tmp_path / "orders", tmp_path / "payments", 120, seed=4, start_us=last + 1_000_000)
    second = run_stream(spark, spec, event_logs, tmp_path / "run", extra_options={"maxEventsPerBatch": "110"})
    assert first.batches + second.batches >= 4
    assert first.quarantined + second.quarantined > 0  # the odd payment that is not JSON, kept aside

    audit = (
        spark.read.parquet(str(tmp_path / "run" / "audit"))
        .select("partition", "reason", (F.unix_micros("arrival_time") - F.unix_micros("event_time")).alias("lag"))
        .collect()
    )
    for partition, tolerance in ((0, 2 * MIN), (1, 2 * MIN), (2, MIN // 2)):  # orders' 2m, payments' 30s
        mine = [r for r in audit if r.partition == partition]
        assert mine and all(("late" in r.reason) == (r.lag > tolerance) for r in mine), partition
    assert any("late" in r.reason for r in audit if r.partition == 2)
    assert any(MIN // 2 < r.lag <= 2 * MIN for r in audit if r.partition < 2)  # late for a payment, not an order

    reference = assert_stream_is_the_batch_path_and_a_replay_its_tail(
        spark, spec, event_logs, tmp_path, last - 40 * MIN
    )
    assert reference.where("paid IS NULL").count() > 5 and reference.where("paid IS NOT NULL").count() > 50
    assert reference.where("right_partition = 2").count() == reference.where("paid IS NOT NULL").count()
