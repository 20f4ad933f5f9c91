"""What the event log refuses to do, and what the operator can do about it."""

from __future__ import annotations

from tidegate.errors import TidegateError


class HubError(TidegateError):
    """The event log is missing, damaged, or was asked for something it does not hold."""


class RetentionError(HubError):
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


class ArrivalOrderError(HubError):
    """Supplied arrival times would make a partition's arrival clock go backwards; nothing was written."""


class ArrivalAheadError(HubError):
    """Supplied arrival times lie further ahead of the broker clock than the hub allows
    (``max_arrival_ahead``): one skewed or hostile producer would move every consumer's
    clock and make retention delete recent data. Nothing was written."""
