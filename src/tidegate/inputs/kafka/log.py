"""A Kafka topic as "a partitioned log": the same questions the embedded event log answers.

The planner (:mod:`tidegate.inputs.planning`, :mod:`tidegate.runtime.jobs.planning`) asks a log
for its partitions, each partition's earliest retained and end offsets, the first offset
arriving at or after a time, the arrival of one offset, a clock, and for the events of
``[start, end)``. :class:`~tidegate.inputs.event_log.EventLog` answers from its files; :class:`KafkaLog`
from the broker:

* arrival time is the record's timestamp, which on a topic Tidegate accepts is the broker's
  append time (:func:`tidegate.inputs.kafka.topics.check_append_time`), in milliseconds;
* **the broker clock** of a snapshot is the largest append time the broker reports over all
  partitions (``ListOffsets`` with ``MAX_TIMESTAMP``), or this host's clock less the maximum
  skew between the two clocks (``TIDEGATE_KAFKA_MAX_CLOCK_SKEW``, default 5 s), whichever is
  later; both are read *before* the end offsets. Any record appended after that read is
  stamped by the broker at or after it, so every event past the snapshot's end offsets
  arrives at the clock or later — the promise :mod:`tidegate.lineage.offsets` records with
  each micro-batch, and a replay reuses. A silent partition's watermark follows the clock,
  and so does a silent topic's (semantics §2, idle units): its windows close within the late
  tolerance, the skew and a trigger. Should the broker's clock lag this host's by more than
  the skew, a record arriving before a clock already handed out is judged as arriving at it
  (:func:`tidegate.eventtime.policy.apply_policy`), adjusted rather than lost;
* retention: Kafka deletes whole old segments and keeps no record of what it deleted, so a
  seek to a time before a trimmed partition's first retained record is refused
  (:class:`~tidegate.inputs.event_log.RetentionError` naming the offsets before it and the arrivals
  asked for), as the embedded log refuses it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping

import pyarrow as pa
from confluent_kafka import Consumer, IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_time_us, parse_duration_us
from tidegate.inputs.event_log import LogSnapshot, PartitionInfo, RetentionError
from tidegate.inputs.event_log.clock import wall_clock_us
from tidegate.inputs.event_log.reader import EVENT_SCHEMA, with_headers
from tidegate.inputs.kafka.client import READ_STALL_S, TIMEOUT_S, KafkaTopic
from tidegate.inputs.kafka.headers import Headers, decode_headers, headers_array
from tidegate.inputs.kafka.topics import admin, describe_append_time_topic, describe_partitions, unreachable

_MS = 1000
_HOUR_US = 3_600_000_000
SKEW_ENV = "TIDEGATE_KAFKA_MAX_CLOCK_SKEW"
DEFAULT_SKEW = "5s"
_NO_TOPIC = ("UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_ID", "_NOENT")
_LEADER_MOVING = ("NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE")
_FETCH = 10_000  # records per consume() call


def max_clock_skew_us(env: Mapping[str, str] | None = None) -> int:
    """``TIDEGATE_KAFKA_MAX_CLOCK_SKEW``: how far the brokers' clocks may lag this host's (a
    duration, default 5 s, at most 1 h). A silent topic's clock is this host's less it."""
    text = (os.environ if env is None else env).get(SKEW_ENV, "").strip() or DEFAULT_SKEW
    try:
        skew = parse_duration_us(text)
    except ConfigError:
        skew = -1
    if not 0 <= skew <= _HOUR_US:
        raise ConfigError(
            f"{SKEW_ENV}={text[:40]!r} is not a duration from 0s to 1h",
            "set how far the Kafka brokers' clocks may lag this host's, e.g. 5s (NTP keeps them within milliseconds)",
        )
    return skew


class KafkaLog:
    """A topic read as a partitioned log (see the module docstring)."""

    clock_mode = "wall"  # the broker stamps arrivals: producers append as to a wall-clock event log

    def __init__(self, topic: KafkaTopic, *, check_timestamps: bool = True) -> None:
        self.topic = topic
        self._admin: AdminClient = admin(topic)
        self.partitions = (describe_append_time_topic(topic, self._admin) if check_timestamps
                           else describe_partitions(topic, self._admin))  # fmt: skip
        self._consumer: Consumer | None = None

    @classmethod
    def reading(cls, topic: KafkaTopic) -> KafkaLog:
        """A log that only reads ranges (on executors): no admin requests, no checks."""
        log = cls.__new__(cls)
        log.topic, log._consumer = topic, None
        return log

    @property
    def root(self) -> str:
        """How messages name this log (the embedded log names its directory)."""
        return str(self.topic)

    def __repr__(self) -> str:
        return f"KafkaLog({self.topic})"

    # --- offsets --------------------------------------------------------------------

    def _list(self, specs: dict[int, OffsetSpec]) -> dict[int, tuple[int, int]]:
        request = {TopicPartition(self.topic.topic, p): spec for p, spec in specs.items()}
        deadline, pause = time.monotonic() + TIMEOUT_S, 0.01
        while True:
            try:
                # committed records only, as the reader reads them (a producer's open transaction is not input yet)
                futures = self._admin.list_offsets(
                    request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=TIMEOUT_S
                )
                return {tp.partition: (f.result(TIMEOUT_S).offset, f.result(TIMEOUT_S).timestamp)
                        for tp, f in futures.items()}  # fmt: skip
            except KafkaException as exc:
                # a leader moving, or not elected yet on a topic just created: asked again, as the Java client does
                if not _passing(exc) or time.monotonic() + pause > deadline:
                    raise self._failed(exc) from None
            time.sleep(pause)
            pause = min(2 * pause, 0.5)

    def _failed(self, exc: KafkaException):
        # a deleted topic: the broker says so, or the client finds no leader for its partitions
        if _error_name(exc) in _NO_TOPIC:
            return self.topic.error(
                "the topic does not exist (any more): it was deleted, or never created",
                "recreate it (`tidegate kafka create-topic`) and start the job with a fresh checkpoint "
                "(--mode now or custom); what the job already committed stays in its output",
            )
        return unreachable(self.topic, exc)

    def _offsets(self, spec: OffsetSpec) -> list[int]:
        found = self._list({p: spec for p in range(self.partitions)})
        return [found[p][0] for p in range(self.partitions)]

    def start_offset(self, partition: int) -> int:
        return self._list({partition: OffsetSpec.earliest()})[partition][0]

    def end_offset(self, partition: int) -> int:
        return self._list({partition: OffsetSpec.latest()})[partition][0]

    def end_offsets(self) -> list[int]:
        return self._offsets(OffsetSpec.latest())

    def start_offsets(self) -> list[int]:
        return self._offsets(OffsetSpec.earliest())

    # --- the broker clock ---------------------------------------------------------------

    def _last_appends_us(self) -> list[int | None]:
        found = self._list({p: OffsetSpec.max_timestamp() for p in range(self.partitions)})
        return [found[p][1] * _MS if found[p][0] >= 0 and found[p][1] >= 0 else None for p in range(self.partitions)]

    def snapshot(self) -> LogSnapshot:
        """End offsets and the broker clock; every later append arrives at ``clock_us`` or after.
        The clock is read first: the latest append, or this host's clock less the maximum skew
        when that is later (a silent topic; see the module docstring)."""
        estimated = wall_clock_us() - max_clock_skew_us()
        clock = max([estimated, *(t for t in self._last_appends_us() if t is not None)])
        return LogSnapshot(tuple(self.end_offsets()), clock)

    def clock_now_us(self) -> int:
        """The time a start mode ``now`` puts the first output at: the wall clock (or the last
        append, should the broker's clock be ahead of this host's)."""
        return max([wall_clock_us(), *(t for t in self._last_appends_us() if t is not None)])

    # --- positions ------------------------------------------------------------------------

    def check_retained(self, partition: int, offset: int) -> None:
        start = self.start_offset(partition)
        if offset < start:
            first = self._first_arrival(partition, start)
            raise RetentionError(
                f"partition {partition} of Kafka {self.topic}: offsets {offset}–{start - 1} were deleted by retention",
                f"start at offset {start} or later, or accept partial results (--accept-partial)",
                partition=partition, missing_offsets=(offset, start), missing_arrivals=(None, first),
                first_available_offset=start,
            )  # fmt: skip

    def offset_for_arrival(self, partition: int, t_us: int) -> int:
        """The first offset whose arrival is ``>= t_us`` (the end offset if none). RetentionError
        when the partition was trimmed and its first retained record arrived after ``t_us``:
        records arriving from ``t_us`` may have been deleted."""
        ms = -(-t_us // _MS)  # arrival (ms) >= t_us (µs)  <=>  ms >= ceil(t_us / 1000)
        found = self._list({partition: OffsetSpec.for_timestamp(ms)})[partition][0]
        start = self.start_offset(partition)
        if start > 0:
            first = self._first_arrival(partition, start)
            # records of one produce request share their append time: those deleted may have arrived at `first` too
            if first is not None and t_us <= first:
                raise RetentionError(
                    f"partition {partition} of Kafka {self.topic}: records arriving from {format_time_us(t_us)} may "
                    f"have been deleted by retention (offsets before {start}; the first retained one arrived "
                    f"{format_time_us(first)})",
                    f"start after {format_time_us(first)} (offset {start}), or accept partial results "
                    "(--accept-partial)",
                    partition=partition, missing_offsets=(0, start), missing_arrivals=(t_us, first),
                    first_available_offset=start,
                )  # fmt: skip
        return self.end_offset(partition) if found < 0 else max(found, start)

    def arrival_at(self, partition: int, offset: int) -> int:
        """Arrival (µs) of the record at ``offset``, or of the next one where ``offset`` holds
        none (a transaction marker, a compacted record): arrivals never decrease, so a clock
        promised from it never claims too much."""
        self.check_retained(partition, offset)
        for batch in self.read_batches(partition, offset, self.end_offset(partition), stop_at_first=True):
            if batch.num_rows:
                return int(batch.column("arrival_time")[0].value)
        raise self.topic.error(f"partition {partition} has no record at or after offset {offset}",
                               "ask for an offset below the partition's end offset")  # fmt: skip

    def _first_arrival(self, partition: int, start: int) -> int | None:
        try:
            return self.arrival_at(partition, start) if start < self.end_offset(partition) else None
        except RetentionError:  # retention moved on meanwhile
            return None

    def describe(self) -> list[PartitionInfo]:
        starts, ends, lasts = self.start_offsets(), self.end_offsets(), self._last_appends_us()
        return [
            PartitionInfo(p, starts[p], ends[p], self._first_arrival(p, starts[p]) if ends[p] > starts[p] else None,
                          lasts[p], 0, 0)
            for p in range(self.partitions)
        ]  # fmt: skip

    # --- reading -------------------------------------------------------------------------

    def read_batches(
        self, partition: int, start_offset: int, end_offset: int, max_rows: int = 65536, *, stop_at_first: bool = False,
        on_corrupt=None, headers: bool = False,
    ) -> Iterator[pa.RecordBatch]:  # fmt: skip
        """Records ``[start_offset, end_offset)`` as batches of
        :data:`~tidegate.inputs.event_log.reader.EVENT_SCHEMA` — with ``headers``, of
        :data:`~tidegate.inputs.event_log.reader.EVENT_HEADERS_SCHEMA`, each record's headers decoded
        by :func:`~tidegate.inputs.kafka.headers.decode_headers`."""
        if end_offset <= start_offset:
            return
        consumer = self._reader()
        consumer.assign([TopicPartition(self.topic.topic, partition, start_offset)])
        keys: list[str | None] = []
        payloads: list[str | None] = []
        offsets: list[int] = []
        arrivals: list[int] = []
        maps: list[Headers | None] = []
        deadline = time.monotonic() + READ_STALL_S
        position = start_offset  # the next offset wanted
        try:
            while True:
                wanted = 1 if stop_at_first else end_offset - position
                records = consumer.consume(max(1, min(_FETCH, max_rows, wanted)), timeout=1.0)
                if not records and time.monotonic() > deadline:
                    raise self.topic.error(
                        f"partition {partition}: no records arrived from offset {position} "
                        f"before {end_offset} within {READ_STALL_S:.0f} s",
                        "check the broker's health; the micro-batch runs again on the next start",
                    )
                done = False
                for record in records:
                    error = record.error()
                    if error is not None:
                        if error.name() == "_PARTITION_EOF":
                            # the end: what is left of the range holds no records (transaction markers)
                            eof_offset = record.offset()
                            assert eof_offset is not None  # librdkafka's partition-EOF event carries the offset
                            done = done or eof_offset >= end_offset
                            continue
                        raise self._failed(KafkaException(error))
                    offset = record.offset()
                    assert offset is not None  # a consumed record always has its offset
                    if offset >= end_offset:
                        done = True
                        break
                    key, value = record.key(), record.value()
                    position = offset + 1
                    offsets.append(offset)
                    arrivals.append(record.timestamp()[1] * _MS)
                    keys.append(None if key is None else key.decode("utf-8", "replace"))
                    payloads.append(None if value is None else value.decode("utf-8", "replace"))
                    if headers:
                        maps.append(_record_headers(record))
                    if offset == end_offset - 1 or stop_at_first:
                        done = True
                        break
                if records:
                    deadline = time.monotonic() + READ_STALL_S
                while len(offsets) >= max_rows or (done and offsets):
                    n = min(max_rows, len(offsets))
                    batch = _batch(partition, offsets[:n], arrivals[:n], keys[:n], payloads[:n])
                    yield with_headers(batch, headers_array(maps[:n])) if headers else batch
                    del offsets[:n], arrivals[:n], keys[:n], payloads[:n], maps[:n]
                if done:
                    return
        finally:
            consumer.unassign()

    def _reader(self) -> Consumer:
        if self._consumer is None:
            config = self.topic.client_config() | {
                "group.id": "tidegate-reader",  # never used to commit: positions live in checkpoints
                "enable.auto.commit": "false",
                "enable.partition.eof": "true",
                "fetch.max.bytes": str(64 << 20),
            }
            self._consumer = Consumer(config)
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def __getstate__(self) -> dict:
        raise TypeError("a KafkaLog holds connections: ship its KafkaTopic and open a log where it is used")


def _batch(partition: int, offsets: list[int], arrivals: list[int], keys: list, payloads: list) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array([partition] * len(offsets), type=pa.int32()),
            pa.array(offsets, type=pa.int64()),
            pa.array(arrivals, type=pa.int64()).cast(EVENT_SCHEMA.field("arrival_time").type),
            pa.array(keys, type=pa.string()),
            pa.array(payloads, type=pa.string()),
        ],
        schema=EVENT_SCHEMA,
    )


def _record_headers(record) -> Headers | None:
    """A consumed record's headers as the column's map. confluent-kafka reads a header's name as a
    C string that must be UTF-8: a name that is not (which only a client of its own can send) makes
    it raise, and the record's headers are NULL, as past the bounds (quarantined as too large)."""
    try:
        pairs = record.headers()
    except (SystemError, UnicodeDecodeError):
        return None
    return decode_headers(pairs)


def _error(exc: KafkaException):
    """The client's error behind ``exc`` (a ``KafkaError``), or None."""
    err = exc.args[0] if exc.args else None
    return err if hasattr(err, "name") else None


def _error_name(exc: KafkaException) -> str | None:
    err = _error(exc)
    return err.name() if err is not None else None


def _passing(exc: KafkaException) -> bool:
    """A leader moving or not yet elected (or another error the client marks retriable), not a missing topic."""
    err, name = _error(exc), _error_name(exc)
    return (bool(err is not None and err.retriable()) or name in _LEADER_MOVING) and name not in _NO_TOPIC
