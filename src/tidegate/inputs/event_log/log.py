"""``EventLog``: the embedded, partitioned, append-only event log (the role Event Hubs plays).

Layout under ``root``::

    event-log.json                 settings (EventLogConfig)
    clock                    the broker clock's stored value (see clock.py)
    p-00000/                 one directory per partition
        lock                 flock'ed by writers (exclusive) and snapshots (shared)
        retention.json       what retention deleted (segments.RetentionState)
        acked                the end offset of the last acknowledged append (marks.py)
        holes-000001.json    damaged spans `tidegate event-log repair` moved aside (marks.py)
        00000000000000000000.seg   frames (frames.py), named by their first offset
    quarantine/p-00000/      the bytes repair moved aside, each with a JSON record (verify.py)

Offsets are dense per partition from 0 and never reused: an acknowledged frame is never
cut, and damage keeps its offsets (as a hole, once repaired). Arrival times are stamped
by the log and never decrease within a partition. Payloads are stored as given —
validating them is the engine's job, which must be able to quarantine malformed ones.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

import numpy as np
import pyarrow as pa

from tidegate.eventtime.durations import format_time_us, parse_duration_us
from tidegate.files import flocked, flocked_all
from tidegate.inputs.event_log import clock as clocks
from tidegate.inputs.event_log.columns import table_columns, text_columns
from tidegate.inputs.event_log.config import DEFAULT_MAX_ARRIVAL_AHEAD, DEFAULT_SEGMENT_BYTES, EventLogConfig
from tidegate.inputs.event_log.config import exists as log_exists
from tidegate.inputs.event_log.errors import EventLogError
from tidegate.inputs.event_log.frames import STORED_SCHEMA, Damage, Frame
from tidegate.inputs.event_log.info import AppendResult, LogSnapshot, PartitionInfo
from tidegate.inputs.event_log.reader import EVENT_SCHEMA, OnCorrupt, frame_arrivals, read_event_batches
from tidegate.inputs.event_log.retention import apply_retention, check_arrival_retained, check_offset_retained
from tidegate.inputs.event_log.segments import LOCK_NAME, PartitionIndex, partition_dir_name
from tidegate.inputs.event_log.writer import PartitionWriter, Tail

__all__ = ["AppendResult", "EventLog", "LogSnapshot", "PartitionInfo", "EVENT_SCHEMA"]


class EventLog:
    """Open with :meth:`open`, make with :meth:`create`. Safe to share between threads."""

    def __init__(self, root: Path, config: EventLogConfig, now_us: Callable[[], int] | None = None) -> None:
        self.root = Path(root)
        self.config = config
        self._now_us = now_us or clocks.wall_clock_us
        self._indexes = [PartitionIndex(self.root / partition_dir_name(p), p) for p in range(config.partitions)]
        self._writers = [PartitionWriter(ix, config.segment_bytes) for ix in self._indexes]

    # --- making and opening -------------------------------------------------------

    @classmethod
    def create(
        cls,
        root: str | Path,
        partitions: int,
        clock: str = "wall",
        retention: str | int | None = None,
        retention_bytes: int | None = None,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        now_us: Callable[[], int] | None = None,
        max_arrival_ahead: str | int | None = DEFAULT_MAX_ARRIVAL_AHEAD,
    ) -> EventLog:
        """A new, empty log at ``root`` (which must not hold one already).

        ``max_arrival_ahead`` (a duration such as ``"5m"``, or None for no bound): how far a
        supplied arrival time may lie ahead of a wall clock (see clock.py)."""
        root = Path(root)
        if log_exists(root):
            raise EventLogError(f"{root} already holds an event log", "open it, or choose another path")
        now = now_us or clocks.wall_clock_us
        config = EventLogConfig(
            partitions=partitions,
            clock=clock,  # type: ignore[arg-type]  # validated by EventLogConfig
            retention_us=None if retention is None else parse_duration_us(retention, field="retention"),
            retention_bytes=retention_bytes,
            segment_bytes=segment_bytes,
            max_arrival_ahead_us=None if max_arrival_ahead is None
            else parse_duration_us(max_arrival_ahead, field="max_arrival_ahead"),
            created=format_time_us(now()),
        )  # fmt: skip
        root.mkdir(parents=True, exist_ok=True)
        for p in range(partitions):
            pdir = root / partition_dir_name(p)
            pdir.mkdir(exist_ok=True)
            (pdir / LOCK_NAME).touch()
        (root / clocks.CLOCK_LOCK_NAME).touch()
        clocks.write_stored_clock(root, 0)
        config.save(root)  # last: a log exists once event-log.json does
        return cls(root, config, now_us)

    @staticmethod
    def exists(root: str | Path) -> bool:
        """True when ``root`` holds an event log (made under either name of its settings file)."""
        return log_exists(Path(root))

    @classmethod
    def open(cls, root: str | Path, now_us: Callable[[], int] | None = None) -> EventLog:
        root = Path(root)
        return cls(root, EventLogConfig.load(root), now_us)

    @property
    def partitions(self) -> int:
        return self.config.partitions

    @property
    def clock_mode(self) -> str:
        return self.config.clock

    def __repr__(self) -> str:
        return f"EventLog({str(self.root)!r}, partitions={self.partitions}, clock={self.clock_mode!r})"

    # --- appending ------------------------------------------------------------------

    def append(
        self,
        partition: int,
        keys: Sequence[str | None],
        payloads: Sequence[str],
        arrival_times: Sequence[int] | None = None,
        fsync: bool = True,
    ) -> AppendResult:
        """Append events as one frame. Without ``arrival_times`` the log stamps them
        (the broker's clock); with them (import/backfill) they are checked, and on any
        violation :class:`ArrivalOrderError` is raised and nothing is written."""
        key_array, payload_array = text_columns(partition, keys, payloads)
        arrivals = None if arrival_times is None else np.asarray(arrival_times, dtype=np.int64)
        return self._append(partition, key_array, payload_array, arrivals, fsync)

    def append_table(self, partition: int, table: pa.Table, fsync: bool = True) -> AppendResult:
        """Fast path for generators: columns ``key``, ``payload`` and optionally
        ``arrival_time`` (int64 µs or timestamp) — appended as one frame."""
        return self._append(partition, *table_columns(partition, table), fsync)

    def _append(
        self, partition: int, keys: pa.Array, payloads: pa.Array, arrivals: np.ndarray | None, fsync: bool
    ) -> AppendResult:
        self._check_partition(partition)
        n = len(payloads)
        if payloads.null_count:
            raise EventLogError(
                f"append to partition {partition}: {payloads.null_count} payloads are null",
                "store malformed input as text (even empty text); null is not a payload",
            )
        if arrivals is not None and len(arrivals) != n:
            raise EventLogError(
                f"append to partition {partition}: {len(arrivals)} arrival times for {n} events",
                "give one arrival time per event, or none",
            )

        def stamp(tail: Tail) -> pa.RecordBatch:  # runs under the partition's lock
            now = self._now_us() if self.clock_mode == "wall" else None
            stored = clocks.read_stored_clock(self.root)
            column = clocks.arrivals_for_append(
                tail, n, arrivals, stored_us=stored, now_us=now, max_ahead_us=self.config.max_arrival_ahead_us
            )
            return pa.RecordBatch.from_arrays([pa.array(column, type=pa.int64()), keys, payloads], schema=STORED_SCHEMA)

        tail, batch = self._writers[partition].append(stamp, fsync=fsync)
        if not n:
            return AppendResult(partition, tail.end_offset, 0, None, None)
        stamped = batch.column(0)
        return AppendResult(partition, tail.end_offset, n, stamped[0].as_py(), stamped[n - 1].as_py())

    # --- the broker clock -----------------------------------------------------------

    def clock_now_us(self) -> int:
        return self._clock_now([self._last_arrival(p) for p in range(self.partitions)])

    def _clock_now(self, last_arrivals: list[int | None]) -> int:
        stored = clocks.read_stored_clock(self.root)
        if self.clock_mode == "manual":
            return stored
        return max([self._now_us(), stored, *(a for a in last_arrivals if a is not None)])

    def advance_clock(self, t_us: int) -> int:
        """Move a manual clock forward to ``t_us`` (no-op if already there); the new clock."""
        if self.clock_mode != "manual":
            raise EventLogError(
                f"{self.root} runs on the wall clock; it cannot be advanced by hand",
                "create the event log with --clock manual for simulated time",
            )
        with flocked(self.root / clocks.CLOCK_LOCK_NAME, exclusive=True):
            current = clocks.read_stored_clock(self.root)
            if t_us < current:
                raise EventLogError(
                    f"cannot move the clock of {self.root} back from {format_time_us(current)}"
                    f" to {format_time_us(t_us)}",
                    "the broker clock never goes backwards; give a time at or after the current one",
                )
            if t_us > current:
                clocks.write_stored_clock(self.root, t_us)
        return int(t_us)

    def snapshot(self) -> LogSnapshot:
        """End offsets and clock under shared locks of all partitions, so no append is half
        counted, and every later append arrives at ``clock_us`` or after.

        Lock order, here and in every writer: partition flocks (in partition order) before
        a partition's in-process index lock — so appending and snapshotting threads of
        one process cannot deadlock."""
        with flocked_all([ix.lock_path for ix in self._indexes], exclusive=False):
            ends, lasts = [], []
            for ix in self._indexes:
                with ix.lock:
                    ix.refresh()
                    ends.append(ix.end_offset())
                    lasts.append(ix.last_arrival())
            clock = self._clock_now(lasts)
            if self.clock_mode == "wall":
                self._raise_floor(clock)
        return LogSnapshot(tuple(ends), clock)

    def _raise_floor(self, t_us: int) -> None:
        # the contract holds even if the wall clock steps back: later appends read this floor
        with flocked(self.root / clocks.CLOCK_LOCK_NAME, exclusive=True):
            if clocks.read_stored_clock(self.root) < t_us:
                clocks.write_stored_clock(self.root, t_us)

    # --- positions --------------------------------------------------------------------

    @contextlib.contextmanager
    def _partition(self, partition: int) -> Iterator[PartitionIndex]:
        """The partition's index, refreshed from disk, held for the ``with`` block."""
        self._check_partition(partition)
        ix = self._indexes[partition]
        with ix.lock:
            ix.refresh()
            yield ix

    def end_offset(self, partition: int) -> int:
        with self._partition(partition) as ix:
            return ix.end_offset()

    def start_offset(self, partition: int) -> int:
        with self._partition(partition) as ix:
            return ix.start_offset()

    def _last_arrival(self, partition: int) -> int | None:
        with self._partition(partition) as ix:
            return ix.last_arrival()

    def check_retained(self, partition: int, offset: int) -> None:
        """RetentionError (naming the missing offsets and arrivals) if ``offset`` was deleted."""
        with self._partition(partition) as ix:
            check_offset_retained(ix, offset)

    def offset_for_arrival(self, partition: int, t_us: int) -> int:
        """The first offset whose arrival is ``>= t_us`` (the end offset if none).

        RetentionError if events arriving at or after ``t_us`` may have been deleted.
        """
        with self._partition(partition) as ix:
            check_arrival_retained(ix, t_us)
            found = ix.first_frame_reaching(t_us)
            if found is None:
                return ix.end_offset()
            start = ix.start_offset()
        arrivals = self._arrivals_in(partition, found, lambda ix: check_arrival_retained(ix, t_us))
        # in a frame that cannot be read, any of its events may be the first: start at it
        skip = 0 if arrivals is None else int(np.searchsorted(arrivals, t_us, side="left"))
        return max(found[1].first_offset + skip, start)

    def arrival_at(self, partition: int, offset: int) -> int:
        """Arrival time (µs) of the event at ``offset``. For an offset that cannot be read
        (damage, a repaired hole), the earliest it can have arrived — arrivals never
        decrease — so a clock promised from it never claims too much."""
        with self._partition(partition) as ix:
            check_offset_retained(ix, offset)
            found = [e for e in ix.frames_between(offset, offset + 1) if e[1].end_offset > offset]
        if not found:
            raise EventLogError(
                f"partition {partition}: no event at offset {offset}", "ask for an offset below end_offset(partition)"
            )
        arrivals = self._arrivals_in(partition, found[0], lambda ix: check_offset_retained(ix, offset))
        entry = found[0][1]
        return int(entry.min_arrival if arrivals is None else arrivals[offset - entry.first_offset])

    def _arrivals_in(
        self, partition: int, found: tuple[Path, Frame | Damage], check: Callable[[PartitionIndex], None]
    ) -> np.ndarray | None:
        try:
            return frame_arrivals(partition, found)
        except FileNotFoundError:
            self._segment_vanished(partition, check)

    def _segment_vanished(self, partition: int, check: Callable[[PartitionIndex], None]) -> NoReturn:
        # retention deleted a segment between indexing and reading it: say what is gone
        with self._partition(partition) as ix:
            check(ix)
        raise EventLogError(
            f"partition {partition}: a segment disappeared while it was read",
            "retention or an operator removed files under a reader; retry the read",
        )

    # --- reading ----------------------------------------------------------------------

    def read(self, partition: int, start_offset: int, end_offset: int) -> pa.Table:
        """Events ``[start_offset, end_offset)`` with columns of :data:`EVENT_SCHEMA`."""
        return pa.Table.from_batches(list(self.read_batches(partition, start_offset, end_offset)), schema=EVENT_SCHEMA)

    def read_batches(
        self, partition: int, start_offset: int, end_offset: int, max_rows: int = 65536,
        on_corrupt: OnCorrupt | None = None,
    ) -> Iterator[pa.RecordBatch]:  # fmt: skip
        """Events ``[start_offset, end_offset)`` as record batches of at most ``max_rows``.

        Damage raises :class:`CorruptFrameError`; with ``on_corrupt`` its offsets are skipped
        and the error passed to it instead. Repaired holes are skipped (and passed to it)."""
        if max_rows < 1:
            raise EventLogError(f"max_rows is {max_rows}", "read at least one row per batch")
        frames = self.frames(partition, start_offset, end_offset)
        batches = read_event_batches(partition, frames, start_offset, end_offset, max_rows, on_corrupt)
        return self._guarded(partition, start_offset, batches)

    def frames(self, partition: int, start_offset: int, end_offset: int) -> list[tuple[Path, Frame | Damage]]:
        """The frames holding events ``[start_offset, end_offset)`` and their segment files,
        in order (for readers that decode frames themselves, as the JVM source does), with
        any damaged span or repaired hole among them in its place."""
        with self._partition(partition) as ix:
            end = ix.end_offset()
            if not 0 <= start_offset <= end_offset <= end:
                raise EventLogError(
                    f"partition {partition}: cannot read offsets [{start_offset}, {end_offset}); it holds [0, {end})",
                    "read a range with start <= end <= end_offset(partition)",
                )
            check_offset_retained(ix, start_offset)
            return ix.frames_between(start_offset, end_offset)

    def _guarded(self, partition: int, start: int, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            yield from batches
        except FileNotFoundError:
            self._segment_vanished(partition, lambda ix: check_offset_retained(ix, start))

    # --- retention and description ----------------------------------------------------

    def set_retention(self, retention: str | None, retention_bytes: int | None) -> None:
        """Change the retention settings (applied by the next :meth:`apply_retention`).

        ``retention`` is a duration such as ``"7d"`` (None: no age limit)."""
        retention_us = None if retention is None else parse_duration_us(retention, field="retention")
        self.config = self.config.with_retention(retention_us, retention_bytes)
        self.config.save(self.root)

    def apply_retention(self) -> list[Path]:
        """Delete what retention allows from every partition; the deleted segment files."""
        self.config = EventLogConfig.load(self.root)  # another process may have changed the settings
        if self.config.retention_us is None and self.config.retention_bytes is None:
            return []
        # the event log's own clock, not clock_now_us(): one arrival far ahead must not age the rest
        now = self._now_us() if self.clock_mode == "wall" else clocks.read_stored_clock(self.root)
        deleted: list[Path] = []
        for ix in self._indexes:
            deleted += apply_retention(
                ix, retention_us=self.config.retention_us, retention_bytes=self.config.retention_bytes, now_us=now
            )
        return deleted

    def describe(self) -> list[PartitionInfo]:
        infos = []
        for p in range(self.partitions):
            with self._partition(p) as ix:
                infos.append(
                    PartitionInfo(
                        partition=p,
                        start_offset=ix.start_offset(),
                        end_offset=ix.end_offset(),
                        first_arrival_us=ix.first_arrival(),
                        last_arrival_us=ix.last_arrival(),
                        bytes=ix.retained_bytes(),
                        segments=len(ix.segments),
                    )
                )
        return infos

    def _check_partition(self, partition: int) -> None:
        if not isinstance(partition, (int, np.integer)) or not 0 <= partition < self.partitions:
            raise EventLogError(
                f"{self.root} has partitions 0–{self.partitions - 1}; got {partition!r}",
                "pick a partition in range, or let the producer route by key",
            )
