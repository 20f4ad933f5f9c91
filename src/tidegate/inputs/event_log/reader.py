"""Turning indexed frames into record batches of :data:`EVENT_SCHEMA`.

Frames are read with plain ``pread`` (not mmap: a writer may truncate a torn tail under
a mapping, and touching it would kill the reader with SIGBUS), several small frames per
call; decoding and slicing the Arrow data from those bytes copies nothing.

Every payload is CRC-checked as it is read. A damaged frame, or a damaged span the index
holds, raises CorruptFrameError — unless the caller passes ``on_corrupt``: then the
offsets are skipped and ``on_corrupt`` gets the error to record. Holes that ``tidegate
event log repair`` left are skipped either way (and passed to ``on_corrupt`` when given).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from tidegate.inputs.event_log.errors import CorruptFrameError
from tidegate.inputs.event_log.frames import Damage, Frame, FrameError, decode_payload

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
# the built-in column ``headers``, which a read asking for it adds (tidegate.inputs.kafka.headers):
# an empty map for every event of the embedded log, which carries no headers
HEADERS_TYPE = pa.map_(pa.string(), pa.string())
EVENT_HEADERS_SCHEMA = EVENT_SCHEMA.append(pa.field("headers", HEADERS_TYPE))
_READ_SPAN = 8 << 20  # bytes fetched per pread when consecutive frames are small


OnCorrupt = Callable[[CorruptFrameError], None]  # told of each span a reader skips


def stored_batches(
    partition: int, frames: Sequence[tuple[Path, Frame | Damage]], on_corrupt: OnCorrupt | None = None
) -> Iterator[tuple[Frame, pa.RecordBatch]]:
    """Each frame's stored batch (arrival_time, key, payload), CRC-checked, in order."""
    i = 0
    while i < len(frames):
        path, first = frames[i]
        if isinstance(first, Damage):
            _skip(CorruptFrameError.of(partition, path, first, first.what), first.hole, on_corrupt)
            i += 1
            continue
        j = i + 1  # frames[i:j]: adjacent frames of one file fetched in one read
        while (
            j < len(frames)
            and frames[j][0] == path
            and isinstance(frames[j][1], Frame)
            and frames[j][1].position == frames[j - 1][1].end_position
            and frames[j][1].end_position - first.position <= _READ_SPAN
        ):
            j += 1
        last = frames[j - 1][1]
        fd = os.open(path, os.O_RDONLY)
        try:
            data = os.pread(fd, last.end_position - first.position, first.position)
        finally:
            os.close(fd)
        buffer = pa.py_buffer(data)
        for _, frame in frames[i:j]:
            assert isinstance(frame, Frame)  # the run frames[i:j] was chosen to hold frames only
            lo = frame.payload_position - first.position
            try:
                batch = decode_payload(buffer.slice(lo, max(min(frame.payload_len, len(data) - lo), 0)), frame)
            except FrameError as exc:
                _skip(CorruptFrameError.of(partition, path, frame, str(exc)), False, on_corrupt)
                continue
            yield frame, batch
        i = j


def frame_arrivals(partition: int, found: tuple[Path, Frame | Damage]) -> np.ndarray | None:
    """Arrival times of the events of one indexed frame; None when it cannot be read."""
    if isinstance(found[1], Damage):
        return None
    read = list(stored_batches(partition, [found], on_corrupt=lambda _: None))
    return read[0][1].column(0).to_numpy() if read else None


def _skip(error: CorruptFrameError, hole: bool, on_corrupt: OnCorrupt | None) -> None:
    if on_corrupt is not None:
        on_corrupt(error)
    elif not hole:
        raise error


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


def with_headers(batch: pa.RecordBatch, headers: pa.Array | None = None) -> pa.RecordBatch:
    """``batch`` (of :data:`EVENT_SCHEMA`) with the ``headers`` column of :data:`EVENT_HEADERS_SCHEMA`:
    ``headers``, or an empty map per event."""
    if headers is None:
        n = batch.num_rows
        headers = pa.MapArray.from_arrays(pa.array(np.zeros(n + 1, dtype=np.int32)), pa.array([], pa.string()),
                                          pa.array([], pa.string()), type=HEADERS_TYPE)  # fmt: skip
    return pa.RecordBatch.from_arrays([*batch.columns, headers], schema=EVENT_HEADERS_SCHEMA)


def read_event_batches(
    partition: int, frames: list[tuple[Path, Frame | Damage]], start: int, end: int, max_rows: int,
    on_corrupt: OnCorrupt | None = None,
) -> Iterator[pa.RecordBatch]:  # fmt: skip
    """Events ``[start, end)`` as batches of at most ``max_rows``, offsets ascending.

    A frame's events are passed on as zero-copy slices of it; only frames smaller than
    ``max_rows`` are gathered and concatenated, so a log of many tiny appends still
    reads as a few large batches. A frame is split only when it exceeds ``max_rows``.
    A skipped span ends a batch: the offsets within one batch are always consecutive.
    """
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    pending_first = start
    for frame, stored in stored_batches(partition, frames, on_corrupt):
        lo = max(start, frame.first_offset)
        hi = min(end, frame.end_offset)
        piece = stored.slice(lo - frame.first_offset, hi - lo)
        if pending and (pending_rows + piece.num_rows > max_rows or pending_first + pending_rows != lo):
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
