"""The temporal join through the engine: the golden transcript in one batch and in several
(a new driver half way), and the example job's stream equal to the batch path, across a
restart, random micro-batch sizes and a replay from ``T − L``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from platform_support import fill_orders
from support import (
    TRANSCRIPTS,
    assert_stream_is_the_batch_path_and_a_replay_its_tail,
    join_transcript_cuts,
    run_join_transcript,
)
from tidegate.eventtime.durations import parse_time_us
from tidegate.jobspec import load_spec, parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine
from tidegate.spark.pipeline.runner import run_stream

pytestmark = pytest.mark.spark
GOLDEN = yaml.safe_load((TRANSCRIPTS / "join_golden.yaml").read_text())
RAW = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
REPO = Path(__file__).resolve().parents[3]
MIN = 60_000_000


def golden_spec():
    lo, hi = GOLDEN["bound"]
    job = load_spec(REPO / "jobs" / "order_payments.yaml").to_dict()
    return parse_spec(
        job
        | {
            "payload": {"kind": "string", "orderId": "string", "eventTime": "string"},
            "join": job["join"] | {"within": f"DATEDIFF(minute, orders, payments) BETWEEN {lo} AND {hi}"},
            "select": {"left_id": "orders.id", "right_id": "payments.id"},
        }
        | {"payload": {"kind": "string", "orderId": "string", "id": "string", "eventTime": "string"}}
    )


def golden_rows():
    """The transcript's events as the log holds them: per partition in row order (on time)."""
    rows, next_offset = [], {}
    for event_id, side, order, time, partition in GOLDEN["events"]:
        at = f"{GOLDEN['date']}T{time}:00Z"
        offset = next_offset.get(partition, 0)
        next_offset[partition] = offset + 1
        payload = {"kind": "order" if side == "left" else "payment", "orderId": order, "id": event_id, "eventTime": at}
        rows.append((partition, offset, parse_time_us(at), None, json.dumps(payload)))
    return rows


def run_engine(spark, root, batches):
    rows, reports = run_join_transcript(
        spark, lambda: Engine(spark, golden_spec(), JobPaths(root), [0, 1]), batches, RAW
    )
    if len(batches) == 1:  # semantics §5: the metrics show each input, per log partition
        counts = reports[0].counts
        assert {p: counts[p]["inputs"] for p in (0, 1)} == {
            0: {"orders": 5, "payments": 1},
            1: {"orders": 0, "payments": 6},
        }
    return rows


def test_the_engine_gives_the_golden_transcripts_rows_in_one_batch_and_in_several(spark, tmp_path):
    """In one batch, and in the transcript's micro-batches with a new driver for the last two."""
    expected = [[left, right, time] for left, right, time in GOLDEN["left_rows"]]
    for name, batches in join_transcript_cuts(golden_rows(), GOLDEN).items():
        assert run_engine(spark, tmp_path / name, batches) == expected, name


def test_the_stream_across_a_restart_and_a_replay_from_t_minus_lookback_equal_the_batch_path(spark, tmp_path):
    spec = load_spec(REPO / "jobs" / "order_payments.yaml")
    event_log = tmp_path / "event-log"
    start = parse_time_us("2026-01-01T00:00:00Z")
    last = fill_orders(event_log, 120, seed=3, start_us=start)
    first = run_stream(spark, spec, event_log, tmp_path / "run", extra_options={"maxEventsPerBatch": "70"})
    last = fill_orders(event_log, 120, seed=4, start_us=last + 1_000_000)
    second = run_stream(spark, spec, event_log, tmp_path / "run", extra_options={"maxEventsPerBatch": "110"})
    assert first.batches + second.batches >= 4
    reference = assert_stream_is_the_batch_path_and_a_replay_its_tail(spark, spec, event_log, tmp_path, last - 40 * MIN)
    assert reference.where("paid IS NULL").count() > 5  # unpaid orders
    assert reference.where("paid IS NOT NULL").count() > 50
