"""Shared test helpers: the golden transcripts, random streams with disorder, a clock the test moves."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from tidegate.eventtime.durations import parse_time_us
from tidegate.eventtime.policy import TimePolicy

TRANSCRIPTS = Path(__file__).parent / "transcripts"


class Clock:
    """A wall clock in seconds that only the test moves (``advance``)."""

    def __init__(self, t: float = 1_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, s: float) -> None:
        self.t += s


@dataclass(frozen=True)
class GoldenVariant:
    name: str
    policy: TimePolicy
    over: str | None
    expect: list[list[str]]  # action, reason, system HH:MM, watermark HH:MM


@dataclass(frozen=True)
class Golden:
    date: str
    events: list[tuple[str, str, str]]  # event time, arrival time, device
    variants: list[GoldenVariant]

    def event_us(self) -> np.ndarray:
        return np.array([parse_time_us(f"{self.date}T{e}:00Z") for e, _, _ in self.events])

    def arrival_us(self) -> np.ndarray:
        return np.array([parse_time_us(f"{self.date}T{a}:00Z") for _, a, _ in self.events])

    def devices(self) -> np.ndarray:
        return np.array([d for _, _, d in self.events], dtype=object)


def load_golden(name: str = "spec_golden.yaml") -> Golden:
    raw = yaml.safe_load((TRANSCRIPTS / name).read_text())
    variants = [
        GoldenVariant(
            v["name"],
            TimePolicy.from_durations(
                out_of_order=v["args"]["out_of_order"], late=v["args"]["late"], early=v["args"]["early"]
            ),
            v["args"].get("over"),
            v["expect"],
        )
        for v in raw["variants"]
    ]
    return Golden(raw["date"], [tuple(e) for e in raw["events"]], variants)


@dataclass(frozen=True)
class RandomStream:
    """Events of several partitions, each in arrival order, with skew, lateness and early events."""

    partition: np.ndarray
    event_us: np.ndarray
    arrival_us: np.ndarray
    key: np.ndarray
    value: np.ndarray

    def of_partition(self, p: int) -> np.ndarray:
        return np.flatnonzero(self.partition == p)


def random_stream(seed: int, n: int = 2000, partitions: int = 3, keys: int = 7, idle: int = 0) -> RandomStream:
    """Arrivals tick forward per partition; event time = arrival − delay + device skew, with
    a share of events later than minutes and earlier than 5 minutes. ``idle`` partitions get none."""
    rng = np.random.default_rng(seed)
    base = parse_time_us("2026-01-01T00:00:00Z")
    active = max(1, partitions - idle)
    part = rng.integers(0, active, n)
    key = np.array([f"k{k}" for k in rng.integers(0, keys, n)], dtype=object)
    arrival = np.empty(n, dtype=np.int64)
    for p in range(active):
        idx = np.flatnonzero(part == p)
        arrival[idx] = base + np.cumsum(rng.integers(0, 3_000_000, len(idx)))
    skew = {f"k{k}": int(rng.integers(-20, 20)) * 1_000_000 for k in range(keys)}
    delay = rng.exponential(4_000_000, n).astype(np.int64)
    late = rng.random(n) < 0.05
    delay[late] += rng.integers(60, 900, late.sum()) * 1_000_000
    early = rng.random(n) < 0.03
    delay[early] = -rng.integers(301, 600, early.sum()) * 1_000_000
    event = arrival - delay + np.array([skew[k] for k in key])
    return RandomStream(part, event, arrival, key, rng.integers(0, 100, n))
