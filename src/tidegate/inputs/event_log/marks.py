"""What a partition directory records about its segments, beside them.

``acked``
    The end offset of the last acknowledged append: 8 bytes little-endian and their CRC32,
    rewritten in place by the writer after each append (after its fsync, when it fsyncs).
    It is what tells a torn tail from damage: bytes at offsets below it were acknowledged
    and are never cut. Not fsynced itself: after a power cut it may lag, which only
    weakens damage detection for the frames written since; it never runs ahead of fsynced
    data. An event log made before the marker existed has none until its next append.

``holes-NNNNNN.json``
    Damage that ``tidegate event-log repair`` moved aside: per segment, the byte span, the
    offsets it held and where the quarantined bytes went. Readers skip those offsets.
    Each repair writes the next generation and then removes the previous one, so readers
    notice a repair in the directory listing they make anyway, and index afresh.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path

from tidegate.files import atomic_write_json
from tidegate.inputs.event_log.errors import EventLogError
from tidegate.inputs.event_log.frames import Damage

ACKED_NAME = "acked"
HOLES_PREFIX, HOLES_SUFFIX = "holes-", ".json"
_ACKED = struct.Struct("<QI")


def read_acked(directory: Path) -> int | None:
    """The partition's acknowledged end offset; None when there is no readable marker."""
    try:
        fd = os.open(directory / ACKED_NAME, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        raw = os.pread(fd, _ACKED.size, 0)
    finally:
        os.close(fd)
    if len(raw) != _ACKED.size:
        return None
    end, crc = _ACKED.unpack(raw)
    return end if crc == zlib.crc32(raw[:8]) else None


def write_acked(directory: Path, end_offset: int) -> None:
    """Record that every offset below ``end_offset`` was acknowledged. Caller holds the
    partition's write lock; one small in-place write."""
    head = struct.pack("<Q", end_offset)
    fd = os.open(directory / ACKED_NAME, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, head + struct.pack("<I", zlib.crc32(head)), 0)
    finally:
        os.close(fd)


HoleMap = dict[str, dict[tuple[int, int], Damage]]  # segment name → (byte position, first offset) → hole


def holes_name(names: list[str]) -> str | None:
    """The current holes file among a directory's ``names`` (the highest generation)."""
    found = [n for n in names if n.startswith(HOLES_PREFIX) and n.endswith(HOLES_SUFFIX)]
    return max(found, default=None)


def load_holes(directory: Path, name: str | None) -> HoleMap:
    if name is None:
        return {}
    path = directory / name
    try:
        raw = json.loads(path.read_text())
        holes: HoleMap = {}
        for h in raw["holes"]:
            hole = Damage(
                position=int(h["position"]), end_position=int(h["end_position"]),
                first_offset=int(h["first_offset"]), count=int(h["end_offset"]) - int(h["first_offset"]),
                min_arrival=int(h["min_arrival"]), max_arrival=int(h["max_arrival"]),
                what=f"{h['what']}; moved aside by `tidegate event-log repair` to {h['quarantine']}", hole=True,
            )  # fmt: skip
            holes.setdefault(h["segment"], {})[(hole.position, hole.first_offset)] = hole
        return holes
    except (ValueError, KeyError, TypeError, OSError) as exc:
        raise EventLogError(
            f"{path} cannot be read ({exc})",
            "restore it from a backup: it lists the offsets `tidegate event-log repair` quarantined",
        ) from None


def add_holes(directory: Path, entries: list[dict]) -> None:
    """Record more holes (segment, position, end_position, first_offset, end_offset,
    min_arrival, max_arrival, what, quarantine) as the next generation of the holes file.
    Caller holds the partition's write lock."""
    current = holes_name(os.listdir(directory))
    previous = [] if current is None else json.loads((directory / current).read_text())["holes"]
    generation = 1 if current is None else int(current[len(HOLES_PREFIX) : -len(HOLES_SUFFIX)]) + 1
    atomic_write_json(directory / f"{HOLES_PREFIX}{generation:06d}{HOLES_SUFFIX}", {"holes": previous + entries})
    if current is not None:
        (directory / current).unlink()  # a crash before this leaves both: readers take the newer
