"""The cross-apply stage: one kept event to one row per array element or record property,
each with its event's position and its own index; an event over the bound goes to quarantine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import engine_output
from tidegate.eventtime.durations import parse_time_us
from tidegate.jobspec import load_spec, parse_spec
from tidegate.jobspec.cross_apply import INDEX_COLUMN
from tidegate.spark.pipeline.cross_apply_stage import cross_applied

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[3]
T0 = parse_time_us("2026-01-01T00:00:00Z")
PAYLOAD = {"deviceId": "string", "eventTime": "string", "readings": "array<struct<sensor:string,value:double>>"}


def spec(cross_apply, **query):
    base = {"name": "batched", "version": 1, "payload": PAYLOAD, "timestamp_by": "eventTime"}
    return parse_spec(base | {"cross_apply": cross_apply} | query)


def event(offset: int, readings, device: str = "d1", at_s: int = 0) -> tuple:
    """A raw row of partition 0 (support.RAW_EVENTS), arriving when it happened."""
    payload = {
        "deviceId": device,
        "eventTime": f"2026-01-01T00:{at_s // 60:02d}:{at_s % 60:02d}Z",
        "readings": readings,
    }
    return (0, offset, T0 + at_s * 1_000_000, None, json.dumps(payload))


def test_an_event_with_three_readings_gives_three_rows_indexed_0_to_2_and_empty_or_null_none(spark):
    rows = [
        (0, 7, [("s1", 1.0), ("s2", 2.0), ("s3", 3.0)]),
        (0, 8, []),  # an empty array: no row (CROSS APPLY, not OUTER APPLY)
        (0, 9, None),  # a NULL array: no row
    ]
    kept = spark.createDataFrame(
        rows, "partition INT, offset BIGINT, readings ARRAY<STRUCT<sensor: STRING, value: DOUBLE>>"
    )
    out = cross_applied(kept, spec({"name": "a", "elements": "readings"}).cross_apply)
    got = out.select("partition", "offset", INDEX_COLUMN, "a.ArrayIndex", "a.ArrayValue.sensor", "a.ArrayValue.value")
    assert sorted(tuple(r) for r in got.collect()) == [
        (0, 7, 0, 0, "s1", 1.0),
        (0, 7, 1, 1, "s2", 2.0),
        (0, 7, 2, 2, "s3", 3.0),
    ]


def test_the_properties_of_a_record_and_of_a_map_give_name_and_value_rows_in_order(spark, tmp_path):
    payload = {"eventTime": "string", "rec": "struct<a:double,b:double>", "tags": "map<string,bigint>"}
    base = {"name": "props", "version": 1, "payload": payload, "timestamp_by": "eventTime"}
    select = {"name": "p.PropertyName", "value": "p.PropertyValue"}
    doc = {"eventTime": "2026-01-01T00:00:00Z", "rec": {"b": 2.5, "a": 1}, "tags": {"x": 3, "y": 4}}
    batch = [[(0, 0, T0, None, json.dumps(doc)), (0, 1, T0, None, json.dumps(doc | {"rec": None, "tags": {}}))]]
    by_record = parse_spec(base | {"cross_apply": {"name": "p", "properties": "rec"}, "select": select})
    assert engine_output(spark, by_record, tmp_path / "rec", batch, "offset", INDEX_COLUMN, "name", "value") == [
        (0, 0, "a", 1.0),  # a record's properties in the order the payload declares them
        (0, 1, "b", 2.5),
    ]
    by_map = parse_spec(base | {"cross_apply": {"name": "p", "properties": "tags"}, "select": select})
    assert engine_output(spark, by_map, tmp_path / "map", batch, "offset", INDEX_COLUMN, "name", "value") == [
        (0, 0, "x", 3),
        (0, 1, "y", 4),
    ]


def test_every_row_keeps_its_event_s_position_and_time_and_the_filter_reads_the_element(spark, tmp_path):
    s = spec({"name": "a", "elements": "readings"}, filter="a.ArrayValue.value > 1",
             select={"sensor": "a.ArrayValue.sensor", "i": "a.ArrayIndex"})  # fmt: skip
    batch = [[event(0, [{"sensor": "s1", "value": 1.0}, {"sensor": "s2", "value": 2.0}, {"sensor": "s3", "value": 3.0}],
                    at_s=5), event(1, [], at_s=6), event(2, None, at_s=7)]]  # fmt: skip
    got = engine_output(spark, s, tmp_path, batch, "partition", "offset", INDEX_COLUMN, "system_time", "sensor", "i")
    assert [(r[1], r[2], r[3].second, r[4], r[5]) for r in got] == [(0, 1, 5, "s2", 1), (0, 2, 5, "s3", 2)]
    audit = spark.read.parquet(str(tmp_path / "audit")).select("offset", "action").collect()
    assert sorted(r.offset for r in audit) == [0, 1, 2]  # the policy judged three events, not their rows


def test_an_event_over_the_bound_goes_to_quarantine_whole_with_the_reason_never_cut_short(spark, tmp_path):
    s = spec({"name": "a", "elements": "readings", "max_rows": 3}, select={"i": "a.ArrayIndex"})
    three, four = [{"sensor": "s", "value": 1.0}] * 3, [{"sensor": "s", "value": 1.0}] * 4
    got = engine_output(spark, s, tmp_path, [[event(0, three), event(1, four)]], "offset", "i")
    assert got == [(0, 0), (0, 1), (0, 2)]  # nothing of offset 1
    quarantine = spark.read.parquet(str(tmp_path / "quarantine")).select("offset", "reason").collect()
    assert [tuple(r) for r in quarantine] == [
        (1, "too_many_rows: readings has 4 elements, more than cross_apply.max_rows 3")
    ]


def test_the_example_job_aggregates_its_sample_s_readings_per_device_sensor_and_minute(spark, tmp_path):
    job = load_spec(REPO / "jobs" / "batched_readings.yaml")
    lines = (REPO / "jobs" / "samples" / "batched_readings.jsonl").read_text().splitlines()
    arrivals = [parse_time_us(json.loads(line)["eventTime"]) + 1_000_000 for line in lines]  # a second after each
    batch = [(0, i, at, None, line) for i, (at, line) in enumerate(zip(arrivals, lines, strict=True))]
    got = engine_output(spark, job, tmp_path, [batch], "deviceId", "sensor", "window_end", "readings", "avg_value")
    assert [(d, s, end.strftime("%H:%M"), n, v) for d, s, end, n, v in got] == [
        ("dev-1", "hum", "12:01", 1, 40.0),
        ("dev-1", "hum", "12:02", 1, 41.0),
        ("dev-1", "temp", "12:01", 2, 21.25),
        ("dev-1", "temp", "12:02", 1, 22.0),
        ("dev-1", "temp", "12:03", 1, 22.5),  # 12:03:00 ends (12:02, 12:03] (semantics §3)
        ("dev-2", "hum", "12:02", 1, 50.0),
        ("dev-2", "temp", "12:01", 1, 24.0),
        ("dev-2", "temp", "12:02", 1, 24.5),
    ]
