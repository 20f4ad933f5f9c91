"""What a batch reports (tidegate.spark.pipeline.sink.metrics): the record of
``metrics/batch_id=N.json`` field for field, and semantics §4's stage watermarks — without Spark."""

from __future__ import annotations

import pytest

from tidegate.eventtime.policy import NONE
from tidegate.jobspec import parse_spec
from tidegate.spark.pipeline.sink.metrics import BatchReport, stage_watermarks, substream_summary

MIN = 60_000_000


def report(**changes) -> BatchReport:
    fields = dict(
        job="fleet", version=3, batch_id=7, input_events=12, quarantined=2, rows_emitted=4,
        job_watermark_us=10 * MIN, clock_us=12 * MIN, counts={1: {"judged": 4}, 0: {"judged": 6}},
        seconds=1.23456, processed_at_us=13 * MIN, last_output_us=9 * MIN, stages={"policy": {}},
        phase_seconds={"policy": 0.40049, "writes": 0.2}, write_seconds={"output": 0.1},
        next_close_in_us=30 * 1_000_000,
    )  # fmt: skip
    return BatchReport(**(fields | changes))


def spec(window: dict | None):
    return parse_spec({
        "name": "metrics-test", "version": 1,
        "payload": {"deviceId": "string", "eventTime": "string"}, "timestamp_by": "eventTime",
        "policy": {"out_of_order_tolerance": "10s", "late_arrival_tolerance": "1m"},
        **({"window": window, "group_by": ["deviceId"], "aggregates": {"events": "count(*)"}} if window else {}),
    })  # fmt: skip


def test_the_record_is_what_the_metrics_file_holds_field_for_field():
    record = report().record()
    assert record == {
        "job": "fleet", "version": 3, "batch_id": 7, "processed_at_us": 13 * MIN,
        "input_events": 12, "quarantined": 2, "rows_emitted": 4,
        "job_watermark_us": 10 * MIN, "watermark_delay_us": 3 * MIN,  # processed at 13m, watermark 10m
        "processing_time_watermark_us": 12 * MIN, "processing_time_lag_us": 1 * MIN,
        "partitions": {"0": {"judged": 6}, "1": {"judged": 4}},
        "last_output_us": 9 * MIN, "stages": {"policy": {}}, "substreams": None,
        "batch_seconds": 1.235, "phase_seconds": {"policy": 0.4, "writes": 0.2}, "write_seconds": {"output": 0.1},
        "next_close_in_us": 30 * 1_000_000,
    }  # fmt: skip
    assert list(record["partitions"]) == ["0", "1"]  # in partition order


def test_before_any_watermark_there_is_no_delay_and_without_a_clock_no_lag():
    r = report(job_watermark_us=NONE, clock_us=None)
    assert (r.watermark_us, r.watermark_delay_us, r.processing_time_lag_us) == (None, None, None)
    record = r.record()
    assert (record["job_watermark_us"], record["watermark_delay_us"]) == (None, None)
    assert (record["processing_time_watermark_us"], record["processing_time_lag_us"]) == (None, None)


#   broker clock 12m, late tolerance 1m  → the policy stage's input watermark is 11m
#   job watermark 10m                     → its output; the window stage's input
#   the window stage still buffers an event of system time 8m → its output stops there
@pytest.mark.parametrize("window, buffered_from, expected", [
    ({"kind": "tumbling", "size": "1m"}, 8 * MIN, {
        "policy": {"input_watermark_us": 11 * MIN, "output_watermark_us": 10 * MIN, "event_time_lag_us": MIN},
        "window": {"input_watermark_us": 10 * MIN, "output_watermark_us": 8 * MIN, "event_time_lag_us": 2 * MIN},
    }),
    # nothing buffered: the window stage passes the job watermark on
    ({"kind": "tumbling", "size": "1m"}, None, {
        "policy": {"input_watermark_us": 11 * MIN, "output_watermark_us": 10 * MIN, "event_time_lag_us": MIN},
        "window": {"input_watermark_us": 10 * MIN, "output_watermark_us": 10 * MIN, "event_time_lag_us": 0},
    }),
    # a per-event job has the policy stage only
    (None, None, {
        "policy": {"input_watermark_us": 11 * MIN, "output_watermark_us": 10 * MIN, "event_time_lag_us": MIN},
    }),
])  # fmt: skip
def test_each_stage_reports_its_input_and_output_watermark_and_the_lag_it_adds(window, buffered_from, expected):
    assert stage_watermarks(spec(window), 10 * MIN, 12 * MIN, buffered_from) == expected


def test_stage_watermarks_are_unknown_before_the_first_watermark_and_the_first_clock():
    unknown = {"input_watermark_us": None, "output_watermark_us": None, "event_time_lag_us": None}
    assert stage_watermarks(spec({"kind": "tumbling", "size": "1m"}), NONE, None, None) == {
        "policy": unknown,
        "window": unknown,
    }


def test_substreams_are_counted_and_their_known_watermarks_spread():
    assert substream_summary({"a": 5 * MIN, "b": NONE, "c": 2 * MIN}) == {
        "count": 3,
        "min_watermark_us": 2 * MIN,
        "max_watermark_us": 5 * MIN,
    }
    assert substream_summary({}) == {"count": 0, "min_watermark_us": None, "max_watermark_us": None}
