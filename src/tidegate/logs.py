"""The partitioned log a job reads: the embedded event log or a Kafka topic, behind one interface.

Start planning, micro-batch planning, estimates and health ask a log the same questions
whichever it is (:class:`PartitionedLog`); :func:`input_location` says where a job's
input is, :func:`open_log` opens it, :func:`source_options` says how the ``tidegate``
Spark source reads it. Nothing here imports pyspark.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator, Mapping, Protocol

import pyarrow as pa

from tidegate.errors import ConfigError
from tidegate.hub import EventLog, LogSnapshot, PartitionInfo
from tidegate.kafka.client import KafkaTopic, check_options
from tidegate.kafka.connections import KafkaConnection, load_connections, resolve
from tidegate.log_set import CompositeLog, LogSet

LogLocation = Path | KafkaTopic | LogSet  # a hub directory, a topic and how to reach it, or each input's


class PartitionedLog(Protocol):
    """Ordered partitions of events with dense-enough offsets and broker-stamped arrival
    times that never decrease within a partition; ``[start, end)`` everywhere."""

    partitions: int
    clock_mode: str

    @property
    def root(self) -> object: ...  # how messages name the log

    def start_offset(self, partition: int) -> int: ...  # earliest retained

    def end_offset(self, partition: int) -> int: ...  # next to be written

    def snapshot(self) -> LogSnapshot: ...  # end offsets and a clock: later events arrive at it or after

    def clock_now_us(self) -> int: ...  # the broker clock now: start mode ``now``, delays

    def offset_for_arrival(self, partition: int, t_us: int) -> int: ...  # RetentionError if deleted

    def check_retained(self, partition: int, offset: int) -> None: ...  # RetentionError if deleted

    def arrival_at(self, partition: int, offset: int) -> int: ...

    def describe(self) -> list[PartitionInfo]: ...

    def read_batches(self, partition: int, start_offset: int, end_offset: int) -> Iterator[pa.RecordBatch]: ...


def input_location(spec, default_hub: Path,
                   connections: Mapping[str, KafkaConnection] | None = None) -> LogLocation:
    """Where the job of ``spec`` reads: its Kafka topic (on the brokers of its connection, or
    those it names; ``connections``: the operator's, default this process's), its hub, or
    ``default_hub`` — or, when its inputs read their own logs, each input's
    (:class:`~tidegate.log_set.LogSet`)."""
    if connections is None and (spec.source.kafka is not None or spec.own_logs):
        connections = load_connections()
    if spec.own_logs:
        return LogSet(tuple((i.name, _location(i.own.source, f"{spec.name} input {i.name}", default_hub, connections))
                            for i in spec.inputs))  # fmt: skip
    return _location(spec.source, f"job {spec.name}", default_hub, connections)


def _location(source, who: str, default_hub: Path, connections) -> Path | KafkaTopic:
    """Where one source (``source``, or an input's) reads: its topic, its hub, or ``default_hub``."""
    kafka = source.kafka
    if kafka is not None:
        where = f"{who}: source.kafka"
        check_options(kafka.options, f"{where}.options")  # a version stored before the allowlist
        bootstrap, conn = resolve(kafka.connection, kafka.bootstrap_servers, connections or {}, where)
        return KafkaTopic(bootstrap, kafka.topic, dict(kafka.options), conn.name if conn else "")
    return (Path(source.hub) if source.hub else default_hub).resolve()


def open_log(location: LogLocation) -> PartitionedLog:
    """The log at ``location``; a Kafka topic is checked to carry append times."""
    if isinstance(location, LogSet):
        return CompositeLog(location, [open_log(where) for _, where in location.parts])
    if isinstance(location, KafkaTopic):
        from tidegate.kafka.log import KafkaLog

        return KafkaLog(location)
    return EventLog.open(location)


def source_options(location: LogLocation) -> dict[str, str]:
    """Options of the ``tidegate`` Spark source that read ``location``."""
    if isinstance(location, LogSet):
        return {"inputs": json.dumps([{"name": name, **source_options(where)} for name, where in location.parts])}
    if isinstance(location, KafkaTopic):
        return location.source_options()
    return {"hub": str(location)}


def describe_location(location: LogLocation) -> str:
    """One line for run rows and messages (no credentials: they are never in a location)."""
    if isinstance(location, LogSet):
        return str(location)
    if isinstance(location, KafkaTopic):
        via = f" (connection {location.connection})" if location.connection else ""
        return f"kafka://{location.bootstrap_servers}/{location.topic}{via}"
    return str(location)
