"""Buffered sending with key routing, as a Kafka/Event Hubs producer does it."""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

from tidegate.inputs.event_log.errors import EventLogError

if TYPE_CHECKING:
    from tidegate.inputs.event_log.log import AppendResult, EventLog

PARTITIONERS = ("hash", "round_robin")


def partition_for_key(key: str, partitions: int) -> int:
    """The partition a key lives on: ``crc32(utf-8 key) % partitions`` (stable across runs and hosts)."""
    return zlib.crc32(key.encode("utf-8")) % partitions


class Producer:
    """Routes each event to a partition and appends buffered events one frame per partition.

    ``hash`` sends a key always to the same partition (events without a key go round
    robin); ``round_robin`` ignores keys. Events are written at :meth:`flush`, when a
    partition's buffer reaches ``batch_size``, or when a ``with`` block ends.
    """

    def __init__(self, log: EventLog, partitioner: str = "hash", batch_size: int = 1000, fsync: bool = True) -> None:
        if partitioner not in PARTITIONERS:
            raise EventLogError(f"partitioner is {partitioner!r}", f"use one of {', '.join(PARTITIONERS)}")
        if batch_size < 1:
            raise EventLogError(f"producer batch_size is {batch_size}", "buffer at least one event")
        self.log = log
        self.partitioner = partitioner
        self.batch_size = batch_size
        self.fsync = fsync
        self._next = 0
        self._keys: list[list[str | None]] = [[] for _ in range(log.partitions)]
        self._payloads: list[list[str]] = [[] for _ in range(log.partitions)]

    def partition_for(self, key: str | None) -> int:
        if key is not None and self.partitioner == "hash":
            return partition_for_key(key, self.log.partitions)
        p = self._next
        self._next = (p + 1) % self.log.partitions
        return p

    def send(self, key: str | None, payload: str, partition: int | None = None) -> int:
        """Buffer one event; the partition it goes to."""
        p = self.partition_for(key) if partition is None else partition
        if not 0 <= p < self.log.partitions:
            raise EventLogError(f"partition {p} is out of range 0–{self.log.partitions - 1}", "omit it to route by key")
        self._keys[p].append(key)
        self._payloads[p].append(payload)
        if len(self._payloads[p]) >= self.batch_size:
            self._flush_partition(p)
        return p

    def flush(self) -> list[AppendResult]:
        """Append everything buffered; one result per partition that had events."""
        return [r for p in range(self.log.partitions) if (r := self._flush_partition(p)) is not None]

    def _flush_partition(self, p: int) -> AppendResult | None:
        if not self._payloads[p]:
            return None
        keys, payloads = self._keys[p], self._payloads[p]
        result = self.log.append(p, keys, payloads, fsync=self.fsync)
        self._keys[p], self._payloads[p] = [], []  # only once written: a failed append keeps them
        return result

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.flush()
