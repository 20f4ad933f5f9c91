"""A job's several logs: where each input reads (:class:`LogSet`) and those logs as one
partitioned log (:class:`CompositeLog`).

A join job may read two logs (two event logs, two Kafka topics, or one of each), or one
log twice with two payloads or event times: ``inputs.<name>.source``, ``payload``,
``timestamp_by``, ``policy`` (docs/reference/jobspec.md). Each input then has its **own partitions**:
the set lays the inputs' logs end to end, the first input's partitions first, so input
``i``'s partition ``q`` is the job's partition ``base_i + q``. Everything that plans over
partitions — start positions, micro-batch ends, per-batch limits, the offsets a checkpoint
records, backlogs, the completeness check's positions — then works unchanged on the job's
partition numbers, and the policy keeps one state per partition as it always does.

**The clock.** A snapshot promises that every event past its end offsets arrives at its
clock or later (:mod:`tidegate.lineage.offsets`); each log keeps that promise for its own
events, so the set's clock is the **earliest** of the logs' clocks. The job watermark is the
minimum over every input's units anyway, so an idle partition of the faster log, held to the
slower clock, holds back nothing the slower log would not.

The layout is fixed by the inputs' order and their logs' partition counts: a log that gains
partitions changes the job's partition space, which a checkpoint refuses as it refuses a
topic that gained partitions. Nothing here imports pyspark.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from tidegate.errors import ConfigError
from tidegate.inputs.event_log import LogSnapshot, PartitionInfo, RetentionError
from tidegate.inputs.kafka.client import KafkaTopic


@dataclass(frozen=True)
class LogSet:
    """Where each input of a job reads: (input name, an event log directory or a Kafka topic),
    in the inputs' order. A location like an event log's path or a topic, for
    :func:`~tidegate.inputs.log.open_log`, which opens it as a :class:`CompositeLog`."""

    parts: tuple[tuple[str, Path | KafkaTopic], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.parts)

    def __str__(self) -> str:
        return ", ".join(f"{name}={where.describe() if isinstance(where, KafkaTopic) else where}"
                         for name, where in self.parts)  # fmt: skip


@dataclass(frozen=True)
class InputLayout:
    """Which of the job's partitions each input owns: input ``i`` has ``[bases[i], bases[i] + counts[i])``."""

    names: tuple[str, ...]
    counts: tuple[int, ...]

    @property
    def bases(self) -> tuple[int, ...]:
        out, at = [], 0
        for n in self.counts:
            out.append(at)
            at += n
        return tuple(out)

    @property
    def partitions(self) -> int:
        return sum(self.counts)

    def span(self, name: str) -> range:
        i = self.names.index(name)
        return range(self.bases[i], self.bases[i] + self.counts[i])

    def locate(self, partition: int) -> tuple[int, int]:
        """(input index, the partition in that input's log) of a job partition."""
        for i, (base, n) in enumerate(zip(self.bases, self.counts, strict=True)):
            if base <= partition < base + n:
                return i, partition - base
        raise ConfigError(f"partition {partition} is not one of this job's {self.partitions} partitions",
                          f"name partitions 0–{self.partitions - 1}: {self.describe()}")  # fmt: skip

    def input_of(self, partition: int) -> str:
        return self.names[self.locate(partition)[0]]

    def describe(self) -> str:
        return ", ".join(f"{name} {s.start}–{s.stop - 1}" for name in self.names if (s := self.span(name)))


class CompositeLog:
    """The logs of a :class:`LogSet` end to end, answering what a
    :class:`~tidegate.inputs.log.PartitionedLog` answers."""

    clock_mode = "wall"

    def __init__(self, where: LogSet, logs: Sequence) -> None:  # logs: each part's, opened
        self.where = where
        self.logs = list(logs)
        self.layout = InputLayout(where.names, tuple(log.partitions for log in self.logs))
        self.partitions = self.layout.partitions

    @property
    def root(self) -> object:  # the LogSet
        return self.where

    def __repr__(self) -> str:
        return f"CompositeLog({self.where})"

    def _at(self, partition: int):
        i, local = self.layout.locate(partition)
        return self.logs[i], local, self.layout.bases[i]

    def log_at(self, partition: int):
        """(the log holding the partition, its partition number there)."""
        log, local, _ = self._at(partition)
        return log, local

    def part(self, partition: int) -> tuple[object, int]:
        """(where the partition's log is, its partition number there)."""
        i, local = self.layout.locate(partition)
        return self.where.parts[i][1], local

    def start_offset(self, partition: int) -> int:
        log, local, _ = self._at(partition)
        return log.start_offset(local)

    def end_offset(self, partition: int) -> int:
        log, local, _ = self._at(partition)
        return log.end_offset(local)

    def snapshot(self) -> LogSnapshot:
        snaps = [log.snapshot() for log in self.logs]
        return LogSnapshot(tuple(o for s in snaps for o in s.end_offsets), min(s.clock_us for s in snaps))

    def clock_now_us(self) -> int:
        return min(log.clock_now_us() for log in self.logs)

    def offset_for_arrival(self, partition: int, t_us: int) -> int:
        log, local, base = self._at(partition)
        try:
            return log.offset_for_arrival(local, t_us)
        except RetentionError as exc:
            raise _renumbered(exc, base) from None

    def check_retained(self, partition: int, offset: int) -> None:
        log, local, base = self._at(partition)
        try:
            log.check_retained(local, offset)
        except RetentionError as exc:
            raise _renumbered(exc, base) from None

    def arrival_at(self, partition: int, offset: int) -> int:
        log, local, _ = self._at(partition)
        return log.arrival_at(local, offset)

    def describe(self) -> list[PartitionInfo]:
        out = []
        for log, base in zip(self.logs, self.layout.bases, strict=True):
            for info in log.describe():
                out.append(replace(info, partition=base + info.partition))
        return out

    def read_batches(self, partition: int, start_offset: int, end_offset: int) -> Iterator[pa.RecordBatch]:
        log, local, _ = self._at(partition)
        for batch in log.read_batches(local, start_offset, end_offset):
            yield renumber(batch, partition)


def renumber(batch: pa.RecordBatch, partition: int) -> pa.RecordBatch:
    """``batch`` with its ``partition`` column set to the job's partition number."""
    at = batch.schema.get_field_index("partition")
    column = pa.array(np.full(batch.num_rows, partition, dtype=np.int32)).cast(batch.schema.field(at).type)
    return batch.set_column(at, batch.schema.field(at), column)


def _renumbered(exc: RetentionError, base: int) -> RetentionError:
    """A log's retention error, its partition named as the job numbers it."""
    if base == 0:
        return exc
    return RetentionError(f"{exc.problem} (the job's partition {exc.partition + base})", exc.fix,
                          partition=exc.partition + base, missing_offsets=exc.missing_offsets,
                          missing_arrivals=exc.missing_arrivals,
                          first_available_offset=exc.first_available_offset)  # fmt: skip


def layout_of(log) -> InputLayout | None:
    """Which inputs own which partitions of ``log``: None for one log read by every input."""
    return log.layout if isinstance(log, CompositeLog) else None
