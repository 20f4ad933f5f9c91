"""A writer killed mid-append leaves a torn frame: readers stop before it, the next writer cuts it off.

Each case damages the tail of the last segment the way a crash (or a power cut with
fsync off) can, then checks: the readable log is exactly the frames before the damage,
and the log stays appendable with dense offsets.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from conftest import payloads
from tidegate.inputs.event_log import EventLog, EventLogError
from tidegate.inputs.event_log.frames import HEADER_SIZE, encode_frame
from tidegate.inputs.event_log.segments import PartitionIndex, partition_dir_name


def _segment(log: EventLog) -> str:
    (path,) = (log.root / partition_dir_name(0)).glob("*.seg")
    return str(path)


def _next_frame(first_offset: int, n: int, arrival: int) -> bytes:
    batch = pa.RecordBatch.from_pydict(
        {"arrival_time": [arrival] * n, "key": [None] * n, "payload": payloads(n, start=first_offset)},
        schema=pa.schema([("arrival_time", pa.int64()), ("key", pa.string()), ("payload", pa.string())]),
    )
    return encode_frame(batch, first_offset)[0]


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]


TORN_TAILS = {
    # a header cut short
    "partial header": lambda frame: frame[: HEADER_SIZE // 2],
    # a whole header, the payload cut short
    "short payload": lambda frame: frame[: HEADER_SIZE + 10],
    # a full-length frame whose payload bytes are wrong (power cut with fsync off)
    "payload CRC mismatch": lambda frame: _flip(frame, len(frame) - 3),
    # a header whose own CRC fails
    "header CRC mismatch": lambda frame: _flip(frame, 20),
    # zeros where a frame should be (file grown, data never written)
    "zeros": lambda frame: bytes(len(frame)),
}


@pytest.mark.parametrize("damage", list(TORN_TAILS), ids=list(TORN_TAILS))
def test_torn_tail_is_invisible_to_readers_and_cut_off_by_the_next_writer(wall_log, damage):
    wall_log.append(0, [None] * 4, payloads(4))
    wall_log.append(0, [None] * 3, payloads(3, start=4))
    path = _segment(wall_log)
    good_size = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(TORN_TAILS[damage](_next_frame(7, 5, wall_log.clock_now_us())))

    reader = EventLog.open(wall_log.root)  # a fresh reader indexes the damaged file
    assert reader.end_offset(0) == 7
    assert reader.read(0, 0, 7).column("payload").to_pylist() == payloads(7)

    writer = EventLog.open(wall_log.root)
    r = writer.append(0, ["k"] * 2, ["after-1", "after-2"])
    assert r.first_offset == 7
    table = reader.read(0, 0, 9)
    assert table.column("offset").to_pylist() == list(range(9))
    assert table.column("payload").to_pylist() == payloads(7) + ["after-1", "after-2"]
    # the torn bytes are gone: every byte of the file belongs to a valid frame
    index = PartitionIndex(wall_log.root / partition_dir_name(0), 0)
    index.refresh()
    assert index.segments[-1].scanned_to == os.path.getsize(path) > good_size


def test_corruption_before_the_tail_is_reported_not_skipped(wall_log):
    wall_log.append(0, [None] * 4, payloads(4))
    wall_log.append(0, [None] * 4, payloads(4, start=4))
    path = _segment(wall_log)
    with open(path, "r+b") as f:
        f.seek(HEADER_SIZE + 100)  # inside the first frame's payload
        byte = f.read(1)
        f.seek(HEADER_SIZE + 100)
        f.write(bytes([byte[0] ^ 0xFF]))
    reader = EventLog.open(wall_log.root)
    assert reader.end_offset(0) == 8  # headers are intact
    with pytest.raises(EventLogError, match="fails its CRC check"):
        reader.read(0, 0, 8)
    # the second frame alone is still readable
    assert reader.read(0, 4, 8).column("payload").to_pylist() == payloads(4, start=4)
