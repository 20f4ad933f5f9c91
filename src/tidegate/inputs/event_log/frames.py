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
shorter than its stated length — is either the torn tail of a writer that died
mid-append (nothing acknowledged it; the next writer truncates it) or damage to
acknowledged bytes, which the index keeps as a :class:`Damage` span in place of the
frames it covers (segments.py decides which; an acknowledged frame is never cut).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import BinaryIO

import pyarrow as pa

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
        MAGIC,
        0,
        frame.payload_len,
        frame.payload_crc,
        first_offset,
        frame.count,
        frame.min_arrival,
        frame.max_arrival,
    )[_CRC_FROM:]
    header = MAGIC + struct.pack("<I", zlib.crc32(tail)) + tail
    return header + payload.to_pybytes(), frame


@dataclass(frozen=True)
class Damage:
    """A span of a segment standing where acknowledged frames should be: bytes
    ``[position, end_position)`` that hold offsets ``[first_offset, end_offset)`` but do
    not read back (``what`` says why). ``hole``: repaired — the bytes were quarantined and
    readers skip these offsets. The arrivals bound the lost events' arrival times, taken
    from the damaged header where it was valid, else from the neighbouring frames.
    """

    position: int
    end_position: int
    first_offset: int
    count: int
    min_arrival: int
    max_arrival: int
    what: str
    hole: bool = False

    @property
    def end_offset(self) -> int:
        return self.first_offset + self.count


class FrameError(ValueError):
    """A frame's payload does not read back; ``str()`` says what is wrong. Never leaves the
    event log package: readers turn it into a CorruptFrameError that names the partition."""


def parse_header(raw: bytes, position: int) -> Frame | None:
    """The frame whose header is ``raw``, or None if the header is not a valid one."""
    return header_or_problem(raw, position)[0]


def header_or_problem(raw: bytes, position: int) -> tuple[Frame | None, str]:
    """The frame whose header is ``raw``, or None and what is wrong with it."""
    if len(raw) < HEADER_SIZE:
        return None, "the segment ends inside a frame header"
    magic, header_crc, payload_len, payload_crc, first, count, lo, hi = HEADER.unpack_from(raw)
    if magic != MAGIC:
        return None, "no frame header where one should start"
    if header_crc != zlib.crc32(raw[_CRC_FROM:HEADER_SIZE]):
        return None, "frame header fails its CRC check"
    return Frame(position, payload_len, payload_crc, first, count, lo, hi), ""


def read_frame(f: BinaryIO, position: int, file_size: int) -> tuple[Frame | None, str]:
    """The whole frame at ``position`` (header valid, payload within the file), or why not."""
    f.seek(position)
    frame, problem = header_or_problem(f.read(min(HEADER_SIZE, max(file_size - position, 0))), position)
    if frame is not None and frame.end_position > file_size:
        have = file_size - position
        return None, f"the segment ends inside the frame ({have} of {frame.end_position - position} bytes)"
    return frame, problem


def find_next_frame(f: BinaryIO, position: int, file_size: int, after_offset: int, limit: int | None) -> Frame | None:
    """The first whole, valid frame starting after byte ``position`` whose offsets lie in
    ``[after_offset, limit)`` (no upper limit when ``limit`` is None).

    This is how a reader finds its way past damage: a valid header carries a CRC, so stray
    bytes that happen to look like one are as rare as a CRC collision; the offset window
    keeps frames nobody acknowledged (a torn write) from being taken for real ones.
    """
    f.seek(position + 1)
    data = f.read(max(file_size - position - 1, 0))
    at = data.find(MAGIC)
    while at != -1:
        frame = parse_header(data[at : at + HEADER_SIZE], position + 1 + at)
        if (
            frame is not None
            and frame.end_position <= file_size
            and frame.first_offset >= after_offset
            and (limit is None or frame.end_offset <= limit)
        ):
            return frame
        at = data.find(MAGIC, at + 1)
    return None


def payload_ok(frame: Frame, data: bytes | memoryview) -> bool:
    return len(data) == frame.payload_len and zlib.crc32(data) == frame.payload_crc


def decode_payload(buffer: pa.Buffer, frame: Frame) -> pa.RecordBatch:
    """The record batch stored in ``buffer`` (the frame's payload bytes), zero-copy.

    FrameError when the bytes are not what the header promised; nothing else escapes.
    """
    if len(buffer) != frame.payload_len or zlib.crc32(buffer) != frame.payload_crc:
        raise FrameError("payload fails its CRC check")
    try:
        batch = pa.ipc.open_stream(buffer).read_next_batch()
    except (pa.ArrowException, StopIteration, ValueError, OSError) as exc:  # CRC-valid bytes Arrow cannot read
        raise FrameError(f"payload is not an Arrow record batch ({exc})") from None
    if batch.num_rows != frame.count or batch.schema != STORED_SCHEMA:
        raise FrameError(
            f"payload holds {batch.num_rows} events of {batch.schema.names}, its header says {frame.count}"
        )
    return batch
