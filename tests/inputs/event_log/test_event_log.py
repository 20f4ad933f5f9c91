"""Appending and reading: dense offsets, the exact Arrow schema, segments, bad input stored as is."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from conftest import SECOND, T0, payloads
from tidegate.inputs.event_log import EVENT_SCHEMA, EventLog, EventLogError
from tidegate.inputs.event_log.segments import partition_dir_name


def test_append_assigns_dense_offsets_per_partition_and_reads_back_exactly(wall_log, clock):
    r1 = wall_log.append(0, ["a", None], payloads(2))
    clock.advance(SECOND)
    r2 = wall_log.append(0, ["b", "c", "d"], payloads(3, start=2))
    r3 = wall_log.append(1, ["x"], payloads(1))

    assert (r1.first_offset, r1.count, r2.first_offset, r2.count) == (0, 2, 2, 3)
    assert (r3.partition, r3.first_offset) == (1, 0)  # offsets are per partition
    assert [wall_log.end_offset(p) for p in range(3)] == [5, 1, 0]

    table = wall_log.read(0, 0, 5)
    assert table.schema == EVENT_SCHEMA
    assert table.column("partition").to_pylist() == [0] * 5
    assert table.column("offset").to_pylist() == [0, 1, 2, 3, 4]
    assert table.column("key").to_pylist() == ["a", None, "b", "c", "d"]
    assert table.column("payload").to_pylist() == payloads(5)
    arrivals = table.column("arrival_time").cast(pa.int64()).to_pylist()
    assert arrivals == [T0, T0, T0 + SECOND, T0 + SECOND, T0 + SECOND]
    assert (r2.first_arrival, r2.last_arrival) == (T0 + SECOND, T0 + SECOND)


def test_event_schema_is_the_documented_one():
    assert EVENT_SCHEMA.names == ["partition", "offset", "arrival_time", "key", "payload"]
    assert EVENT_SCHEMA.types == [pa.int32(), pa.int64(), pa.timestamp("us", tz="UTC"), pa.string(), pa.string()]


def test_read_returns_exactly_the_half_open_range_across_frames(wall_log):
    for i in range(10):
        wall_log.append(2, [f"k{i}"] * 3, payloads(3, start=3 * i))
    table = wall_log.read(2, 4, 23)
    assert table.column("offset").to_pylist() == list(range(4, 23))
    assert table.column("payload").to_pylist() == payloads(19, start=4)
    assert wall_log.read(2, 7, 7).num_rows == 0


def test_read_batches_respects_max_rows_and_coalesces_small_frames(wall_log):
    for i in range(50):
        wall_log.append(0, [None], payloads(1, start=i))  # 50 one-event frames
    wall_log.append(0, [None] * 100, payloads(100, start=50))  # one big frame
    sizes = [b.num_rows for b in wall_log.read_batches(0, 0, 150, max_rows=40)]
    # small frames are gathered up to max_rows; a frame is cut only where it exceeds max_rows
    assert sizes == [40, 10, 40, 40, 20]
    offsets = [o for b in wall_log.read_batches(0, 3, 150, max_rows=40) for o in b.column("offset").to_pylist()]
    assert offsets == list(range(3, 150))


def test_reading_past_the_end_is_refused_with_the_range_it_holds(wall_log):
    wall_log.append(0, [None] * 3, payloads(3))
    with pytest.raises(EventLogError, match=r"cannot read offsets \[0, 4\); it holds \[0, 3\)"):
        wall_log.read(0, 0, 4)
    with pytest.raises(EventLogError, match="start <= end"):
        wall_log.read(0, 2, 1)


def test_malformed_payloads_are_stored_verbatim(wall_log):
    bad = ["not json", "", '{"eventTime": ', "\u00e9\u4e2d\U0001f600", '{"a": 1}\n{"b": 2}']
    wall_log.append(1, [None] * len(bad), bad)
    assert wall_log.read(1, 0, len(bad)).column("payload").to_pylist() == bad


def test_append_rejects_inconsistent_or_non_text_input_and_writes_nothing(wall_log):
    with pytest.raises(EventLogError, match="2 keys but 1 payloads"):
        wall_log.append(0, ["a", "b"], ["x"])
    with pytest.raises(EventLogError, match="must be text"):
        wall_log.append(0, [None], [{"n": 1}])
    with pytest.raises(EventLogError, match="partitions 0–2; got 3"):
        wall_log.append(3, [None], ["x"])
    with pytest.raises(EventLogError, match="null"):
        wall_log.append_table(0, pa.table({"key": ["a"], "payload": pa.array([None], pa.string())}))
    assert wall_log.end_offset(0) == 0


def test_text_that_is_not_valid_unicode_is_refused_naming_the_event(wall_log):
    # a lone surrogate cannot be stored as UTF-8: refused (never silently replaced), as a
    # EventLogError, not a raw UnicodeEncodeError from deep inside Arrow
    with pytest.raises(EventLogError) as err:
        wall_log.append(0, [None, None], ['{"ok": 1}', '{"bad": "\ud800"}'])
    msg = str(err.value)
    assert "payloads[1]" in msg and "lone surrogate" in msg and "U+D800" in msg and "nothing was written" in msg
    assert "json.dumps" in msg  # what to do: escape it, as JSON does
    with pytest.raises(EventLogError, match=r"keys\[0\] .*U\+DC80"):
        wall_log.append(0, ["\udc80"], ["{}"])
    assert wall_log.end_offset(0) == 0


def test_empty_append_writes_no_frame(wall_log):
    r = wall_log.append(0, [], [])
    assert (r.first_offset, r.count, r.first_arrival) == (0, 0, None)
    assert wall_log.describe()[0].segments == 0


def test_append_table_takes_arrival_times_as_int_or_timestamp(manual_log):
    t = pa.table({"key": ["a", "b"], "payload": ["1", "2"], "arrival_time": pa.array([T0, T0 + 5], pa.int64())})
    manual_log.append_table(0, t)
    ts = pa.array([T0 + 10, T0 + 20], pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    manual_log.append_table(0, pa.table({"key": [None, "c"], "payload": ["3", "4"], "arrival_time": ts}))
    got = manual_log.read(0, 0, 4)
    assert got.column("arrival_time").cast(pa.int64()).to_pylist() == [T0, T0 + 5, T0 + 10, T0 + 20]
    assert got.column("key").to_pylist() == ["a", "b", None, "c"]


def test_segments_roll_at_segment_bytes_and_reads_span_them(tmp_path, clock):
    log = EventLog.create(tmp_path / "event-log", partitions=1, segment_bytes=4096, now_us=clock)
    for i in range(40):
        log.append(0, [None] * 5, [json.dumps({"i": i, "pad": "x" * 100})] * 5)
    seg_files = sorted((tmp_path / "event-log" / partition_dir_name(0)).glob("*.seg"))
    assert len(seg_files) > 5
    assert seg_files[0].name == "00000000000000000000.seg"
    # each segment is named by its first offset, and none exceeds the limit by more than a frame
    info = log.describe()[0]
    assert info.segments == len(seg_files) and info.end_offset == 200
    assert all(f.stat().st_size <= 4096 for f in seg_files)
    assert log.read(0, 0, 200).column("offset").to_pylist() == list(range(200))


def test_a_second_log_object_sees_appends_of_the_first(wall_log):
    other = EventLog.open(wall_log.root)
    wall_log.append(0, ["a"], ["1"])
    assert other.end_offset(0) == 1
    other.append(0, ["b"], ["2"])  # the other writer re-reads the tail under the lock
    wall_log.append(0, ["c"], ["3"])
    assert wall_log.read(0, 0, 3).column("payload").to_pylist() == ["1", "2", "3"]


def test_create_refuses_an_existing_event_log_and_open_names_the_fix(tmp_path):
    EventLog.create(tmp_path / "event-log", partitions=1)
    with pytest.raises(EventLogError, match="already holds an event log"):
        EventLog.create(tmp_path / "event-log", partitions=1)
    with pytest.raises(EventLogError) as err:
        EventLog.open(tmp_path / "elsewhere")
    assert "elsewhere" in str(err.value) and "tidegate event-log create" in str(err.value)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"partitions": 0}, "partitions"),
        ({"partitions": 1, "clock": "sundial"}, "clock"),
        ({"partitions": 1, "retention": "soon"}, "retention"),
        ({"partitions": 1, "segment_bytes": 10}, "segment_bytes"),
    ],
)
def test_create_validates_its_settings(tmp_path, kwargs, message):
    from tidegate.errors import TidegateError

    with pytest.raises(TidegateError, match=message):
        EventLog.create(tmp_path / "event-log", **kwargs)
    assert not EventLog.exists(tmp_path / "event-log")


def test_a_log_made_under_the_old_settings_name_opens_and_keeps_its_settings_there(tmp_path):
    log = EventLog.create(tmp_path / "old", partitions=2, clock="manual")
    (log.root / "event-log.json").rename(log.root / "hub.json")  # as a log made before the rename is
    assert EventLog.exists(log.root) and EventLog.open(log.root).partitions == 2
    EventLog.open(log.root).set_retention("7d", None)  # a settings change is written where they are
    assert not (log.root / "event-log.json").exists() and EventLog.open(log.root).config.retention_us is not None
    with pytest.raises(EventLogError, match="already holds an event log"):
        EventLog.create(log.root, partitions=2)
