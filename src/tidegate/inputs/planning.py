"""Where a read of a partitioned log starts and ends, and where each micro-batch ends — without Spark.

The ``tidegate`` Spark source (:mod:`tidegate.spark.pipeline.source`) asks these questions every
trigger; the runtime asks them too, before any Spark session exists — an estimate of how
long a replay takes reads the arrival of the first unread event. They are decisions over
the offsets, arrivals and clock of a :class:`~tidegate.inputs.log.PartitionedLog` alone (the event log
or a Kafka topic), so they live apart from the Spark adapter, free of pyspark: the
controller, the estimator and their tests plan without starting a JVM.

The contract they keep is the source's (see :mod:`tidegate.lineage.offsets`): a batch is
``[start, end)`` per partition, and the clock recorded with its end promises that every
event not yet read arrives at that clock or later.
"""

from __future__ import annotations

from collections.abc import Sequence

from tidegate.errors import ConfigError
from tidegate.inputs.event_log import LogSnapshot, RetentionError
from tidegate.inputs.log import PartitionedLog
from tidegate.lineage.offsets import SourceError, SourceOffset

Positions = str | dict[int, int]  # "earliest", "latest", or per-partition offsets
EARLIEST, LATEST = -2, -1  # Kafka's codes inside a startingOffsets JSON


# --- resolving positions ------------------------------------------------------------------


def resolve_positions(
    log: PartitionedLog,
    positions: Positions,
    arrival_us: int | None,
    snapshot: LogSnapshot,
    *,
    accept_partial: bool,
    field: str,
) -> dict[int, int]:
    """Concrete offsets per partition for a start or end position.

    Raises RetentionError when a requested position was deleted, unless ``accept_partial``
    (then the first retained offset is used and the results are partial for that span).
    """
    n = log.partitions
    if arrival_us is not None:
        return {p: _seek_arrival(log, p, arrival_us, accept_partial) for p in range(n)}
    if positions == "earliest":
        return {p: log.start_offset(p) for p in range(n)}
    if positions == "latest":
        return dict(enumerate(snapshot.end_offsets))
    assert isinstance(positions, dict)
    if sorted(positions) != list(range(n)):
        raise ConfigError(
            f"{field} names partitions {sorted(positions)}; the log at {log.root} has partitions 0–{n - 1}",
            "name every partition once (-2 for earliest, -1 for latest)",
        )
    resolved = {}
    for p, offset in sorted(positions.items()):
        end = snapshot.end_offsets[p]
        if offset == EARLIEST:
            offset = log.start_offset(p)
        elif offset == LATEST:
            offset = end
        elif offset > end:
            raise ConfigError(
                f"{field}: partition {p} offset {offset} is past the end of the log (next offset {end})",
                "give an offset at or before the partition's end offset (see `tidegate event-log describe`)",
            )
        resolved[p] = _retained(log, p, offset, accept_partial)
    return resolved


def _retained(log: PartitionedLog, partition: int, offset: int, accept_partial: bool) -> int:
    try:
        log.check_retained(partition, offset)
    except RetentionError as exc:
        if accept_partial:
            return exc.first_available_offset
        raise _for_source(exc) from None
    return offset


def _seek_arrival(log: PartitionedLog, partition: int, t_us: int, accept_partial: bool) -> int:
    try:
        return log.offset_for_arrival(partition, t_us)
    except RetentionError as exc:
        if accept_partial:
            return exc.first_available_offset
        raise _for_source(exc) from None


def _for_source(exc: RetentionError) -> RetentionError:
    """The log's error (which names the missing span), with the source option that accepts it."""
    return RetentionError(
        exc.problem,
        f"{exc.fix}; on the Spark source that is .option('acceptPartial', 'true')",
        partition=exc.partition,
        missing_offsets=exc.missing_offsets,
        missing_arrivals=exc.missing_arrivals,
        first_available_offset=exc.first_available_offset,
    )


# --- planning a micro-batch ----------------------------------------------------------------


def fair_shares(available: Sequence[int], budget: int) -> list[int]:
    """Split ``budget`` events over partitions holding ``available`` unread events each.

    Equal shares; what a partition cannot use goes to the others; single left-over events
    go to the lowest partition numbers. Every partition with events gets at least one, so
    none starves — a budget below the number of such partitions is raised to it.
    """
    take = [0] * len(available)
    open_ = [p for p, a in enumerate(available) if a > 0]
    budget = max(budget, len(open_))
    while open_ and budget > 0:
        share = budget // len(open_)
        if share == 0:
            for p in open_[:budget]:
                take[p] += 1
            break
        still_open = []
        for p in open_:
            given = min(share, available[p] - take[p])
            take[p] += given
            budget -= given
            if take[p] < available[p]:
                still_open.append(p)
        open_ = still_open
    return take


def arrival_at(log: PartitionedLog, partition: int, offset: int) -> int:
    """Arrival time (µs) of the event at ``offset`` (for a damaged one, the earliest it can be)."""
    return log.arrival_at(partition, offset)


def plan_batch_end(
    log: PartitionedLog,
    start: SourceOffset,
    snapshot: LogSnapshot,
    *,
    max_events: int | None = None,
    max_arrival_span_us: int | None = None,
    idle_clock_interval_us: int | None = None,
) -> SourceOffset:
    """Where the micro-batch beginning at ``start`` ends, within ``snapshot`` and the limits.

    Returns ``start`` itself when there is nothing to do: no new events and the clock has
    moved less than ``idle_clock_interval_us`` (None: never run a batch just for the clock).
    """
    n = log.partitions
    if sorted(start.offsets) != list(range(n)):
        raise SourceError(
            f"the recorded offset names partitions {sorted(start.offsets)}; the log at {log.root} has 0–{n - 1}",
            "a checkpoint belongs to one log (event log or topic): start the query with a new checkpoint for this log",
        )
    begin = [start.offsets[p] for p in range(n)]
    for p in range(n):
        if begin[p] < log.start_offset(p):
            _retained(log, p, begin[p], accept_partial=False)  # the job fell behind retention: say what is gone
    # never behind the start (a start past the snapshot only comes from a re-resolved "latest")
    ends = [max(b, e) for b, e in zip(begin, snapshot.end_offsets, strict=True)]

    if max_arrival_span_us is not None:
        firsts = {p: arrival_at(log, p, begin[p]) for p in range(n) if ends[p] > begin[p]}
        if firsts:
            horizon = min(firsts.values()) + max_arrival_span_us  # last arrival this batch may read
            for p in firsts:
                ends[p] = min(ends[p], max(begin[p], log.offset_for_arrival(p, horizon + 1)))
    if max_events is not None:
        take = fair_shares([e - b for b, e in zip(begin, ends, strict=True)], max_events)
        ends = [b + t for b, t in zip(begin, take, strict=True)]

    # The clock promises that every event not yet read arrives at `clock` or later. Events
    # appended after the snapshot arrive at or after snapshot.clock_us (the log's contract).
    # But when a limit cut partition p at offset e < its snapshot end, events [e, end) are
    # older than that and still unread: they arrive at or after arrival(e) (arrivals never
    # decrease within a partition), and possibly before snapshot.clock_us. So the recorded
    # clock is the least of the snapshot clock and each cut partition's first unread
    # arrival; claiming more would let the engine close windows those events belong to.
    # It never goes back between batches: a partition cut now was either cut before at an
    # earlier offset, or read to an earlier snapshot's end, after which it only received
    # events arriving at or after that snapshot's clock.
    clock = snapshot.clock_us
    for p in range(n):
        if ends[p] < snapshot.end_offsets[p]:
            clock = min(clock, arrival_at(log, p, ends[p]))

    if ends == begin:
        clock_moved = start.clock_us is None or clock - start.clock_us >= (idle_clock_interval_us or 0)
        if idle_clock_interval_us is None or not clock_moved:
            return start
    return SourceOffset(dict(enumerate(ends)), clock)
