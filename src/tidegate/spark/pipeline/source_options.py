"""The ``tidegate`` source's options, parsed and validated without Spark.

The option table is in :mod:`tidegate.spark.pipeline.source`'s docstring; a read names
either the embedded event log (``event_log``) or a Kafka topic (``kafka.bootstrap.servers`` and
``topic``, with ``kafka.<setting>`` client settings).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import parse_duration_us, parse_time_us
from tidegate.inputs.kafka.client import KafkaTopic
from tidegate.inputs.log import LogLocation
from tidegate.inputs.log_set import LogSet
from tidegate.inputs.planning import EARLIEST, Positions

DEFAULT_IDLE_CLOCK_INTERVAL = "10s"
_KNOWN_OPTIONS = {
    "event_log", "hub", "path", "startingoffsets", "startingarrivaltime", "acceptpartial", "endingoffsets",
    "endingarrivaltime", "maxeventsperbatch", "maxarrivalspanperbatch", "idleclockinterval", "oncorruptframe",
    "corruptframepath", "topic", "connection", "kafkareader", "inputs", "includeheaders",
}  # fmt: skip
ON_CORRUPT_FRAME = ("fail", "quarantine")
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceOptions:
    event_log: Path | None  # the embedded log's directory, or None for a Kafka topic
    starting: Positions = "earliest"
    starting_arrival_us: int | None = None
    ending: Positions = "latest"
    ending_arrival_us: int | None = None
    accept_partial: bool = False
    max_events_per_batch: int | None = None
    max_arrival_span_us: int | None = None
    idle_clock_interval_us: int | None = parse_duration_us(DEFAULT_IDLE_CLOCK_INTERVAL)
    corrupt_frame_path: Path | None = None  # None: fail on a damaged frame; else skip it and record it here
    kafka: KafkaTopic | None = None
    log_set: LogSet | None = None  # inputs reading their own logs: read them all, end to end
    include_headers: bool = False  # rows carry the built-in column headers

    @property
    def location(self) -> LogLocation:
        if self.log_set is not None:
            return self.log_set
        if self.kafka is not None:
            return self.kafka
        if self.event_log is None:
            raise ConfigError("tidegate source: no event log given", "set event_log, kafka or inputs")
        return self.event_log

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        opts = {str(k).lower(): v for k, v in options.items() if v is not None}
        unknown = sorted(k for k in set(opts) - _KNOWN_OPTIONS if not k.startswith("kafka."))
        if unknown:
            raise ConfigError(
                f"tidegate source: unknown option(s) {unknown}",
                "use event_log (or kafka.bootstrap.servers, topic, connection and kafkaReader), startingOffsets, "
                "startingArrivalTime, "
                "acceptPartial, "
                "endingOffsets, endingArrivalTime, "
                "maxEventsPerBatch, maxArrivalSpanPerBatch, idleClockInterval, onCorruptFrame, corruptFramePath or "
                "includeHeaders",
            )
        event_log = _event_log(opts, "")
        kafka = _kafka_topic(opts)
        log_set = _log_set(opts.get("inputs"))
        if log_set is not None and (event_log or kafka):
            raise ConfigError("tidegate source: inputs is set beside event_log or kafka.bootstrap.servers",
                              "name every log in inputs, or read one log with event_log or Kafka")  # fmt: skip
        if event_log and kafka:
            raise ConfigError(
                "tidegate source: both event_log and kafka.bootstrap.servers are set", "read one log: keep one"
            )
        if not event_log and not kafka and log_set is None:
            raise ConfigError("tidegate source: no event log given",
                              'add .option("event_log", "/path/to/event-log"), '
                              "or kafka.bootstrap.servers and topic")  # fmt: skip
        for a, b in (("startingoffsets", "startingarrivaltime"), ("endingoffsets", "endingarrivaltime")):
            if a in opts and b in opts:
                raise ConfigError(
                    f"tidegate source: both {a} and {b} are set", "give one way to say where to start/end"
                )
        idle = opts.get("idleclockinterval", DEFAULT_IDLE_CLOCK_INTERVAL).strip().lower()
        return cls(
            corrupt_frame_path=_corrupt_frame_path(opts),
            event_log=Path(event_log) if event_log else None,
            kafka=kafka,
            log_set=log_set,
            starting=_parse_positions(opts.get("startingoffsets", "earliest"), "startingOffsets"),
            starting_arrival_us=_optional(opts, "startingarrivaltime", parse_time_us, "startingArrivalTime"),
            ending=_parse_positions(opts.get("endingoffsets", "latest"), "endingOffsets"),
            ending_arrival_us=_optional(opts, "endingarrivaltime", parse_time_us, "endingArrivalTime"),
            accept_partial=_parse_bool(opts.get("acceptpartial", "false"), "acceptPartial"),
            include_headers=_parse_bool(opts.get("includeheaders", "false"), "includeHeaders"),
            max_events_per_batch=_optional(opts, "maxeventsperbatch", _parse_positive, "maxEventsPerBatch"),
            max_arrival_span_us=_optional(opts, "maxarrivalspanperbatch", parse_duration_us, "maxArrivalSpanPerBatch"),
            idle_clock_interval_us=None
            if idle in ("off", "none", "false")
            else parse_duration_us(idle, field="idleClockInterval"),
        )


def _event_log(opts: dict, where: str) -> str | None:
    """The ``event_log`` option (or ``path``); ``hub``, its old name, is read until 0.9, with a warning."""
    if "hub" in opts:
        if "event_log" in opts:
            raise ConfigError(f"tidegate source: both {where}event_log and {where}hub (its old name) are set",
                              "keep event_log and remove hub")  # fmt: skip
        logger.warning("tidegate source: the option %shub is deprecated; rename it to %sevent_log (removed in 0.9)",
                       where, where)  # fmt: skip
        return opts["hub"]
    return opts.get("event_log") or opts.get("path")


def _kafka_topic(opts: dict) -> KafkaTopic | None:
    if "kafka.bootstrap.servers" not in opts and "topic" not in opts:
        return None
    if not opts.get("kafka.bootstrap.servers") or not opts.get("topic"):
        raise ConfigError("tidegate source: a Kafka read needs both kafka.bootstrap.servers and topic",
                          'add .option("kafka.bootstrap.servers", "host:9092")'
                          '.option("topic", "readings")')  # fmt: skip
    return KafkaTopic.from_source_options(opts)


def _log_set(text: str | None) -> LogSet | None:
    """``inputs``: JSON ``[{"name": …, "event_log": …} or {"name": …, "kafka.bootstrap.servers": …,
    "topic": …}, …]``."""
    if text is None:
        return None
    try:
        items = json.loads(text)
        parts = []
        for item in items:
            opts = {str(k).lower(): str(v) for k, v in item.items()}
            name = opts.pop("name")
            where = _kafka_topic(opts) or _event_log(opts, f"inputs[{name}].")
            if where is None:
                raise KeyError("event_log")  # neither log named: refused below with the form inputs takes
            parts.append((name, where if isinstance(where, KafkaTopic) else Path(where)))
    except (ValueError, KeyError, AttributeError, TypeError):
        raise ConfigError(f"tidegate source: cannot read inputs {text!r}",
                          'write JSON: [{"name": "orders", "event_log": "/path"}, {"name": "payments", '
                          '"kafka.bootstrap.servers": "host:9092", "topic": "payments"}]') from None  # fmt: skip
    if len(parts) < 2:
        raise ConfigError(
            f"tidegate source: inputs names {len(parts)} log(s)", "name two or more, or read one with event_log"
        )
    return LogSet(tuple(parts))


def _corrupt_frame_path(opts: dict) -> Path | None:
    mode = str(opts.get("oncorruptframe", "fail")).strip().lower()
    if mode not in ON_CORRUPT_FRAME:
        raise ConfigError(f"onCorruptFrame: expected fail or quarantine, got {mode!r}",
                          "fail stops the batch at a damaged frame; quarantine skips it and records it")  # fmt: skip
    if mode != "quarantine":
        return None
    path = opts.get("corruptframepath")
    if not path:
        raise ConfigError(
            "onCorruptFrame is quarantine but corruptFramePath is not set",
            "add .option('corruptFramePath', '/dir') naming where the skipped frames are recorded",
        )
    return Path(path)


def _optional(opts: dict, key: str, parse, field: str):
    return parse(opts[key], field=field) if key in opts else None


def _parse_positive(text: str, *, field: str) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(
            f"{field}: expected a whole number of at least 1, got {text!r}", f"e.g. .option('{field}', 50000)"
        )
    return value


def _parse_bool(text: str, field: str) -> bool:
    value = str(text).strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"{field}: expected true or false, got {text!r}", f"write .option('{field}', 'true')")
    return value == "true"


def _parse_positions(text: str, field: str) -> Positions:
    value = str(text).strip()
    if value.lower() in ("earliest", "latest"):
        return value.lower()
    try:
        raw = json.loads(value)
        positions = {int(p): int(o) for p, o in raw.items()}
    except (ValueError, AttributeError, TypeError):
        raise ConfigError(
            f"{field}: cannot read {text!r}",
            'write earliest, latest, or JSON naming every partition: {"0": 1200, "1": -2} (-2 earliest, -1 latest)',
        ) from None
    if any(o < EARLIEST for o in positions.values()):
        raise ConfigError(f"{field}: negative offset in {text!r}", "offsets are >= 0, or -2 (earliest) / -1 (latest)")
    return positions
