"""Parts per (window, group) give the rows the event buffer gives, however the stream is cut.

Which aggregates merge is a pure question (no Spark): a table of specs, one comment per
row. The engine with parts is then held to the engine with an event buffer — the path
every window kind has, which tests/spark/pipeline/test_engine.py holds to the core — on a
stream with doubles, NULLs, late and early events and an idle partition, cut into random
micro-batches with a restart and a re-run batch; and a lineage whose last state version
was written with an event buffer goes on with parts.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from pyspark.sql import functions as F

from support import random_stream
from tidegate.eventtime.durations import format_time_us
from tidegate.eventtime.windows import HoppingWindow, SessionWindow, SlidingWindow, TumblingWindow
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine
from tidegate.spark.pipeline.window_partials import FRAME, partials_for
from tidegate.spark.tools.compare import compare

MIN = 60_000_000
PAYLOAD = {
    "deviceId": "string",
    "eventTime": "string",
    "value": "double",
    "n": "int",
    "price": "decimal(10,2)",
    "label": "string",
}
TUMBLING = TumblingWindow(size_us=MIN)


@pytest.mark.parametrize(
    "window, aggregates, functions",
    [
        # the bench's and the demo's aggregates: all merge
        (TUMBLING, {"readings": "count(*)", "total": "sum(value)"}, ["count", "sum"]),
        (TUMBLING, {"r": "count(*)", "avg_t": "avg(value)", "max_t": "max(value)"}, ["count", "avg", "max"]),
        # count of a column counts its non-NULL values; min/max of any type; sums of int
        (
            HoppingWindow(size_us=2 * MIN, hop_us=MIN),
            {"c": "COUNT(label)", "lo": "min(label)", "s": "sum(n)"},
            ["count", "min", "sum"],
        ),
        # the position columns every buffered event has
        (TUMBLING, {"first": "min(offset)", "parts": "max(partition)"}, ["min", "max"]),
        # an aggregate that is not one call of a mergeable function: events are kept
        (TUMBLING, {"r": "count(*)", "p95": "approx_percentile(value, 0.95)"}, None),
        (TUMBLING, {"d": "count(DISTINCT deviceId)"}, None),
        (TUMBLING, {"s": "sum(value * 2)"}, None),
        # a sum of sums of decimals would widen the type: events are kept
        (TUMBLING, {"s": "sum(price)"}, None),
        (TUMBLING, {"a": "avg(label)"}, None),
        # windows whose membership depends on neighbours keep events
        (SlidingWindow(size_us=MIN), {"r": "count(*)"}, None),
        (SessionWindow(gap_us=MIN, max_duration_us=5 * MIN), {"r": "count(*)"}, None),
    ],
)
def test_which_aggregates_merge(window, aggregates, functions):
    got = partials_for(window, list(aggregates.items()), PAYLOAD)
    assert (None if got is None else [p.function for p in got]) == functions
    if got is not None:
        assert [p.name for p in got] == list(aggregates)


PARTITIONS = 3  # the last one stays idle
RAW = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
AGGREGATES = {
    "events": "count(*)",
    "valued": "count(value)",
    "total": "sum(value)",
    "mean": "avg(value)",
    "low": "min(value)",
    "high": "max(value)",
    "first_offset": "min(offset)",
}
CASES = {  # window, over, emit_after (minutes after the stream's first arrival)
    "tumbling-over": ({"kind": "tumbling", "size": "1m"}, True, None),
    "hopping-emit-after": ({"kind": "hopping", "size": "3m", "hop": "1m"}, False, 4),
    "tumbling-start-inclusive": (
        {"kind": "tumbling", "size": "1m", "offset": "-10s", "edges": "start_inclusive"},
        True,
        None,
    ),
}


def spec_for(window: dict, over: bool):
    return parse_spec(
        {
            "name": "partials-test",
            "version": 1,
            "payload": {"deviceId": "string", "eventTime": "string", "value": "double"},
            "timestamp_by": "eventTime",
            "over": "deviceId" if over else None,
            "policy": {"out_of_order_tolerance": "10s", "late_arrival_tolerance": "1m"},
            "window": window,
            "group_by": ["deviceId"],
            "aggregates": AGGREGATES,
        }
    )


def make_rows(seed: int):
    s = random_stream(seed, n=900, partitions=PARTITIONS, keys=5, idle=1)
    values = np.random.default_rng(seed).normal(20.0, 7.0, len(s.key))
    rows = []
    for p in range(PARTITIONS):
        for off, i in enumerate(s.of_partition(p)):
            payload = {"deviceId": s.key[i], "eventTime": format_time_us(int(s.event_us[i]))}
            if i % 7:  # every seventh reading has no value: NULL, skipped by all but count(*)
                payload["value"] = float(values[i])
            rows.append((p, off, int(s.arrival_us[i]), s.key[i], json.dumps(payload)))
    return s, rows


def run(
    spark,
    spec,
    rows,
    root,
    cuts,
    final_clock,
    *,
    parts=True,
    emit_after_us=None,
    restart_at=None,
    rerun=None,
    parts_from=0,
):
    """Micro-batches by arrival time (batch i: arrivals in [cut_{i-1}, cut_i), clock cut_i).
    Batches before ``parts_from`` run with an event buffer."""

    def engine(batch_id: int) -> Engine:
        e = Engine(spark, spec, JobPaths(root), list(range(PARTITIONS)), emit_after_us=emit_after_us)
        if not parts or batch_id < parts_from:
            e.stage.partials = None
        return e

    current = engine(0)
    bounds = [*cuts, final_clock]
    lo = -(1 << 62)
    for batch_id, hi in enumerate(bounds):
        part = [r for r in rows if lo <= r[2] < hi]
        if batch_id in (restart_at, parts_from):  # a new driver: from the committed state
            current = engine(batch_id)
        raw = spark.createDataFrame(part, RAW).select(
            "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload"
        )
        current.process_batch(raw, batch_id, hi)
        if rerun == batch_id:  # the same batch again, as after a crash before Spark's commit
            current.process_batch(raw, batch_id, hi)
        lo = hi
    return current


@pytest.mark.spark
@pytest.mark.parametrize("case", list(CASES))
def test_parts_give_the_rows_the_event_buffer_gives_whatever_the_cuts(spark, tmp_path, case):
    window, over, after_min = CASES[case]
    spec = spec_for(window, over)
    seed = sorted(CASES).index(case) + 11
    stream, rows = make_rows(seed)
    final_clock = int(stream.arrival_us.max()) + 1
    emit_after = None if after_min is None else int(stream.arrival_us.min()) + after_min * MIN
    reference = run(spark, spec, rows, tmp_path / "events", [], final_clock, parts=False, emit_after_us=emit_after)

    rng = np.random.default_rng(seed)  # recorded: the cuts are a function of the case
    cuts = sorted(rng.integers(int(stream.arrival_us.min()), final_clock, 4).tolist())
    cut = run(spark, spec, rows, tmp_path / "parts", cuts, final_clock, emit_after_us=emit_after, restart_at=2, rerun=3)

    expected = spark.read.parquet(str(reference.paths.output))
    got = spark.read.parquet(str(cut.paths.output))
    assert expected.count() >= 20  # dozens of windows, after the emit_after cut too
    assert expected.where("valued < events").count() > 0  # NULL values were there to skip
    assert compare(expected, got).equal
    last = cut.store.latest_before(len(cuts) + 1)
    assert cut.store.path(last, FRAME).exists() and not cut.store.path(last, "buffer").exists()


@pytest.mark.spark
def test_a_lineage_whose_state_holds_events_goes_on_with_parts(spark, tmp_path):
    spec = spec_for(*CASES["tumbling-over"][:2])
    stream, rows = make_rows(5)
    final_clock = int(stream.arrival_us.max()) + 1
    cuts = sorted(np.random.default_rng(5).integers(int(stream.arrival_us.min()), final_clock, 3).tolist())
    events = run(spark, spec, rows, tmp_path / "events", cuts, final_clock, parts=False)
    upgraded = run(spark, spec, rows, tmp_path / "upgraded", cuts, final_clock, parts_from=2)

    last = len(cuts)
    assert events.store.path(last, "buffer").exists()  # batches 0 and 1 of the upgraded lineage kept events
    assert upgraded.store.path(last, FRAME).exists() and not upgraded.store.path(last, "buffer").exists()
    assert compare(spark.read.parquet(str(events.paths.output)), spark.read.parquet(str(upgraded.paths.output))).equal


@pytest.mark.parametrize("per_key", [False, True])
@pytest.mark.parametrize("close_delay", [1, 0], ids=["end-inclusive", "start-inclusive"])
def test_the_step_on_the_driver_gives_the_rows_and_types_of_the_step_in_spark(spark, per_key, close_delay):
    """The engine steps merged parts on the driver (their frontier comes with the policy
    stage's states); what it writes must be what the Spark step writes, to the type."""
    from tidegate.spark.pipeline.sink.files import HOUR_KEY, batch_columns, hour_columns, with_batch_id
    from tidegate.spark.pipeline.window_partials import (
        emitted_rows,
        merge_step,
        merged_parts,
        output_column,
        step_on_driver,
        still_open,
        with_output_columns,
    )

    partials = partials_for(TUMBLING, [("r", "count(*)"), ("avg_v", "avg(value)"), ("hi", "max(label)")], PAYLOAD)
    rng = np.random.default_rng(7)
    units = ["a", "b", "c", None]  # "c": no frontier of its own; None: a NULL unit, with one
    rows = [
        (
            int(k) * MIN + int(rng.integers(0, MIN)),
            units[int(rng.integers(0, 4))],
            None if rng.random() < 0.2 else float(rng.normal()),
            str(rng.integers(0, 9)),
        )
        for k in rng.integers(0, 12, 400)
    ]
    events = spark.createDataFrame(rows, "system_us BIGINT, _unit STRING, value DOUBLE, label STRING").withColumn(
        "deviceId", F.col("_unit")
    )
    from tidegate.spark.pipeline.window_partials import contributions

    keys = ["deviceId", "_unit"]
    contributed = contributions(events, TUMBLING, partials, keys)
    frontiers = (3 * MIN + 5, 8 * MIN)
    key_frontiers = {"a": (2 * MIN, 6 * MIN), "b": (5 * MIN, 11 * MIN), None: (1, 9 * MIN)} if per_key else None
    unit = "_unit" if per_key else None
    emit_after = 4 * MIN
    stepped = merge_step(spark, contributed, partials, keys, frontiers, key_frontiers, unit, emit_after, close_delay)
    want_out = (
        emitted_rows(stepped, partials, ["deviceId"]).withColumns(batch_columns(9, F.col("window_end"))).toArrow()
    )
    want_keep = still_open(stepped).toArrow()
    table = with_output_columns(
        merged_parts(contributed, partials, keys),
        partials,  # as collect_merged does
        hour_columns(F.col(output_column("window_end"))),
    ).toArrow()
    table = with_batch_id(table, 9, name=output_column("batch_id"), before=output_column(HOUR_KEY))
    got_out, got_keep = step_on_driver(
        table, partials, ["deviceId"], ["batch_id", HOUR_KEY], frontiers, key_frontiers, unit, emit_after, close_delay
    )
    assert got_out.num_rows and got_keep.num_rows
    for got, want in [(got_out, want_out), (got_keep, want_keep)]:
        assert got.schema == want.schema
        order = [(c, "ascending") for c in want.column_names]
        assert got.sort_by(order).equals(want.sort_by(order))
