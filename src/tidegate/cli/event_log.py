"""``tidegate event-log …``: create, inspect, feed and maintain an embedded event log
(``tidegate hub …``, its old spelling, still runs, deprecated: :mod:`tidegate.cli.deprecated`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from tidegate.eventtime.durations import format_duration, format_time_us, parse_duration_us, parse_time_us
from tidegate.inputs.event_log.errors import EventLogError, offsets_text
from tidegate.inputs.event_log.log import EventLog
from tidegate.inputs.event_log.producer import partition_for_key

_PRODUCE_CHUNK = 10_000  # stdin lines per append
_PATH_HELP = "the event log's folder"


def register(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser(
        "event-log",
        help="the embedded event log: create, produce, describe, retention, clock, generate, verify, repair",
        description="An event log on local disk: partitions of append-only segments, each event stamped "
        "with its arrival time by the log's clock.",
    )
    cmds = group.add_subparsers(dest="event_log_command", metavar="ACTION", required=True)

    p = cmds.add_parser("create", help="create an empty event log")
    p.add_argument("path", type=Path, help=_PATH_HELP)
    p.add_argument("--partitions", type=int, required=True, help="how many partitions")
    p.add_argument(
        "--clock",
        choices=("wall", "manual"),
        default="wall",
        help="wall: arrival = time of append; manual: arrival = a clock moved by `event-log clock`",
    )
    p.add_argument("--retention", help="delete segments older than this, e.g. 7d (default: keep all)")
    p.add_argument("--retention-bytes", type=int, help="keep at most this many bytes per partition")
    p.add_argument("--segment-bytes", type=int, default=64 << 20, help="roll segments at this size")
    p.add_argument(
        "--max-arrival-ahead",
        default="5m",
        metavar="DURATION",
        help="wall clock: refuse supplied arrival times further ahead of it (default 5m; 'none': no bound)",
    )
    p.set_defaults(func=cmd_create)

    p = cmds.add_parser("produce", help="append events: --payload TEXT, or one payload per line of stdin (JSONL)")
    p.add_argument("path", type=Path, help=_PATH_HELP)
    p.add_argument("--partition", type=int, help="append to this partition (default: route by key)")
    p.add_argument("--key", help="key of every event")
    p.add_argument("--key-field", help="take each event's key from this field of its JSON payload")
    p.add_argument("--arrival-time", help="ISO time to stamp (import); default: the broker clock")
    p.add_argument("--payload", help="a single payload; without it, stdin is read")
    p.set_defaults(func=cmd_produce)

    p = cmds.add_parser("describe", help="partitions, offsets, arrival range and size")
    p.add_argument("path", type=Path, help=_PATH_HELP)
    p.set_defaults(func=cmd_describe)

    p = cmds.add_parser("retention", help="show or change retention; --apply deletes old segments")
    p.add_argument("path", type=Path, help=_PATH_HELP)
    p.add_argument("--set", dest="set_age", metavar="DURATION", help="new age limit, e.g. 3d, or 'none'")
    p.add_argument("--set-bytes", metavar="BYTES", help="new size limit per partition, or 'none'")
    p.add_argument("--apply", action="store_true", help="delete what retention allows now")
    p.set_defaults(func=cmd_retention)

    p = cmds.add_parser("clock", help="show the broker clock, or advance a manual one")
    p.add_argument("path", type=Path, help=_PATH_HELP)
    p.add_argument("--advance-to", metavar="ISO", help="move a manual clock forward to this time")
    p.set_defaults(func=cmd_clock)

    p = cmds.add_parser("verify", help="read every frame; report damage (exit 1 when any is found)")
    p.add_argument("path", type=Path, help=_PATH_HELP)
    p.add_argument("--partition", type=int, action="append", help="only this partition (repeatable)")
    p.set_defaults(func=cmd_verify)

    p = cmds.add_parser("repair", help="move damaged bytes into <log>/quarantine/; their offsets become holes")
    p.add_argument("path", type=Path, help=_PATH_HELP)
    p.add_argument("--partition", type=int, action="append", help="only this partition (repeatable)")
    p.set_defaults(func=cmd_repair)

    p = cmds.add_parser("generate", help="append synthetic device traffic (reproducible by seed)")
    p.add_argument("path", type=Path, help=_PATH_HELP)
    p.add_argument("--events", type=int, default=100_000, help="how many events (default 100,000)")
    p.add_argument("--devices", type=int, default=60, help="devices in the fleet (default 60)")
    p.add_argument("--partitions", type=int, help="partitions to spread them over (default: the log's)")
    p.add_argument("--seed", type=int, default=0, help="the same seed gives the same traffic (default 0)")
    p.add_argument(
        "--mode",
        choices=("backfill", "realtime"),
        default="backfill",
        help="backfill: stamp arrivals in the past at once (default); realtime: append as time passes",
    )
    p.add_argument("--rate", type=float, default=200.0, help="events per second of the whole fleet")
    p.add_argument("--duration", help="realtime: run this long, e.g. 30s (events = rate × duration)")
    p.add_argument("--start", metavar="ISO", help="backfill: first arrival (default: after what the log holds)")
    p.add_argument("--late-fraction", type=float, default=0.01, help="share of events that arrive late (default 0.01)")
    p.add_argument(
        "--early-fraction", type=float, default=0.002, help="share of events stamped ahead of time (default 0.002)"
    )
    p.add_argument(
        "--malformed-fraction", type=float, default=0.001, help="share of payloads that do not parse (default 0.001)"
    )
    p.add_argument("--idle-partitions", type=int, default=0, help="partitions that get no events (default 0)")
    p.add_argument("--create", action="store_true", help="create the event log if it does not exist")
    p.add_argument(
        "--clock",
        choices=("wall", "manual"),
        help="with --create: the log's clock (default: manual for backfill, wall for realtime)",
    )
    p.set_defaults(func=cmd_generate)


def cmd_create(args: argparse.Namespace) -> int:
    log = EventLog.create(
        args.path,
        partitions=args.partitions,
        clock=args.clock,
        retention=args.retention,
        retention_bytes=args.retention_bytes,
        segment_bytes=args.segment_bytes,
        max_arrival_ahead=_none_or(args.max_arrival_ahead, str),
    )
    print(f"created {log.root}: {log.partitions} partitions, {log.clock_mode} clock, retention {_retention(log)}")
    return 0


def cmd_produce(args: argparse.Namespace) -> int:
    log = EventLog.open(args.path)
    if args.key is not None and args.key_field is not None:
        raise EventLogError("--key and --key-field both given", "use one: a fixed key, or a field of each payload")
    arrival = None if args.arrival_time is None else parse_time_us(args.arrival_time, field="--arrival-time")
    payloads: Iterable[str] = [args.payload] if args.payload is not None else _stdin_payloads()
    total = 0
    for chunk in _chunks(payloads, _PRODUCE_CHUNK):
        groups: dict[int, tuple[list[str | None], list[str]]] = {}
        for n, payload in enumerate(chunk):
            key = args.key if args.key_field is None else _field(payload, args.key_field)
            if args.partition is not None:
                p = args.partition
            elif key is not None:
                p = partition_for_key(key, log.partitions)
            else:
                p = (total + n) % log.partitions  # no key: round robin
            keys, texts = groups.setdefault(p, ([], []))
            keys.append(key)
            texts.append(payload)
        for p, (keys, texts) in sorted(groups.items()):
            r = log.append(p, keys, texts, None if arrival is None else [arrival] * len(texts))
            print(
                f"partition {p}: offsets [{r.first_offset}, {r.first_offset + r.count}) "
                f"arrived {format_time_us(r.first_arrival)}"
            )
        total += len(chunk)
    if not total:
        print("no events on stdin; nothing appended", file=sys.stderr)
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    log = EventLog.open(args.path)
    print(
        f"{log.root}: {log.partitions} partitions, {log.clock_mode} clock at {format_time_us(log.clock_now_us())}, "
        f"retention {_retention(log)}"
    )
    header = ("partition", "start", "end", "events", "first arrival", "last arrival", "bytes", "segments")
    rows = [
        (
            str(i.partition),
            str(i.start_offset),
            str(i.end_offset),
            str(i.end_offset - i.start_offset),
            format_time_us(i.first_arrival_us) or "-",
            format_time_us(i.last_arrival_us) or "-",
            f"{i.bytes:,}",
            str(i.segments),
        )
        for i in log.describe()
    ]
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))
    return 0


def cmd_retention(args: argparse.Namespace) -> int:
    log = EventLog.open(args.path)
    if args.set_age is not None or args.set_bytes is not None:
        age = log.config.retention_us if args.set_age is None else _none_or(args.set_age, _duration_us)
        size = log.config.retention_bytes if args.set_bytes is None else _none_or(args.set_bytes, _bytes)
        log.set_retention(f"{age}us" if age is not None else None, size)
    print(f"{log.root}: retention {_retention(log)}; clock {format_time_us(log.clock_now_us())}")
    if args.apply:
        deleted = log.apply_retention()
        for path in deleted:
            print(f"deleted {path}")
        print(f"{len(deleted)} segment(s) deleted")
    return 0


def cmd_clock(args: argparse.Namespace) -> int:
    log = EventLog.open(args.path)
    if args.advance_to is not None:
        log.advance_clock(parse_time_us(args.advance_to, field="--advance-to"))
    print(f"{log.clock_mode} clock: {format_time_us(log.clock_now_us())}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from tidegate.inputs.event_log.verify import verify

    log = EventLog.open(args.path)
    partitions = args.partition or list(range(log.partitions))
    findings = verify(log, partitions)
    for f in findings:
        print(f.line())
    damaged = [f for f in findings if f.kind == "damaged"]
    for p in partitions:
        mine = [f for f in damaged if f.partition == p]
        holes = sum(f.kind == "hole" for f in findings if f.partition == p)
        note = f" ({holes} repaired hole(s) skipped by readers)" if holes else ""
        print(f"partition {p}: {len(mine)} damaged span(s)" if mine else f"partition {p}: ok{note}")
    if damaged:
        print(
            f"{len(damaged)} damaged span(s): readers fail on them. Run `tidegate event-log repair {log.root}` to move "
            f"them into {log.root / 'quarantine'} (their offsets become holes readers skip), or restore the "
            "segments from a replica"
        )
        return 1
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    from tidegate.inputs.event_log.clock import wall_clock_us
    from tidegate.inputs.event_log.verify import repair

    log = EventLog.open(args.path)
    records = repair(log, args.partition, now_us=wall_clock_us())
    for record in records:
        raw = json.loads(record.read_text())
        offsets = offsets_text(raw["first_offset"], raw["end_offset"] - raw["first_offset"])
        print(
            f"partition {raw['partition']}: quarantined {offsets} ({raw['length']} bytes at byte "
            f"{raw['byte_position']} of {Path(raw['segment']).name}: {raw['problem']}) to {record}"
        )
    print(
        f"{len(records)} damaged span(s) moved aside; their offsets are holes readers skip"
        if records
        else "nothing to repair"
    )
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from tidegate.inputs.event_log.generator import GeneratorConfig, generate

    if not EventLog.exists(args.path):
        if not args.create:
            EventLog.open(args.path)  # raises the "no event log" error with its fix
        if args.partitions is None:
            raise EventLogError("--create needs --partitions", "say how many partitions the new event log has")
        clock = args.clock or ("manual" if args.mode == "backfill" else "wall")
        EventLog.create(args.path, partitions=args.partitions, clock=clock)
    log = EventLog.open(args.path)
    config = GeneratorConfig(
        devices=args.devices,
        partitions=args.partitions or log.partitions,
        events=args.events,
        seed=args.seed,
        mode=args.mode,
        start_us=None if args.start is None else parse_time_us(args.start, field="--start"),
        rate_per_s=args.rate,
        duration_us=None if args.duration is None else parse_duration_us(args.duration, field="--duration"),
        late_fraction=args.late_fraction,
        early_fraction=args.early_fraction,
        malformed_fraction=args.malformed_fraction,
        idle_partitions=args.idle_partitions,
    )
    summary = generate(log, config, progress=True)
    print(summary)
    return 0


def _stdin_payloads() -> Iterator[str]:
    for line in sys.stdin:
        line = line.rstrip("\r\n")
        if line.strip():
            yield line


def _chunks(items: Iterable[str], size: int) -> Iterator[list[str]]:
    chunk: list[str] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _field(payload: str, name: str) -> str | None:
    """The key from a payload field; None (round robin) when the payload is not such JSON."""
    try:
        value = json.loads(payload).get(name)
    except (json.JSONDecodeError, AttributeError):
        return None
    return None if value is None else str(value)


def _none_or(text: str, parse):
    return None if text.strip().lower() in ("none", "off", "") else parse(text)


def _duration_us(text: str) -> int:
    return parse_duration_us(text, field="--set")


def _bytes(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise EventLogError(f"--set-bytes {text!r} is not a number of bytes", "give e.g. 1073741824, or none") from None


def _retention(log: EventLog) -> str:
    age = "keep all" if log.config.retention_us is None else format_duration(log.config.retention_us)
    size = "" if log.config.retention_bytes is None else f", at most {log.config.retention_bytes:,} bytes/partition"
    return age + size
