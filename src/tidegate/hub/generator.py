"""Device traffic for the event log: reproducible by seed, with the disorder real fleets have.

Two modes:

* ``backfill`` — as fast as possible, with synthetic arrival times from ``start_us``:
  each partition's events, sorted by arrival, are appended with their arrival times in
  chunks; a manual-clock hub's clock is then advanced to the last arrival.
* ``realtime`` — ``rate_per_s`` events per second for ``duration_us`` into a wall-clock
  hub, in small batches whose arrival the log stamps.

The same seed and config give the same (key, payload, arrival) sequence per partition
(backfill; realtime arrivals are the wall clock's).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np
import pyarrow as pa

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.hub.clock import wall_clock_us
from tidegate.hub.log import EventLog
from tidegate.hub.progress import Progress
from tidegate.hub.traffic import BAD_EVENT_TIME, EARLY, LATE, NO_EVENT_TIME, NOT_JSON, WELL_FORMED, Traffic, synthesize

Mode = Literal["backfill", "realtime"]
MODES = ("backfill", "realtime")
DEFAULT_START_US = parse_time_us("2026-01-01T00:00:00Z")
_SECOND = 1_000_000
_MINUTE = 60 * _SECOND


@dataclass(frozen=True)
class GeneratorConfig:
    """What to generate. Times and durations in µs; fractions of all events in [0, 1]."""

    devices: int = 60
    partitions: int = 4
    events: int = 100_000  # backfill; realtime too unless duration_us is given
    seed: int = 0
    mode: Mode = "backfill"
    start_us: int | None = None  # backfill: first arrival; None = 2026-01-01, or after what the log holds
    rate_per_s: float = 200.0  # whole fleet, outside bursts
    duration_us: int | None = None  # realtime: run this long (events = rate × duration)
    clock_skew_max_us: int = 2 * _SECOND  # each device's clock is off by a fixed amount within ±this
    delay_median_us: int = 200_000  # ordinary network delay: lognormal with this median …
    delay_sigma: float = 1.0  # … and this shape (capped at late_bound/4)
    late_fraction: float = 0.01  # buffered while offline: arrive more than late_bound after their time
    late_bound_us: int = 5 * _MINUTE
    early_fraction: float = 0.002  # clock far ahead: event time more than early_bound after arrival
    early_bound_us: int = 5 * _MINUTE
    malformed_fraction: float = 0.001  # split evenly: not JSON / no eventTime / unparseable eventTime
    bursts: int = 3  # stretches where the fleet sends burst_factor times faster
    burst_factor: float = 10.0
    burst_duration_us: int = 10 * _SECOND
    idle_partitions: int = 0  # the last N partitions fall silent …
    idle_fraction: float = 0.3  # … for this share of the run, centred (1.0: they never send)
    chunk_events: int = 50_000  # backfill: events per append
    batch_interval_us: int = 100_000  # realtime: pause between small batches

    def __post_init__(self) -> None:
        def need(ok: bool, problem: str, fix: str) -> None:
            if not ok:
                raise ConfigError(f"generator: {problem}", fix)

        need(self.devices >= 1, f"devices is {self.devices}", "generate for at least one device")
        need(self.partitions >= 1, f"partitions is {self.partitions}", "use the hub's partition count")
        need(self.events >= 0, f"events is {self.events}", "give zero or more events")
        need(self.mode in MODES, f"mode is {self.mode!r}", "use backfill or realtime")
        need(self.rate_per_s > 0, f"rate is {self.rate_per_s}", "give a rate above zero events per second")
        need(self.duration_us is None or self.duration_us > 0, "duration is not positive", "give e.g. 30s")
        for name in ("late_fraction", "early_fraction", "malformed_fraction", "idle_fraction"):
            value = getattr(self, name)
            need(0.0 <= value <= 1.0, f"{name} is {value}", "fractions are between 0 and 1")
        need(
            self.late_fraction + self.early_fraction <= 1.0,
            "late_fraction + early_fraction exceeds 1",
            "an event is late or early, not both; lower one of them",
        )
        need(self.late_bound_us > 0 and self.early_bound_us > 0, "late/early bounds must be positive", "e.g. 5m")
        need(
            0 <= self.clock_skew_max_us <= min(self.late_bound_us, self.early_bound_us) // 4,
            f"clock skew ±{self.clock_skew_max_us} µs is not within a quarter of the late/early bounds",
            "keep ordinary skew well inside the bounds, so only injected events cross them",
        )
        need(self.delay_median_us >= 0 and self.delay_sigma >= 0, "delay is negative", "use a median ≥ 0")
        need(self.bursts >= 0 and self.burst_factor >= 1, "bursts need count ≥ 0 and factor ≥ 1", "e.g. 3 × 10")
        need(self.burst_duration_us >= 0, "burst duration is negative", "e.g. 10s")
        need(
            0 <= self.idle_partitions < self.partitions,
            f"idle_partitions is {self.idle_partitions} of {self.partitions}",
            "leave at least one partition sending",
        )
        need(self.chunk_events >= 1, "chunk_events must be at least 1", "e.g. 50000")
        need(self.batch_interval_us > 0, "batch interval must be positive", "e.g. 100ms")

    @property
    def total_events(self) -> int:
        if self.mode == "realtime" and self.duration_us is not None:
            return int(round(self.rate_per_s * self.duration_us / _SECOND))
        return self.events


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


def generate(
    log: EventLog,
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
            f"generate with partitions={log.partitions}, or create a hub with {config.partitions}",
        )
    meter = Progress(config.total_events, f"generating ({config.mode})", enabled=progress)
    if config.mode == "backfill":
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
    log: EventLog, config: GeneratorConfig, meter: Progress, now_us: Callable[[], int], sleep: Callable[[float], None]
) -> Traffic:
    if log.clock_mode != "wall":
        raise ConfigError(
            f"generator: realtime mode needs a wall-clock hub; {log.root} has a manual clock",
            "use --mode backfill, or a hub created with --clock wall",
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
