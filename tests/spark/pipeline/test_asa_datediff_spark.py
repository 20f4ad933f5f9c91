"""DATEDIFF(unit, a, b) in a spec counts unit boundaries crossed, as in Stream Analytics —
``DATEDIFF(minute, '12:00:59', '12:01:00')`` is 1, where Spark's whole units give 0 — in every
unit, both ways round, and through the engine alike in a stream and on the batch path."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from support import engine_output
from tidegate.eventtime.durations import parse_time_us
from tidegate.jobspec import parse_spec
from tidegate.spark.spec_columns import spec_column

pytestmark = pytest.mark.spark

CASES = [
    # (unit, a, b, Stream Analytics' count, Spark's whole units)
    ("minute", "2026-01-01 12:00:59", "2026-01-01 12:01:00", 1, 0),  # the reference's example
    ("minute", "2026-01-01 12:01:00", "2026-01-01 12:00:59", -1, 0),  # the other way round
    ("minute", "2026-01-01 12:00:00", "2026-01-01 12:02:00", 2, 2),  # on the boundaries: the same
    ("second", "2026-01-01 12:00:00.999", "2026-01-01 12:00:01.001", 1, 0),
    ("hour", "2026-01-01 11:59:00", "2026-01-01 13:00:00", 2, 1),
    ("day", "2026-01-01 23:59:59", "2026-01-02 00:00:00", 1, 0),
    ("week", "2026-01-03 23:00:00", "2026-01-04 01:00:00", 1, 0),  # Saturday → Sunday: a new week
    ("week", "2026-01-04 01:00:00", "2026-01-05 01:00:00", 0, 0),  # Sunday → Monday: the same week
    ("month", "2026-01-31 00:00:00", "2026-02-01 00:00:00", 1, 0),
    ("year", "2025-12-31 23:59:59", "2026-01-01 00:00:00", 1, 0),
    ("millisecond", "2026-01-01 12:00:00.0009", "2026-01-01 12:00:00.0011", 1, 0),
]


def test_datediff_counts_the_boundaries_crossed_where_spark_counts_whole_units(spark):
    row = spark.range(1)
    for unit, a, b, asa, whole in CASES:
        args = f"TIMESTAMP'{a}', TIMESTAMP'{b}'"
        got = row.select(spec_column(f"DATEDIFF({unit}, {args})"), F.expr(f"datediff({unit}, {args})")).first()
        assert tuple(got) == (asa, whole), (unit, a, b)


def test_a_job_reading_datediff_gives_the_same_counts_in_a_stream_and_on_the_batch_path(spark, tmp_path):
    spec = parse_spec({
        "name": "diffs", "version": 1,
        "payload": {"id": "string", "sent": "timestamp", "seen": "timestamp"},
        "timestamp_by": "seen",
        "select": {"id": "id", "minutes": "DATEDIFF(minute, sent, seen)", "hours": "datediff(hour, sent, seen)"},
    })  # fmt: skip
    events = [("a", "12:00:59", "12:01:00"), ("b", "12:00:00", "12:02:00"), ("c", "11:59:00", "13:00:30")]
    raw = [(0, n, parse_time_us(f"2026-01-01T{seen}Z"), None,
            json.dumps({"id": i, "sent": f"2026-01-01T{sent}Z", "seen": f"2026-01-01T{seen}Z"}))
           for n, (i, sent, seen) in enumerate(events)]  # fmt: skip

    def run(root, batches):
        return engine_output(spark, spec, root, batches, "id", "minutes", "hours")

    batch = run(tmp_path / "batch", [raw])
    assert batch == [("a", 1, 0), ("b", 2, 0), ("c", 61, 2)]  # 11:59:00 → 13:00:30: 61 minute and 2 hour boundaries
    assert run(tmp_path / "stream", [[r] for r in raw]) == batch
