"""Damage is not a torn tail: an acknowledged frame is never cut, and no offset is ever reused.

Only the end of the last segment that no append acknowledged may be cut — what a writer
killed mid-append leaves (test_event_log_torn_tail.py). Bytes that do not validate anywhere
else — before a valid frame, in a sealed segment, or inside what appends acknowledged —
are damage: reading them raises :class:`CorruptFrameError` naming the partition, the
offsets, the file and the byte position, while the frames around them stay readable and
the partition stays appendable after its last acknowledged offset.

    segment:  [e0][e1][e2][e3]        e1's header damaged
    before:   the next append cut e1–e3 and was given offset 1 again
    now:      e1 is reported, e0 and e2–e3 read, the next append gets offset 4
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import payloads
from tidegate.inputs.event_log import CorruptFrameError, EventLog, EventLogError
from tidegate.inputs.event_log.frames import HEADER_SIZE, Frame
from tidegate.inputs.event_log.segments import PartitionIndex, partition_dir_name


def frames(log: EventLog, partition: int = 0) -> list[tuple[Path, Frame]]:
    index = PartitionIndex(log.root / partition_dir_name(partition), partition)
    index.refresh()
    return index.frames()


def flip(path: Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ 0xFF]))


def one_event_frames(log: EventLog, n: int, start: int = 0, partition: int = 0) -> None:
    for i in range(start, start + n):
        log.append(partition, [None], [f"e{i}"])


def test_a_damaged_header_before_the_tail_is_reported_and_its_offsets_are_never_reused(wall_log):
    one_event_frames(wall_log, 4)
    path, second = frames(wall_log)[1]
    flip(path, second.position + 20)  # inside frame 2's header: its CRC fails

    r = EventLog.open(wall_log.root).append(0, [None], ["e4"])
    assert r.first_offset == 4  # not 1: offsets 1–3 were acknowledged

    reader = EventLog.open(wall_log.root)
    assert reader.end_offset(0) == 5
    assert reader.read(0, 0, 1).column("payload").to_pylist() == ["e0"]
    assert reader.read(0, 2, 5).column("payload").to_pylist() == ["e2", "e3", "e4"]
    with pytest.raises(CorruptFrameError) as err:
        reader.read(0, 0, 5)
    msg = str(err.value)
    assert "partition 0: offset 1 " in msg and path.name in msg and f"byte {second.position}" in msg
    assert "header" in msg and "tidegate event-log verify" in msg and "tidegate event-log repair" in msg
    e = err.value
    assert (e.partition, e.first_offset, e.end_offset, e.path, e.position) == (0, 1, 2, path, second.position)
    assert isinstance(e, EventLogError)


def test_an_acknowledged_last_frame_whose_payload_is_damaged_is_reported_not_cut(wall_log):
    one_event_frames(wall_log, 3)
    path, last = frames(wall_log)[-1]
    flip(path, last.end_position - 3)

    reader = EventLog.open(wall_log.root)
    assert reader.end_offset(0) == 3
    assert reader.read(0, 0, 2).column("payload").to_pylist() == ["e0", "e1"]
    with pytest.raises(CorruptFrameError, match="partition 0: offset 2 .*fails its CRC check"):
        reader.read(0, 0, 3)
    assert EventLog.open(wall_log.root).append(0, [None], ["e3"]).first_offset == 3
    assert reader.read(0, 3, 4).column("payload").to_pylist() == ["e3"]


def test_an_acknowledged_tail_cut_short_is_reported_and_the_next_append_comes_after_it(wall_log):
    one_event_frames(wall_log, 3)
    path, last = frames(wall_log)[-1]
    os.truncate(path, last.position + HEADER_SIZE + 5)  # lost bytes of an acknowledged frame

    log = EventLog.open(wall_log.root)
    assert log.end_offset(0) == 3
    assert log.append(0, [None], ["e3"]).first_offset == 3
    assert log.read(0, 3, 4).column("payload").to_pylist() == ["e3"]
    with pytest.raises(CorruptFrameError, match="offset 2 .*segment ends inside"):
        log.read(0, 2, 4)


def test_acknowledged_frames_missing_from_the_end_of_a_segment_are_reported(wall_log):
    one_event_frames(wall_log, 3)
    path, last = frames(wall_log)[-1]
    os.truncate(path, last.position)  # a whole acknowledged frame gone

    log = EventLog.open(wall_log.root)
    assert log.end_offset(0) == 3
    with pytest.raises(CorruptFrameError, match="partition 0: offset 2 .*missing"):
        log.read(0, 0, 3)
    assert log.append(0, [None], ["e3"]).first_offset == 3


def test_damage_in_a_sealed_segment_leaves_the_partition_readable_and_appendable(tmp_path, clock):
    log = EventLog.create(tmp_path / "event-log", partitions=1, segment_bytes=2048, now_us=clock)
    for i in range(8):
        log.append(0, [None], [f"e{i}-" + "x" * 150])
    segments = {}
    for path, frame in frames(log):
        segments.setdefault(path, []).append(frame)
    first_path, first_frames = next(iter(segments.items()))
    assert len(segments) >= 3 and len(first_frames) >= 2  # the first segment is sealed and holds 2+ frames
    damaged = first_frames[0]
    flip(first_path, damaged.position + 10)  # its header

    reader = EventLog.open(log.root)
    assert reader.end_offset(0) == 8
    assert reader.append(0, [None], ["e8"]).first_offset == 8
    good = reader.read(0, 1, 9)
    assert good.column("offset").to_pylist() == list(range(1, 9))
    assert good.column("payload").to_pylist()[-1] == "e8"
    with pytest.raises(CorruptFrameError) as err:
        reader.read(0, 0, 2)
    assert (err.value.first_offset, err.value.path, err.value.position) == (0, first_path, damaged.position)


def test_stray_bytes_between_frames_are_damage_not_a_tail(wall_log):
    one_event_frames(wall_log, 2)
    path, second = frames(wall_log)[1]
    data = path.read_bytes()
    path.write_bytes(data[: second.position] + b"\x00garbage\x00" * 3 + data[second.position :])

    log = EventLog.open(wall_log.root)
    assert log.end_offset(0) == 2
    assert log.append(0, [None], ["e2"]).first_offset == 2
    with pytest.raises(CorruptFrameError, match="stray bytes"):
        log.read(0, 0, 3)
    assert log.read(0, 1, 3).column("payload").to_pylist() == ["e1", "e2"]


def test_an_unacknowledged_torn_tail_after_damage_is_still_cut(wall_log):
    one_event_frames(wall_log, 3)
    path, second = frames(wall_log)[1]
    flip(path, second.position + 20)
    with open(path, "ab") as f:
        f.write(b"TGF1 half a frame")  # a writer died mid-append: nothing acknowledged it

    log = EventLog.open(wall_log.root)
    assert log.end_offset(0) == 3
    assert log.append(0, [None], ["e3"]).first_offset == 3
    assert log.read(0, 2, 4).column("payload").to_pylist() == ["e2", "e3"]


def test_payloads_are_checked_when_read_and_a_bad_one_names_its_frame(wall_log):
    wall_log.append(0, [None] * 4, payloads(4))
    wall_log.append(0, [None] * 4, payloads(4, start=4))
    path, first = frames(wall_log)[0]
    flip(path, first.payload_position + 100)
    reader = EventLog.open(wall_log.root)
    assert reader.end_offset(0) == 8  # headers are intact: found when read, not when indexed
    with pytest.raises(CorruptFrameError, match=r"partition 0: offsets 0–3 .*fails its CRC check") as err:
        reader.read(0, 0, 8)
    assert (err.value.first_offset, err.value.end_offset, err.value.position) == (0, 4, 0)
    assert reader.read(0, 4, 8).column("payload").to_pylist() == payloads(4, start=4)
