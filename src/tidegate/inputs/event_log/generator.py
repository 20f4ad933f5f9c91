"""Device traffic for the event log: reproducible by seed, with the disorder real fleets have.

Two modes:

* ``backfill`` — as fast as possible, with synthetic arrival times from ``start_us``:
  each partition's events, sorted by arrival, are appended with their arrival times in
  chunks; a manual-clock event log's clock is then advanced to the last arrival.
* ``realtime`` — ``rate_per_s`` events per second for ``duration_us`` into a wall-clock
  event log, in small batches whose arrival the log stamps.

The same seed and config give the same (key, payload, arrival) sequence per partition
(backfill; realtime arrivals are the wall clock's).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.inputs.event_log.clock import wall_clock_us
from tidegate.inputs.event_log.info import AppendResult
from tidegate.inputs.event_log.log import EventLog
from tidegate.inputs.event_log.progress import Progress
from tidegate.inputs.event_log.traffic import (
    BAD_EVENT_TIME,
    EARLY,
    LATE,
    NO_EVENT_TIME,
    NOT_JSON,
    WELL_FORMED,
    GeneratorConfig,
    Traffic,
    synthesize,
)

DEFAULT_START_US = parse_time_us("2026-01-01T00:00:00Z")
_SECOND = 1_000_000


@dataclass(frozen=True)
class GeneratorSummary:
    """What was appended, and how much disorder was injected on purpose."""

    events: int
    per_partition: tuple[int, ...]
    late: int  # well-formed events more than late_bound behind their arrival
    early: int  # well-formed events more than early_bound ahead of it
    malformed: int
    not_json: int
    no_event_time: int
    bad_event_time: int
    first_arrival_us: int | None
    last_arrival_us: int | None
    seconds: float

    def __str__(self) -> str:
        parts = "/".join(f"{n:,}" for n in self.per_partition)
        return (
            f"{self.events:,} events (per partition {parts}); injected late {self.late:,}, early {self.early:,}, "
            f"malformed {self.malformed:,} (not JSON {self.not_json:,}, no eventTime {self.no_event_time:,}, "
            f"bad eventTime {self.bad_event_time:,}); arrivals {format_time_us(self.first_arrival_us)} … "
            f"{format_time_us(self.last_arrival_us)}; {self.seconds:.1f} s"
        )


class RealtimeLog(Protocol):
    """What realtime generation appends to: an event log's :class:`EventLog`, or a Kafka topic's
    :class:`~tidegate.inputs.kafka.producer.TopicWriter` (whose broker stamps arrivals)."""

    @property
    def partitions(self) -> int: ...

    @property
    def root(self) -> object: ...  # named in messages

    @property
    def clock_mode(self) -> str: ...

    def append(self, partition: int, keys: Sequence[str | None], payloads: Sequence[str]) -> AppendResult: ...


def generate(
    log: EventLog | RealtimeLog,
    config: GeneratorConfig,
    *,
    progress: bool = False,
    now_us: Callable[[], int] = wall_clock_us,
    sleep: Callable[[float], None] = time.sleep,
) -> GeneratorSummary:
    """Append the configured traffic to ``log``. ``now_us``/``sleep`` pace realtime mode."""
    if log.partitions != config.partitions:
        raise ConfigError(
            f"generator: configured for {config.partitions} partitions but {log.root} has {log.partitions}",
            f"generate with partitions={log.partitions}, or create an event log with {config.partitions}",
        )
    meter = Progress(config.total_events, f"generating ({config.mode})", enabled=progress)
    if config.mode == "backfill":
        if not isinstance(log, EventLog):
            raise ConfigError(
                f"generator: backfill mode writes to an event log; {log.root} is not one", "use realtime mode"
            )
        traffic = _backfill(log, config, meter)
    else:
        traffic = _realtime(log, config, meter, now_us, sleep)
    meter.finish()
    return _summarize(traffic, config.partitions, meter.seconds)


def backfill_start(log: EventLog, config: GeneratorConfig) -> int:
    """Where a backfill's arrivals begin: as configured, or just after all the log holds."""
    if config.start_us is not None:
        return config.start_us
    floor = log.clock_now_us() if log.clock_mode == "manual" else 0
    lasts = [i.last_arrival_us for i in log.describe() if i.last_arrival_us is not None]
    return max([DEFAULT_START_US, floor, *(t + _SECOND for t in lasts)])


def _backfill(log: EventLog, config: GeneratorConfig, meter: Progress) -> Traffic:
    traffic = synthesize(config, backfill_start(log, config))
    done = 0
    for p in range(config.partitions):
        mine = np.flatnonzero(traffic.partition == p)  # already in arrival order
        for lo in range(0, len(mine), config.chunk_events):
            idx = mine[lo : lo + config.chunk_events]
            table = pa.table(
                {
                    "key": pa.array(traffic.keys(idx), type=pa.string()),
                    "payload": pa.array(traffic.payloads(idx), type=pa.string()),
                    "arrival_time": pa.array(traffic.arrival_us[idx], type=pa.int64()),
                }
            )
            log.append_table(p, table)
            done += len(idx)
            meter.update(done)
    if log.clock_mode == "manual" and len(traffic):
        last = int(traffic.arrival_us[-1])
        if last > log.clock_now_us():
            log.advance_clock(last)
    return traffic


def _realtime(
    log: RealtimeLog,
    config: GeneratorConfig,
    meter: Progress,
    now_us: Callable[[], int],
    sleep: Callable[[float], None],
) -> Traffic:
    if log.clock_mode != "wall":
        raise ConfigError(
            f"generator: realtime mode needs a wall-clock event log; {log.root} has a manual clock",
            "use --mode backfill, or an event log created with --clock wall",
        )
    traffic = synthesize(config, now_us())  # scheduled arrivals: the log stamps the real ones
    pos, n = 0, len(traffic)
    while pos < n:
        now = now_us()  # read once: the arrival becomes due between two reads of the clock
        due = int(np.searchsorted(traffic.arrival_us, now, side="right"))
        if due <= pos:
            sleep(min(config.batch_interval_us, int(traffic.arrival_us[pos]) - now + 1) / _SECOND)
            continue
        idx = np.arange(pos, due)
        for p in np.unique(traffic.partition[idx]):
            mine = idx[traffic.partition[idx] == p]
            log.append(int(p), traffic.keys(mine), traffic.payloads(mine))
        pos = due
        meter.update(pos)
        sleep(config.batch_interval_us / _SECOND)
    return traffic


def _summarize(traffic: Traffic, partitions: int, seconds: float) -> GeneratorSummary:
    ok = traffic.malformed == WELL_FORMED
    arrivals = traffic.arrival_us
    return GeneratorSummary(
        events=len(traffic),
        per_partition=tuple(int(c) for c in np.bincount(traffic.partition, minlength=partitions)),
        late=int(np.sum(ok & (traffic.timing == LATE))),
        early=int(np.sum(ok & (traffic.timing == EARLY))),
        malformed=int(np.sum(~ok)),
        not_json=int(np.sum(traffic.malformed == NOT_JSON)),
        no_event_time=int(np.sum(traffic.malformed == NO_EVENT_TIME)),
        bad_event_time=int(np.sum(traffic.malformed == BAD_EVENT_TIME)),
        first_arrival_us=int(arrivals[0]) if len(arrivals) else None,
        last_arrival_us=int(arrivals[-1]) if len(arrivals) else None,
        seconds=seconds,
    )
