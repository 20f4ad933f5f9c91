"""Synthetic device traffic as numpy arrays: pure, reproducible by seed, no I/O.

The fleet is one stream of arrivals at a mean rate, compressed into bursts in places;
each arrival is a reading from a random device, whose partition is its key's hash. The
reading's event time is its arrival minus a network delay plus the device's clock
skew — except for the injected late events (buffered while offline: more than
``late_bound`` behind their arrival) and early ones (a clock far ahead: more than
``early_bound`` ahead). Skew and ordinary delay are capped well inside both bounds, so
the injected counts are exactly the events beyond them.

:class:`GeneratorConfig` says what to draw; :mod:`tidegate.inputs.event_log.generator` appends it to a log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from tidegate.errors import ConfigError
from tidegate.inputs.event_log.producer import partition_for_key

NORMAL, LATE, EARLY = 0, 1, 2
WELL_FORMED, NOT_JSON, NO_EVENT_TIME, BAD_EVENT_TIME = 0, 1, 2, 3
MALFORMED_NAMES = ("", "not JSON", "no eventTime", "unparseable eventTime")
_SECOND = 1_000_000
_MINUTE = 60 * _SECOND
Mode = Literal["backfill", "realtime"]
MODES = ("backfill", "realtime")


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
        need(self.partitions >= 1, f"partitions is {self.partitions}", "use the event log's partition count")
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
class Traffic:
    """One generated run; arrays are in arrival order (ties keep their draw order)."""

    device_names: list[str]
    device: np.ndarray  # int index into device_names
    partition: np.ndarray  # int32
    arrival_us: np.ndarray  # int64, non-decreasing
    event_us: np.ndarray  # int64, whole milliseconds (as the payload writes them)
    timing: np.ndarray  # NORMAL, LATE or EARLY
    malformed: np.ndarray  # WELL_FORMED or the kind of damage
    temperature: np.ndarray
    humidity: np.ndarray

    def __len__(self) -> int:
        return len(self.arrival_us)

    def payloads(self, idx: np.ndarray) -> list[str]:
        """The JSON text of events ``idx`` (malformed ones damaged as drawn)."""
        times = np.datetime_as_string(self.event_us[idx].astype("datetime64[us]"), unit="ms")
        out = []
        for d, t, x, h, bad in zip(
            self.device[idx], times, self.temperature[idx], self.humidity[idx], self.malformed[idx], strict=True
        ):
            name = self.device_names[d]
            if bad == WELL_FORMED:
                out.append(
                    f'{{"deviceId": "{name}", "eventTime": "{t}Z", "temperature": {x:.2f}, "humidity": {h:.1f}}}'
                )
            elif bad == NOT_JSON:  # cut off mid-object, as a dropped connection leaves it
                out.append(f'{{"deviceId": "{name}", "eventTime": "{t}Z", "temperature": {x:.2f}, "humid')
            elif bad == NO_EVENT_TIME:
                out.append(f'{{"deviceId": "{name}", "temperature": {x:.2f}, "humidity": {h:.1f}}}')
            else:
                out.append(
                    f'{{"deviceId": "{name}", "eventTime": "yesterday noon", '
                    f'"temperature": {x:.2f}, "humidity": {h:.1f}}}'
                )
        return out

    def keys(self, idx: np.ndarray) -> list[str]:
        names = self.device_names
        return [names[d] for d in self.device[idx]]


def device_names(devices: int) -> list[str]:
    width = max(4, len(str(devices - 1)))
    return [f"dev-{i:0{width}d}" for i in range(devices)]


def synthesize(config: GeneratorConfig, start_us: int) -> Traffic:
    """Draw a run of ``config.total_events`` events whose arrivals begin at ``start_us``.

    Every draw happens in a fixed order from one ``default_rng(seed)``, so the same
    config and start give the same events, byte for byte.
    """
    rng = np.random.default_rng(config.seed)
    n = config.total_events
    names = device_names(config.devices)
    device_partition = np.array([partition_for_key(k, config.partitions) for k in names], dtype=np.int32)

    real_us = _arrival_offsets(rng, n, config)
    span_us = int(real_us[-1]) if n else 0
    device = rng.integers(0, config.devices, n)
    device = _silence_idle_partitions(rng, device, device_partition, real_us, span_us, config)

    skew_us = rng.uniform(-config.clock_skew_max_us, config.clock_skew_max_us, config.devices)
    delay_us = np.minimum(
        config.delay_median_us * np.exp(config.delay_sigma * rng.standard_normal(n)), config.late_bound_us / 4
    )
    draw = rng.random(n)
    timing = np.where(
        draw < config.late_fraction, LATE, np.where(draw < config.late_fraction + config.early_fraction, EARLY, NORMAL)
    ).astype(np.int8)
    late_extra = rng.uniform(_SECOND, max(config.late_bound_us, 2 * _SECOND), n)
    early_extra = rng.uniform(_SECOND, max(config.early_bound_us, 2 * _SECOND), n)
    arrival = start_us + real_us.astype(np.int64)
    offset_us = np.select(
        [timing == LATE, timing == EARLY],
        [-(config.late_bound_us + late_extra), config.early_bound_us + early_extra],
        default=skew_us[device] - delay_us,
    )
    event = (arrival + offset_us.astype(np.int64)) // 1000 * 1000

    malformed = np.where(rng.random(n) < config.malformed_fraction, rng.integers(1, 4, n), WELL_FORMED).astype(np.int8)
    base_temperature = rng.normal(21.0, 3.0, config.devices)
    base_humidity = rng.uniform(30.0, 70.0, config.devices)
    temperature = base_temperature[device] + rng.normal(0.0, 0.5, n)
    humidity = np.clip(base_humidity[device] + rng.normal(0.0, 2.0, n), 0.0, 100.0)
    return Traffic(names, device, device_partition[device], arrival, event, timing, malformed, temperature, humidity)


def _arrival_offsets(rng: np.random.Generator, n: int, config: GeneratorConfig) -> np.ndarray:
    """Sorted arrival offsets (µs from start): uniform in a virtual timeline that is then
    warped so each burst's stretch passes ``burst_factor`` times faster."""
    virtual_span = n / config.rate_per_s * _SECOND
    burst_virtual = config.burst_duration_us * config.burst_factor
    bursts = min(config.bursts, int(virtual_span // (2 * burst_virtual))) if burst_virtual > 0 else 0
    starts = np.sort(rng.uniform(0, virtual_span - bursts * burst_virtual, bursts)) + np.arange(bursts) * burst_virtual
    knots_virtual = np.concatenate([[0.0], np.column_stack([starts, starts + burst_virtual]).ravel(), [virtual_span]])
    slopes = np.tile([1.0, 1.0 / config.burst_factor], bursts + 1)[: len(knots_virtual) - 1]
    knots_real = np.concatenate([[0.0], np.cumsum(np.diff(knots_virtual) * slopes)])
    return np.interp(np.sort(rng.uniform(0, virtual_span, n)), knots_virtual, knots_real)


def _silence_idle_partitions(
    rng: np.random.Generator,
    device: np.ndarray,
    device_partition: np.ndarray,
    real_us: np.ndarray,
    span_us: int,
    config: GeneratorConfig,
) -> np.ndarray:
    """Give the events that idle partitions' devices would send in the silent stretch to
    other devices, so the run keeps its size. The last ``idle_partitions`` partitions are
    the idle ones; they are silent for ``idle_fraction`` of the run, centred."""
    if not config.idle_partitions or not len(device):
        return device
    idle = np.arange(config.partitions - config.idle_partitions, config.partitions)
    active = np.flatnonzero(~np.isin(device_partition, idle))
    if not len(active):
        raise ConfigError(
            f"all {config.devices} devices hash to the {config.idle_partitions} idle partition(s)",
            "add devices or make fewer partitions idle",
        )
    half = config.idle_fraction * span_us / 2
    silent = (np.abs(real_us - span_us / 2) <= half) & np.isin(device_partition[device], idle)
    device = device.copy()
    device[silent] = active[rng.integers(0, len(active), int(silent.sum()))]
    return device
