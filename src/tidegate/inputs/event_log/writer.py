"""Appending to one partition: one writer at a time, crash-safe.

Each append holds ``flock(LOCK_EX)`` on the partition's lock file for its whole
duration. On taking the lock the writer re-indexes the tail (another process may have
appended since), cuts off a torn frame left by a writer that was killed mid-append,
and only then stamps arrival times — so they are decided against the true last
arrival — and writes the frame with one ``pwrite``, then fsyncs, then records the new
acknowledged end (marks.py) before returning. A crash at any point leaves the log at
the previous frame boundary or with a torn frame that readers ignore and the next
writer removes. Only bytes past the acknowledged end are ever cut: damage below it
stays in the index (segments.py), so its offsets are never given out again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace

import pyarrow as pa

from tidegate.files import flocked, fsync_dir
from tidegate.inputs.event_log.frames import encode_frame
from tidegate.inputs.event_log.marks import write_acked
from tidegate.inputs.event_log.segments import PartitionIndex, Segment, segment_name


@dataclass(frozen=True)
class Tail:
    """What an append must know about its partition, read under the lock."""

    partition: int
    end_offset: int  # offset the next event gets
    last_arrival: int | None  # None: nothing was ever appended


def truncate_torn_tail(index: PartitionIndex) -> int:
    """Cut the last segment back to what it acknowledged (the index never counts a torn tail
    as indexed; see segments.py); bytes removed. Caller holds the lock."""
    if not index.segments:
        return 0
    last = index.segments[-1]
    size = os.stat(last.path).st_size
    if size <= last.scanned_to:
        return 0
    fd = os.open(last.path, os.O_WRONLY)
    try:
        os.ftruncate(fd, last.scanned_to)
        os.fsync(fd)
    finally:
        os.close(fd)
    return size - last.scanned_to


class PartitionWriter:
    def __init__(self, index: PartitionIndex, segment_bytes: int) -> None:
        self.index = index
        self.segment_bytes = segment_bytes

    def append(self, stamp: Callable[[Tail], pa.RecordBatch], *, fsync: bool) -> tuple[Tail, pa.RecordBatch]:
        """Write the batch ``stamp`` builds for the current tail as one frame.

        ``stamp`` runs under the lock and may raise (e.g. ArrivalOrderError); then
        nothing is written. Returns the tail the batch was appended after, and the batch.
        """
        index = self.index
        with flocked(index.lock_path, exclusive=True), index.lock:  # flock first, always (see log.snapshot)
            index.refresh()
            truncate_torn_tail(index)
            tail = Tail(index.partition, index.end_offset(), index.last_arrival())
            batch = stamp(tail)
            if batch.num_rows:
                self._write(batch, tail.end_offset, fsync)
                write_acked(index.directory, tail.end_offset + batch.num_rows)
            return tail, batch

    def _write(self, batch: pa.RecordBatch, first_offset: int, fsync: bool) -> None:
        index = self.index
        segment = index.segments[-1] if index.segments else None
        position = segment.scanned_to if segment else 0
        data, frame = encode_frame(batch, first_offset)
        # roll when the frame would overflow a non-empty segment; a frame is never split
        new_segment = segment is None or (position > 0 and position + len(data) > self.segment_bytes)
        if new_segment:
            segment = Segment(first_offset, index.directory / segment_name(first_offset))
            position = 0
            fd = os.open(segment.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        else:
            assert segment is not None  # new_segment is False only when a segment exists
            fd = os.open(segment.path, os.O_WRONLY)
        frame = replace(frame, position=position)
        try:
            view = memoryview(data)
            written = 0
            while written < len(view):
                written += os.pwrite(fd, view[written:], frame.position + written)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if new_segment:
            if fsync:
                fsync_dir(index.directory)
            if index.segments:
                index.segments[-1].sealed = True
            index.segments.append(segment)
        segment.frames.append(frame)
        segment.scanned_to = frame.end_position
