"""``event-log.json``: the settings of one event log, validated when made and when read."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal

from tidegate.files import atomic_write_json
from tidegate.inputs.event_log.errors import EventLogError

FORMAT_VERSION = 1
CONFIG_NAME = "event-log.json"
LEGACY_CONFIG_NAME = "hub.json"  # a log made under the old name keeps its settings here
ClockMode = Literal["wall", "manual"]
CLOCK_MODES = ("wall", "manual")
DEFAULT_SEGMENT_BYTES = 64 << 20
MIN_SEGMENT_BYTES = 1 << 10
MAX_PARTITIONS = 99_999  # partition directories are p-00000 … p-99999
DEFAULT_MAX_ARRIVAL_AHEAD = "5m"  # as far as the early-arrival window (semantics §1)
DEFAULT_MAX_ARRIVAL_AHEAD_US = 5 * 60 * 1_000_000


@dataclass(frozen=True)
class EventLogConfig:
    partitions: int
    clock: ClockMode = "wall"
    retention_us: int | None = None  # delete segments whose newest event arrived longer ago
    retention_bytes: int | None = None  # per partition, oldest segments first
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    # wall clock: supplied arrival times may be at most this far ahead of it (None: no bound)
    max_arrival_ahead_us: int | None = DEFAULT_MAX_ARRIVAL_AHEAD_US
    created: str = ""  # ISO time, for the operator
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if not isinstance(self.partitions, int) or not 1 <= self.partitions <= MAX_PARTITIONS:
            raise EventLogError(
                f"event log partitions is {self.partitions!r}", f"use a whole number from 1 to {MAX_PARTITIONS}"
            )
        if self.clock not in CLOCK_MODES:
            raise EventLogError(
                f"event log clock is {self.clock!r}",
                "use 'wall' (arrival = time of append) or 'manual' (arrival set by `tidegate event-log clock`)",
            )
        if self.retention_us is not None and self.retention_us <= 0:
            raise EventLogError(
                "event log retention must be longer than zero", "give e.g. 7d, or none to keep everything"
            )
        if self.retention_bytes is not None and self.retention_bytes <= 0:
            raise EventLogError(
                "event log retention_bytes must be more than zero", "give a size in bytes, or none to keep everything"
            )
        if self.max_arrival_ahead_us is not None and (
            isinstance(self.max_arrival_ahead_us, bool) or not isinstance(self.max_arrival_ahead_us, int)
            or self.max_arrival_ahead_us <= 0
        ):  # fmt: skip
            raise EventLogError(
                f"event log max_arrival_ahead is {self.max_arrival_ahead_us!r} µs",
                "give a positive duration such as 5m (how far a supplied arrival time may lie ahead of the "
                "wall clock), or none for no bound",
            )
        if self.segment_bytes < MIN_SEGMENT_BYTES:
            raise EventLogError(
                f"event log segment_bytes is {self.segment_bytes}", f"use at least {MIN_SEGMENT_BYTES} (default 64 MiB)"
            )
        if self.format_version != FORMAT_VERSION:
            raise EventLogError(
                f"event log format version {self.format_version} is not the one this Tidegate reads ({FORMAT_VERSION})",
                "open it with the Tidegate release that created it, or replay its source into a new event log",
            )

    def with_retention(self, retention_us: int | None, retention_bytes: int | None) -> EventLogConfig:
        return replace(self, retention_us=retention_us, retention_bytes=retention_bytes)

    def save(self, root: Path) -> None:
        atomic_write_json(config_path(root), asdict(self))

    @classmethod
    def load(cls, root: Path) -> EventLogConfig:
        path = config_path(root)
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            raise EventLogError(
                f"no event log at {root} ({CONFIG_NAME} is missing)",
                f"create one with `tidegate event-log create {root} --partitions N`, or check the path",
            ) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise EventLogError(
                f"{path} is not valid JSON: {exc}", "restore it from a backup or recreate the event log"
            ) from None
        known = {k: raw[k] for k in cls.__dataclass_fields__ if k in raw}
        if "partitions" not in known:
            raise EventLogError(
                f"{path} does not say how many partitions the event log has", "restore it or recreate the event log"
            )
        return cls(**known)


def config_path(root: Path) -> Path:
    """Where the log at ``root`` keeps its settings: ``event-log.json``, or ``hub.json`` in a log
    made before the rename that has no ``event-log.json``."""
    legacy = root / LEGACY_CONFIG_NAME
    return legacy if legacy.exists() and not (root / CONFIG_NAME).exists() else root / CONFIG_NAME


def exists(root: Path) -> bool:
    """True when ``root`` holds an event log (its settings are written last when it is made)."""
    return config_path(root).exists()
