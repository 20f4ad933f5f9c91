"""Turning indexed frames into record batches of :data:`EVENT_SCHEMA`.

Frames are read with plain ``pread`` (not mmap: a writer may truncate a torn tail under
a mapping, and touching it would kill the reader with SIGBUS), several small frames per
call; decoding and slicing the Arrow data from those bytes copies nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa

from tidegate.hub.frames import Frame, decode_payload

ARRIVAL_TYPE = pa.timestamp("us", tz="UTC")
EVENT_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("arrival_time", ARRIVAL_TYPE),
        pa.field("key", pa.string()),
        pa.field("payload", pa.string()),
    ]
)
_READ_SPAN = 8 << 20  # bytes fetched per pread when consecutive frames are small


def stored_batches(frames: list[tuple[Path, Frame]]) -> Iterator[tuple[Frame, pa.RecordBatch]]:
    """Each frame's stored batch (arrival_time, key, payload), CRC-checked, in order."""
    i = 0
    while i < len(frames):
        path = frames[i][0]
        j = i + 1  # frames[i:j]: adjacent frames of one file fetched in one read
        while (
            j < len(frames)
            and frames[j][0] == path
            and frames[j][1].position == frames[j - 1][1].end_position
            and frames[j][1].end_position - frames[i][1].position <= _READ_SPAN
        ):
            j += 1
        first, last = frames[i][1], frames[j - 1][1]
        fd = os.open(path, os.O_RDONLY)
        try:
            data = os.pread(fd, last.end_position - first.position, first.position)
        finally:
            os.close(fd)
        buffer = pa.py_buffer(data)
        for _, frame in frames[i:j]:
            lo = frame.payload_position - first.position
            yield frame, decode_payload(buffer.slice(lo, frame.payload_len), frame, str(path))
        i = j


def event_batch(partition: int, first_offset: int, stored: pa.RecordBatch) -> pa.RecordBatch:
    """Add the implied partition and offset columns to a stored batch."""
    n = stored.num_rows
    return pa.RecordBatch.from_arrays(
        [
            pa.array(np.full(n, partition, dtype=np.int32)),
            pa.array(np.arange(first_offset, first_offset + n, dtype=np.int64)),
            stored.column(0).view(ARRIVAL_TYPE),
            stored.column(1),
            stored.column(2),
        ],
        schema=EVENT_SCHEMA,
    )


def read_event_batches(
    partition: int, frames: list[tuple[Path, Frame]], start: int, end: int, max_rows: int
) -> Iterator[pa.RecordBatch]:
    """Events ``[start, end)`` as batches of at most ``max_rows``.

    A frame's events are passed on as zero-copy slices of it; only frames smaller than
    ``max_rows`` are gathered and concatenated, so a log of many tiny appends still
    reads as a few large batches. A frame is split only when it exceeds ``max_rows``.
    """
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    pending_first = start
    for frame, stored in stored_batches(frames):
        lo = max(start, frame.first_offset)
        hi = min(end, frame.end_offset)
        piece = stored.slice(lo - frame.first_offset, hi - lo)
        if pending and pending_rows + piece.num_rows > max_rows:
            yield _combine(partition, pending_first, pending)
            pending, pending_rows = [], 0
        while piece.num_rows > max_rows:
            yield event_batch(partition, lo, piece.slice(0, max_rows))
            piece, lo = piece.slice(max_rows), lo + max_rows
        if not pending:
            pending_first = lo
        pending.append(piece)
        pending_rows += piece.num_rows
    if pending_rows:
        yield _combine(partition, pending_first, pending)


def _combine(partition: int, first_offset: int, pieces: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(pieces) == 1:
        return event_batch(partition, first_offset, pieces[0])
    table = pa.Table.from_batches(pieces).combine_chunks()
    return event_batch(partition, first_offset, table.to_batches()[0])
