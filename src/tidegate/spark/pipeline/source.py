"""The ``tidegate`` Spark data source: the embedded event log as a streaming or batch DataFrame.

::

    spark.readStream.format("tidegate").option("event_log", path).load()
    spark.read.format("tidegate").option("event_log", path).load()

(Jobs and the batch path read through :func:`~tidegate.spark.pipeline.read.read_log_stream`
and :func:`~tidegate.spark.pipeline.read.read_log`, which take the JVM reader of
:mod:`tidegate.spark.pipeline.java_source` when the session has it.)

Columns: ``partition int, offset long, arrival_time timestamp, key string, payload string``;
with ``includeHeaders``, also ``headers map<string,string>`` (:mod:`tidegate.inputs.kafka.headers`).

Options (names are case-insensitive):

=========================  ===================================================================
``event_log`` (or ``load(path)``) the event log's directory — or, for a Kafka topic:
``kafka.bootstrap.servers``  the brokers, with ``topic`` and any ``kafka.<setting>`` of the
``topic``                    client (credentials come from the environment:
                            :mod:`tidegate.inputs.kafka.client`); the topic must stamp append times
``startingOffsets``         ``earliest`` (default: first retained), ``latest``, or JSON
                            ``{"0": 123, "1": -2}`` naming every partition (-2 earliest, -1 latest)
``startingArrivalTime``     ISO time: per partition the first event arriving at or after it
``acceptPartial``           ``true``: start at the first retained offset where the requested
                            start was deleted by retention, instead of failing
``endingOffsets``           batch only: ``latest`` (default) or JSON as above (exclusive)
``endingArrivalTime``       batch only: stop before the first event arriving at or after it
``maxEventsPerBatch``       streaming: at most this many events per micro-batch
``maxArrivalSpanPerBatch``  streaming: a batch reads no event arriving more than this span
                            (``10m``) after the earliest unread arrival
``idleClockInterval``       streaming: with no new events, a batch that only advances the
                            clock runs once the clock moved this much (default ``10s``; ``off``)
``onCorruptFrame``          ``fail`` (default): a damaged frame fails the batch, naming it;
                            ``quarantine``: its offsets are skipped and recorded (below)
``corruptFramePath``        with ``quarantine``: the directory of those records, one JSON file
                            per skipped span (reason ``corrupt frame``, partition, offsets,
                            segment file, byte position, problem)
``includeHeaders``          ``true``: rows carry ``headers``, the Kafka records' headers (an
                            empty map for the embedded log's events); default ``false``: they
                            are neither read nor decoded (as Spark's Kafka connector names it)
=========================  ===================================================================

Damage is found in two places: spans the log's index already knows (a bad header, stray
bytes, acknowledged frames missing) when a batch is planned, and payloads that fail their
CRC when an executor reads them. Both are skipped and recorded with ``quarantine``; holes
left by ``tidegate event-log repair`` are always skipped, and recorded with ``quarantine``.

The options are parsed (without Spark) by :mod:`tidegate.spark.pipeline.source_options`.
Each batch's end offset, with the broker clock read together with it, goes into Spark's
offset log; its format and the promise the clock makes are in :mod:`tidegate.lineage.offsets`,
which also reads it back. Where a read starts and where each batch ends is decided without
Spark, in :mod:`tidegate.inputs.planning`; this module adapts both to Spark's data source API.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import IntegerType, LongType, MapType, StringType, StructField, StructType, TimestampType

from tidegate.errors import ConfigError
from tidegate.inputs.event_log import CorruptFrameError, EventLog, LogSnapshot, RetentionError
from tidegate.inputs.event_log.reader import with_headers
from tidegate.inputs.event_log.verify import record_skipped
from tidegate.inputs.kafka.client import KafkaTopic
from tidegate.inputs.log import PartitionedLog, open_log
from tidegate.inputs.log_set import CompositeLog, renumber
from tidegate.inputs.planning import plan_batch_end, resolve_positions
from tidegate.jobspec.fields import HEADERS
from tidegate.lineage.offsets import SourceOffset, parse_offset
from tidegate.spark.pipeline.source_options import SourceOptions

SOURCE_NAME = "tidegate"
SOURCE_SCHEMA = StructType(
    [
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("arrival_time", TimestampType()),
        StructField("key", StringType()),
        StructField("payload", StringType()),
    ]
)
SOURCE_HEADERS_SCHEMA = StructType([*SOURCE_SCHEMA.fields, StructField(HEADERS, MapType(StringType(), StringType()))])
# a ReadMaxRows that never binds: lets maxArrivalSpanPerBatch tell its limit apart from
# the ReadAllAvailable Spark passes when the trigger wants everything (Trigger.Once)
_NO_ROW_LIMIT = 2**63 - 1
_ONLY = {  # options a read of the other kind would silently ignore
    "stream": {"endingoffsets", "endingarrivaltime"},
    "batch": {"maxeventsperbatch", "maxarrivalspanperbatch", "idleclockinterval"},
}


# --- Spark readers ------------------------------------------------------------------------


class LogRange(InputPartition):
    """Events ``[start, end)`` of one partition: one Spark task. With ``corrupt_path``, damaged
    frames are skipped and recorded there instead of failing the task."""

    def __init__(self, location: str | KafkaTopic, partition: int, start: int, end: int,
                 corrupt_path: str | None = None, job_partition: int | None = None,
                 headers: bool = False) -> None:  # fmt: skip
        self.location = location  # the event log's directory, or a Kafka topic
        self.partition = partition  # in that log
        self.start = start
        self.end = end
        self.corrupt_path = corrupt_path
        self.job_partition = partition if job_partition is None else job_partition  # as the job numbers it
        self.headers = headers  # read each event's headers (includeHeaders)


def _ranges(
    options: SourceOptions, log: PartitionedLog, starts: Mapping[int, int], ends: Mapping[int, int]
) -> list[LogRange]:
    corrupt = None if options.corrupt_frame_path is None else str(options.corrupt_frame_path)
    out = []
    for p in sorted(starts):
        if ends[p] <= starts[p]:
            continue
        where, local = log.part(p) if isinstance(log, CompositeLog) else (options.location, p)
        out.append(LogRange(where if isinstance(where, KafkaTopic) else str(where), local, starts[p], ends[p],
                            corrupt, job_partition=p, headers=options.include_headers))  # fmt: skip
    return out


def _read_range(part: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(part, LogRange):  # Spark's placeholder when a batch read has no ranges
        return iter(())
    if isinstance(part.location, KafkaTopic):
        from tidegate.inputs.kafka.log import KafkaLog

        batches = KafkaLog.reading(part.location).read_batches(part.partition, part.start, part.end,
                                                               headers=part.headers)  # fmt: skip
    else:
        record = None if part.corrupt_path is None else _recorder(Path(part.corrupt_path))
        batches = EventLog.open(part.location).read_batches(part.partition, part.start, part.end, on_corrupt=record)
        if part.headers:  # the embedded log's events carry none
            batches = (with_headers(b) for b in batches)
    if part.job_partition == part.partition:
        return batches
    return (renumber(b, part.job_partition) for b in batches)


def _recorder(directory: Path) -> Callable[[CorruptFrameError], None]:
    """The reader's ``on_corrupt``: each skipped damaged span recorded in ``directory``."""

    def record(error: CorruptFrameError) -> None:
        record_skipped(directory, error)  # the record's path is not needed here

    return record


class TidegateStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._log: PartitionedLog | None = open_log(options.location)  # fails early if there is no log
        self._target: LogSnapshot | None = None  # Trigger.AvailableNow: read up to here, no further
        self._initial: SourceOffset | None = None
        self._start_error: RetentionError | None = None

    @property
    def log(self) -> PartitionedLog:
        if self._log is None:
            self._log = open_log(self.options.location)
        return self._log

    def __getstate__(self) -> dict:
        # Spark pickles the reader to ship read() to executors; the open log holds locks
        return self.__dict__ | {"_log": None, "_start_error": None}

    def initialOffset(self) -> dict:
        """The requested start. If retention deleted it, the RetentionError is raised by the
        first ``latestOffset`` from this start, not here: Spark calls ``initialOffset`` at
        every query start, also when it resumes from its checkpoint and ignores the answer,
        and a job must stay restartable after retention passed its original start."""
        opts = self.options
        try:
            starts = resolve_positions(
                self.log, opts.starting, opts.starting_arrival_us, self.log.snapshot(),
                accept_partial=opts.accept_partial, field="startingOffsets",
            )  # fmt: skip
        except RetentionError as exc:
            self._start_error = exc
            # deleted offsets: should this start ever be planned, plan_batch_end refuses it too
            starts = {p: 0 for p in range(self.log.partitions)}
        self._initial = SourceOffset(starts, None)
        return self._initial.to_dict()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_events_per_batch is not None:
            return ReadMaxRows(self.options.max_events_per_batch)
        if self.options.max_arrival_span_us is not None:
            return ReadMaxRows(_NO_ROW_LIMIT)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.log.snapshot()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = parse_offset(start)
        if self._start_error is not None and begin == self._initial:
            raise self._start_error  # a new query asked for a start retention deleted
        limited = isinstance(limit, ReadMaxRows)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) and limit.max_rows < _NO_ROW_LIMIT else None
        end = plan_batch_end(
            self.log,
            begin,
            self._target or self.log.snapshot(),
            max_events=max_rows,
            max_arrival_span_us=self.options.max_arrival_span_us if limited else None,
            idle_clock_interval_us=self.options.idle_clock_interval_us,
        )
        return end.to_dict()

    def reportLatestOffset(self) -> dict:
        """What the log holds (for Spark's progress reports); no snapshot, so no clock is handed out."""
        return SourceOffset({p: self.log.end_offset(p) for p in range(self.log.partitions)}, None).to_dict()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return _ranges(self.options, self.log, parse_offset(start).offsets, parse_offset(end).offsets)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_range(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the log keeps no consumer positions; Spark's checkpoint is the position."""


class TidegateBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        log = open_log(options.location)
        snapshot = log.snapshot()
        starts = resolve_positions(
            log, options.starting, options.starting_arrival_us, snapshot,
            accept_partial=options.accept_partial, field="startingOffsets",
        )  # fmt: skip
        ends = resolve_positions(
            log, options.ending, options.ending_arrival_us, snapshot, accept_partial=True, field="endingOffsets"
        )
        backwards = [p for p in starts if ends[p] < starts[p]]
        if backwards:
            p = backwards[0]
            raise ConfigError(
                f"tidegate batch read: partition {p} would end at offset {ends[p]}, before its start {starts[p]}",
                "give an end at or after the start (endingOffsets/endingArrivalTime)",
            )
        self.options = options
        self.log = log
        self.starts, self.ends = starts, ends

    def __getstate__(self) -> dict:
        return self.__dict__ | {"log": None}  # the ranges are planned: executors only read them

    def partitions(self) -> Sequence[InputPartition]:
        return _ranges(self.options, self.log, self.starts, self.ends)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_range(partition)


def source_schema(include_headers: bool) -> StructType:
    """The source's columns: :data:`SOURCE_SCHEMA`, and ``headers`` when the read asks for them."""
    return SOURCE_HEADERS_SCHEMA if include_headers else SOURCE_SCHEMA


def _read_options(options: Mapping[str, str], read: str) -> SourceOptions:
    parsed = SourceOptions.parse(options)
    misplaced = sorted(k for k in _ONLY[read] if k in {str(o).lower() for o in options})
    if misplaced:
        where = "spark.read" if read == "stream" else "spark.readStream"
        raise ConfigError(
            f"tidegate source: option(s) {misplaced} do not apply to a {read} read",
            f"they belong to {where}; drop them here",
        )
    return parsed


def stream_options(options: Mapping[str, str]) -> SourceOptions:
    """Options of a streaming read, validated as the source validates them."""
    return _read_options(options, "stream")


def batch_options(options: Mapping[str, str]) -> SourceOptions:
    """Options of a batch read, validated as the source validates them."""
    return _read_options(options, "batch")


class TidegateDataSource(DataSource):
    """``format("tidegate")``: the event log; see the module docstring for options."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return source_schema(SourceOptions.parse(self.options).include_headers)

    def _options(self, schema: StructType, read: str) -> SourceOptions:
        parsed = _read_options(self.options, read)
        fixed = source_schema(parsed.include_headers)
        if schema != fixed:
            raise ConfigError(
                f"tidegate source: a schema was given ({schema.simpleString()})",
                f"drop .schema(...): the columns are fixed ({fixed.simpleString()}); select or cast afterwards",
            )
        return parsed

    def reader(self, schema: StructType) -> DataSourceReader:
        return TidegateBatchReader(self._options(schema, "batch"))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TidegateStreamReader(self._options(schema, "stream"))
