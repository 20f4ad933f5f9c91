"""The on-disk frame: one per append, a fixed header followed by Arrow IPC stream bytes.

Header layout (little-endian, 48 bytes)::

    magic        4s   b"TGF1"
    header_crc   u32  CRC32 of the 40 header bytes that follow it
    payload_len  u64  bytes of Arrow IPC stream after the header
    payload_crc  u32  CRC32 of those bytes
    first_offset i64  offset of the frame's first event; event i is first_offset + i
    count        u32  events in the frame
    min_arrival  i64  µs since epoch
    max_arrival  i64  µs since epoch

The payload is a record batch with columns ``arrival_time`` int64, ``key`` string,
``payload`` string. Offsets are implied, so they cost nothing on disk.

A frame that cannot be fully validated — short header, wrong magic or CRC, payload
shorter than its stated length — marks the end of the readable log: it is the torn
tail of a writer that died mid-append, and the next writer truncates it.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import BinaryIO

import pyarrow as pa

from tidegate.hub.errors import HubError

MAGIC = b"TGF1"
HEADER = struct.Struct("<4sIQIqIqq")
HEADER_SIZE = HEADER.size  # 48
_CRC_FROM = 8  # the header CRC covers everything after magic and itself

STORED_SCHEMA = pa.schema(
    [
        pa.field("arrival_time", pa.int64()),
        pa.field("key", pa.string()),
        pa.field("payload", pa.string()),
    ]
)


@dataclass(frozen=True)
class Frame:
    """Where one frame sits in its segment and what its header says."""

    position: int  # byte position of the header in the segment file
    payload_len: int
    payload_crc: int
    first_offset: int
    count: int
    min_arrival: int
    max_arrival: int

    @property
    def end_offset(self) -> int:
        return self.first_offset + self.count

    @property
    def end_position(self) -> int:
        return self.position + HEADER_SIZE + self.payload_len

    @property
    def payload_position(self) -> int:
        return self.position + HEADER_SIZE


def encode_frame(batch: pa.RecordBatch, first_offset: int) -> tuple[bytes, Frame]:
    """Header + Arrow IPC stream bytes of ``batch`` (schema STORED_SCHEMA), ready for one
    write; and the frame as an index will see it once written at byte 0 (``replace`` the
    position for any other place)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, STORED_SCHEMA) as writer:
        writer.write_batch(batch)
    payload = sink.getvalue()
    arrivals = batch.column(0)
    frame = Frame(
        position=0,
        payload_len=payload.size,
        payload_crc=zlib.crc32(payload),
        first_offset=first_offset,
        count=batch.num_rows,
        min_arrival=arrivals[0].as_py(),
        max_arrival=arrivals[len(arrivals) - 1].as_py(),  # arrivals are non-decreasing
    )
    tail = HEADER.pack(
        MAGIC, 0, frame.payload_len, frame.payload_crc, first_offset, frame.count,
        frame.min_arrival, frame.max_arrival,
    )[_CRC_FROM:]
    header = MAGIC + struct.pack("<I", zlib.crc32(tail)) + tail
    return header + payload.to_pybytes(), frame


def parse_header(raw: bytes, position: int) -> Frame | None:
    """The frame whose header is ``raw``, or None if the header is not a valid one."""
    if len(raw) < HEADER_SIZE:
        return None
    magic, header_crc, payload_len, payload_crc, first, count, lo, hi = HEADER.unpack_from(raw)
    if magic != MAGIC or header_crc != zlib.crc32(raw[_CRC_FROM:HEADER_SIZE]):
        return None
    return Frame(position, payload_len, payload_crc, first, count, lo, hi)


def scan_frames(f: BinaryIO, position: int, file_size: int) -> list[Frame]:
    """Valid frames from ``position`` up to the first torn one (or the end of the file).

    Only headers are read; payloads are skipped with a seek, so indexing a segment costs
    one small read per frame. ``f`` should be buffered so small frames cost no syscall.
    """
    frames: list[Frame] = []
    while position + HEADER_SIZE <= file_size:
        f.seek(position)
        frame = parse_header(f.read(HEADER_SIZE), position)
        if frame is None or frame.end_position > file_size:
            break
        frames.append(frame)
        position = frame.end_position
    return frames


def payload_ok(frame: Frame, data: bytes | memoryview) -> bool:
    return len(data) == frame.payload_len and zlib.crc32(data) == frame.payload_crc


def decode_payload(buffer: pa.Buffer, frame: Frame, where: str) -> pa.RecordBatch:
    """The record batch stored in ``buffer`` (the frame's payload bytes), zero-copy."""
    if zlib.crc32(buffer) != frame.payload_crc:
        raise HubError(
            f"{where}: frame at offset {frame.first_offset} (byte {frame.position}) fails its CRC check",
            "the segment is damaged; restore the partition from a replica or delete it and replay",
        )
    batch = pa.ipc.open_stream(buffer).read_next_batch()
    if batch.num_rows != frame.count:
        raise HubError(
            f"{where}: frame at offset {frame.first_offset} holds {batch.num_rows} events, header says {frame.count}",
            "the segment is damaged; restore the partition from a replica or delete it and replay",
        )
    return batch
