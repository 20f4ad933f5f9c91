"""``timestamp_by`` as an expression (Stream Analytics' ``TIMESTAMP BY expression``) through the engine:
epoch milliseconds with DATEADD give semantics §2's golden audit, and a stream cut one event per
micro-batch (a new driver half way) emits what one batch — the batch path — emits; CASE over two
fields, nested fields and casts give each event its time, and a NULL time is a missing one
(semantics §9), with both readers of the payload document."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from support import load_golden
from tidegate.errors import ConfigError
from tidegate.eventtime.durations import parse_time_us
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine
from tidegate.spark.pipeline.parse import (
    MISSING_EVENT_TIME,
    UNPARSEABLE_EVENT_TIME,
    UNPARSEABLE_PAYLOAD,
    EventShape,
    parse_shapes,
)

pytestmark = pytest.mark.spark
GOLDEN = load_golden()
RAW = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
EPOCH_MS = "DATEADD(millisecond, epochMs, '1970-01-01T00:00:00Z')"
T0 = parse_time_us("2026-01-01T12:00:00Z")


def golden_spec(timestamp_by: str = EPOCH_MS):
    return parse_spec(
        {
            "name": "epoch-golden",
            "version": 1,
            "payload": {"device": "string", "epochMs": "bigint"},
            "timestamp_by": timestamp_by,
            "policy": {"out_of_order_tolerance": "2m", "late_arrival_tolerance": "5m"},
            "window": {"kind": "tumbling", "size": "5m"},
            "group_by": ["device"],
            "aggregates": {"events": "count(*)", "first_ms": "min(epochMs)"},
        }
    )


def golden_rows():
    """The golden case's events with their times as epoch milliseconds."""
    out = []
    for offset, (event, arrival, device) in enumerate(GOLDEN.events):
        epoch_ms = parse_time_us(f"{GOLDEN.date}T{event}:00Z") // 1000
        out.append((0, offset, parse_time_us(f"{GOLDEN.date}T{arrival}:00Z"), device,
                    json.dumps({"device": device, "epochMs": epoch_ms})))  # fmt: skip
    return out


def raw(spark, batch):
    return spark.createDataFrame(batch, RAW).select(
        "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload"
    )


def run(spark, spec, root, batches, end_clock=None):
    """``batches`` through the engine, each closed at its last arrival (the last at ``end_clock``
    when given); a new engine (driver) takes over half way. (audit, output) in order."""
    engine = Engine(spark, spec, JobPaths(root), [0])
    for batch_id, batch in enumerate(batches):
        if batch_id == len(batches) // 2 and len(batches) > 1:
            engine = Engine(spark, spec, JobPaths(root), [0])
        last = batch_id == len(batches) - 1
        engine.process_batch(raw(spark, batch), batch_id, end_clock if last and end_clock else max(r[2] for r in batch))
    audit = spark.read.parquet(str(engine.paths.audit)).orderBy("offset")
    audit_rows = [
        (r["action"], r["reason"] or "", r["system_time"], r["watermark"])
        for r in audit.select(
            "action",
            "reason",
            F.date_format("system_time", "HH:mm").alias("system_time"),
            F.date_format("watermark", "HH:mm").alias("watermark"),
        ).collect()
    ]
    output = spark.read.parquet(str(engine.paths.output))
    out_rows = sorted(tuple(r) for r in output.select("window_end", "device", "events", "first_ms").collect())
    return audit_rows, out_rows


def test_epoch_milliseconds_through_dateadd_give_the_golden_audit_and_the_stream_equals_the_batch_path(spark, tmp_path):
    spec = golden_spec()
    (variant,) = [v for v in GOLDEN.variants if not v.over and v.policy.early_arrival_window_us is not None]
    expected = [(action, reason, system or None, watermark) for action, reason, system, watermark in variant.expect]
    end = parse_time_us(f"{GOLDEN.date}T13:00:00Z")  # every window final
    batch_audit, batch_output = run(spark, spec, tmp_path / "batch", [golden_rows()], end)
    stream_audit, stream_output = run(spark, spec, tmp_path / "stream", [[r] for r in golden_rows()], end)
    assert batch_audit == expected
    assert stream_audit == batch_audit
    assert batch_output and stream_output == batch_output


def shape_rows(spark, payloads):
    return raw(spark, [(0, i, T0, None, p) for i, p in enumerate(payloads)])


def judged(spark, shapes, payloads, on_jvm):
    parsed = parse_shapes(shape_rows(spark, payloads), shapes, on_jvm=on_jvm)
    rows = parsed.judged.orderBy("offset").select("_reason", F.date_format("event_time", "HH:mm:ss")).collect()
    return [(r[0], r[1]) if r[0] is None else (r[0], None) for r in rows]


READERS = pytest.mark.parametrize("on_jvm", [False, True], ids=["from_json", "jvm"])


@READERS
def test_case_over_two_fields_nested_fields_and_casts_give_each_event_its_time(spark, on_jvm):
    payloads = [
        '{"deviceTime": "2026-01-01T12:00:01Z", "gatewayTime": "2026-01-01T12:00:09Z"}',
        '{"gatewayTime": "2026-01-01T12:00:02Z"}',  # no device time: the gateway's
        "{}",  # neither: a NULL time is a missing one
        '{"deviceTime": "soon"}',  # text that does not parse
    ]
    case = "CASE WHEN deviceTime IS NOT NULL THEN deviceTime ELSE gatewayTime END"
    shape = EventShape({"deviceTime": "string", "gatewayTime": "string"}, case)
    assert judged(spark, [shape], payloads, on_jvm) == [
        (None, "12:00:01"), (None, "12:00:02"), (MISSING_EVENT_TIME, None), (UNPARSEABLE_EVENT_TIME, None),
    ]  # fmt: skip
    nested = [
        '{"id": "a", "reading": {"time": "2026-01-01T12:00:03Z", "value": 1}}',
        '{"id": "b", "reading": {"value": 2}}',
        '{"id": "c", "reading": "not an object"}',  # the document cannot be read as the job reads it
    ]
    for expression in ("reading.time", "try_cast(reading.time AS timestamp)"):
        shape = EventShape({"id": "string"}, expression)
        assert judged(spark, [shape], nested, on_jvm) == [
            (None, "12:00:03"), (MISSING_EVENT_TIME, None), (UNPARSEABLE_PAYLOAD, None),
        ], expression  # fmt: skip
    seconds = EventShape({"epoch": "double"}, "DATEADD(second, CAST(epoch AS bigint), '1970-01-01T00:00:00Z')")
    assert judged(spark, [seconds], ['{"epoch": 1767268805}', '{"epoch": null}'], on_jvm) == [
        (None, "12:00:05"), (MISSING_EVENT_TIME, None),
    ]  # fmt: skip


@READERS
def test_no_events_values_can_fail_the_batch_a_bad_cast_or_an_overflowing_dateadd_is_a_missing_time(spark, on_jvm):
    # Spark runs ANSI SQL: CAST('soon' AS timestamp) and DATEADD past its range raise, for the whole batch
    cast = EventShape({"t": "string"}, "CAST(t AS timestamp)")
    assert judged(spark, [cast], ['{"t": "2026-01-01T12:00:04Z"}', '{"t": "soon"}'], on_jvm) == [
        (None, "12:00:04"), (MISSING_EVENT_TIME, None),
    ]  # fmt: skip
    epoch = EventShape({"epochMs": "bigint", "base": "string"}, "DATEADD(millisecond, epochMs, base)")
    payloads = [
        json.dumps({"epochMs": 4000, "base": "2026-01-01T12:00:00Z"}),
        json.dumps({"epochMs": 9_223_372_036_854_775_807, "base": "2026-01-01T12:00:00Z"}),  # past year 294,000
        json.dumps({"epochMs": 1, "base": "not a time"}),
    ]
    assert judged(spark, [epoch], payloads, on_jvm) == [
        (None, "12:00:04"), (MISSING_EVENT_TIME, None), (MISSING_EVENT_TIME, None),
    ]  # fmt: skip


@READERS
def test_inputs_with_their_own_logs_each_take_their_own_event_time(spark, on_jvm):
    shapes = [
        EventShape({"orderId": "string", "orderedMs": "bigint"}, EPOCH_MS.replace("epochMs", "orderedMs"),
                   rows=F.col("partition") == 0),
        EventShape({"orderId": "string", "paidAt": "string"}, "paidAt", rows=F.col("partition") == 1),
    ]  # fmt: skip
    batch = [
        (0, 0, T0, None, json.dumps({"orderId": "o1", "orderedMs": T0 // 1000 + 7000})),
        (1, 0, T0, None, json.dumps({"orderId": "o1", "paidAt": "2026-01-01T12:00:11Z"})),
    ]
    parsed = parse_shapes(raw(spark, batch), shapes, on_jvm=on_jvm)
    rows = parsed.judged.orderBy("partition").select("_reason", F.date_format("event_time", "HH:mm:ss")).collect()
    assert [tuple(r) for r in rows] == [(None, "12:00:07"), (None, "12:00:11")]


def test_an_expression_that_gives_no_time_is_refused_before_the_query_starts(spark, tmp_path):
    with pytest.raises(ConfigError, match=r"timestamp_by: 'epochMs \+ 1' gives a bigint, not a time.*DATEADD"):
        Engine(spark, golden_spec("epochMs + 1"), JobPaths(tmp_path), [0])
