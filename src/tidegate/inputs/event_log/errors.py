"""What the event log refuses to do, and what the operator can do about it."""

from __future__ import annotations

from pathlib import Path

from tidegate.errors import TidegateError


class EventLogError(TidegateError):
    """The event log is missing, damaged, or was asked for something it does not hold."""


class RetentionError(EventLogError):
    """The requested position was deleted by retention; the message names the missing span.

    The span is also kept as data, so a caller that accepts partial results can carry on
    from ``first_available_offset`` and record what it is missing.
    """

    def __init__(
        self,
        problem: str,
        fix: str = "",
        *,
        partition: int,
        missing_offsets: tuple[int, int],
        missing_arrivals: tuple[int | None, int | None],
        first_available_offset: int,
    ) -> None:
        super().__init__(problem, fix)
        self.partition = partition
        self.missing_offsets = missing_offsets  # [first, end) of the deleted offsets asked for
        self.missing_arrivals = missing_arrivals  # [from, through] arrival µs of those, where known
        self.first_available_offset = first_available_offset


class ArrivalOrderError(EventLogError):
    """Supplied arrival times would make a partition's arrival clock go backwards; nothing was written."""


class ArrivalAheadError(EventLogError):
    """Supplied arrival times lie further ahead of the broker clock than the event log allows
    (``max_arrival_ahead``): one skewed or hostile producer would move every consumer's
    clock and make retention delete recent data. Nothing was written."""


class CorruptFrameError(EventLogError):
    """Acknowledged bytes of a partition cannot be read back: a frame whose header or payload
    fails its check, stray bytes, or acknowledged frames missing from a segment.

    Never a torn tail (an append that was never acknowledged): those are cut by the next
    writer. The span is kept as data so readers that skip damage can record what they skipped.
    """

    def __init__(
        self,
        problem: str,
        fix: str = "",
        *,
        partition: int,
        first_offset: int,
        end_offset: int,
        path: Path,
        position: int,
        what: str,
    ) -> None:
        super().__init__(problem, fix)
        self.partition = partition
        self.first_offset = first_offset  # [first_offset, end_offset): the offsets that cannot be read
        self.end_offset = end_offset
        self.path = path  # the segment file
        self.position = position  # byte position of the damage in it
        self.what = what  # what is wrong, e.g. "frame header fails its CRC check"

    @classmethod
    def of(cls, partition: int, path: Path, span, what: str) -> CorruptFrameError:
        """The error for a frame or damaged span (anything with ``first_offset``, ``count``
        and ``position``) of segment ``path``."""
        first, count, root = span.first_offset, span.count, path.parent.parent
        return cls(
            f"partition {partition}: {offsets_text(first, count)} in {path} at byte {span.position} "
            f"cannot be read: {what}",
            f"run `tidegate event-log verify {root}` to list all damage and `tidegate event-log repair {root}` "
            "to move it aside "
            "(its offsets become a recorded hole that readers skip), or restore the segment from a replica; "
            "a job may skip damaged frames with source.on_corrupt_frame: quarantine",
            partition=partition, first_offset=first, end_offset=first + count, path=path, position=span.position,
            what=what,
        )  # fmt: skip


def offsets_text(first: int, count: int) -> str:
    """``offset 5``, ``offsets 5–7``, or for a span that held none, ``bytes before offset 5``."""
    if count == 1:
        return f"offset {first}"
    return f"offsets {first}–{first + count - 1}" if count else f"bytes before offset {first}"
