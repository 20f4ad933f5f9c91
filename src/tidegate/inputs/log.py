"""The partitioned log a job reads: the embedded event log or a Kafka topic, behind one interface.

Start planning, micro-batch planning, estimates and health ask a log the same questions
whichever it is (:class:`PartitionedLog`); :func:`input_location` says where a job's
input is, :func:`open_log` opens it, :func:`source_options` says how the ``tidegate``
Spark source reads it. Nothing here imports pyspark.

Where a log is — a directory (the embedded log), a :class:`~tidegate.inputs.kafka.client.KafkaTopic`,
or a :class:`~tidegate.inputs.log_set.LogSet` (each input its own log) — decides its kind. :data:`KINDS` is the
registry by kind: how to open the log at a location, the source options that read it, and the
line that names it. A new input is one more :class:`LogKind` there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from tidegate.inputs.event_log import EventLog, LogSnapshot, PartitionInfo
from tidegate.inputs.kafka.client import KafkaTopic, jvm_reader
from tidegate.inputs.kafka.connections import KafkaConnection, load_allowed_hosts, load_connections, resolve
from tidegate.inputs.log_set import CompositeLog, LogSet
from tidegate.jobspec.folders import confined_log
from tidegate.jobspec.folders import log_dirs as default_log_dirs
from tidegate.jobspec.source import check_options, tidegate_home


class PartitionedLog(Protocol):
    """Ordered partitions of events with dense-enough offsets and broker-stamped arrival
    times that never decrease within a partition; ``[start, end)`` everywhere."""

    @property
    def partitions(self) -> int: ...

    @property
    def clock_mode(self) -> str: ...

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


LogLocation = Path | KafkaTopic | LogSet  # an event log directory, a topic and how to reach it, or each input's


def input_location(
    spec,
    default_event_log: Path,
    connections: Mapping[str, KafkaConnection] | None = None,
    allowed_hosts: Sequence[str] | None = None,
    log_dirs: Sequence[Path] | None = None,
) -> LogLocation:
    """Where the job of ``spec`` reads: its Kafka topic (on the brokers of its connection, or
    those it names, which must be allowed hosts; ``connections`` and ``allowed_hosts``: the
    operator's, default this process's), its event log, or ``default_event_log`` — or, when its inputs
    read their own logs, each input's (:class:`~tidegate.inputs.log_set.LogSet`). Every start of a job (the controller's
    plan, the driver) passes here before any Kafka client connects. An event log the spec names must
    resolve inside ``log_dirs``, the event-log folders (default: this process's
    ``TIDEGATE_LOG_DIRS``; :func:`tidegate.jobspec.folders.confined_log`); it is given back resolved."""
    if log_dirs is None:
        log_dirs = default_log_dirs(os.environ, tidegate_home(), Path.cwd())
    if spec.source.kafka is not None or spec.own_logs:
        connections = load_connections() if connections is None else connections
        allowed_hosts = load_allowed_hosts() if allowed_hosts is None else allowed_hosts
    if spec.own_logs:
        return LogSet(tuple((i.name, _location(i.own.source, f"{spec.name} input {i.name}", default_event_log,
                                               connections, allowed_hosts, log_dirs))
                            for i in spec.inputs))  # fmt: skip
    return _location(spec.source, f"job {spec.name}", default_event_log, connections, allowed_hosts, log_dirs)


def _location(source, who: str, default_event_log: Path, connections, allowed_hosts, log_dirs) -> Path | KafkaTopic:
    """Where one source (``source``, or an input's) reads: its topic, its event log, or ``default_event_log``."""
    kafka = source.kafka
    if kafka is not None:
        where = f"{who}: source.kafka"
        options = check_options(kafka.options, f"{where}.options")  # a version stored before the allowlist
        bootstrap, conn = resolve(kafka.connection, kafka.bootstrap_servers, connections or {}, where,
                                  allowed_hosts or ())  # fmt: skip
        jvm_reader(kafka.reader, conn.security_protocol if conn else "PLAINTEXT", options, where)  # refused here
        return KafkaTopic(bootstrap, kafka.topic, options, conn.name if conn else "", kafka.reader)
    if source.event_log is None:
        return default_event_log.resolve()  # the operator's
    return confined_log(
        source.event_log, f"{who}: source.event_log", log_dirs, Path.cwd()
    )  # the spec's: in the log folders


def kafka_topics(location: LogLocation) -> list[KafkaTopic]:
    """The Kafka topics a job at ``location`` reads (none for the embedded log)."""
    if isinstance(location, LogSet):
        return [topic for _, where in location.parts for topic in kafka_topics(where)]
    return [location] if isinstance(location, KafkaTopic) else []


@dataclass(frozen=True)
class LogKind:
    """One kind of log, known by the type of its location."""

    name: str
    location: type  # what says where a log of this kind is
    open: Callable[[Any], PartitionedLog]
    source_options: Callable[[Any], dict[str, str]]  # the ``tidegate`` Spark source's options that read it
    describe: Callable[[Any], str]  # one line for run rows and messages (never credentials)


def _open_set(location: LogSet) -> PartitionedLog:
    return CompositeLog(location, [open_log(where) for _, where in location.parts])


def _set_options(location: LogSet) -> dict[str, str]:
    return {"inputs": json.dumps([{"name": name, **source_options(where)} for name, where in location.parts])}


def _open_kafka(location: KafkaTopic) -> PartitionedLog:
    from tidegate.inputs.kafka.log import KafkaLog  # confluent-kafka: loaded by the jobs that read Kafka

    return KafkaLog(location)


# a location is of the first kind whose type it has: the embedded log's, a directory, comes last
KINDS = (
    LogKind("set", LogSet, _open_set, _set_options, str),
    LogKind("kafka", KafkaTopic, _open_kafka, KafkaTopic.source_options, KafkaTopic.describe),
    LogKind("event_log", object, EventLog.open, lambda directory: {"event_log": str(directory)}, str),
)  # fmt: skip


def kind_of(location: LogLocation) -> LogKind:
    """The kind of log at ``location``."""
    return next(kind for kind in KINDS if isinstance(location, kind.location))


def open_log(location: LogLocation) -> PartitionedLog:
    """The log at ``location``; a Kafka topic is checked to carry append times."""
    return kind_of(location).open(location)


def source_options(location: LogLocation) -> dict[str, str]:
    """Options of the ``tidegate`` Spark source that read ``location``."""
    return kind_of(location).source_options(location)


def describe_location(location: LogLocation) -> str:
    """One line for run rows and messages (no credentials: they are never in a location)."""
    return kind_of(location).describe(location)
