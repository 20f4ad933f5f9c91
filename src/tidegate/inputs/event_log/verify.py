"""Finding damage in an event log (``tidegate event-log verify``) and moving it aside (``tidegate event-log repair``).

The index checks frame headers only; :func:`verify` also reads every payload in full, so
it finds what readers would trip over later. Each finding names the partition, the
segment file, the byte position, the offsets and what is wrong.

:func:`repair`, under each partition's write lock, copies every damaged span's bytes to
``<event log>/quarantine/p-NNNNN/<segment>-at-<byte>-offsets-<first>-<end>.bin`` with a JSON
record of where they came from beside it, then lists the span in the partition's
``holes.json``. From then on readers skip those offsets (a job reading with
``on_corrupt_frame: quarantine`` records that it skipped them). No segment file is
rewritten, so no good frame moves, and no offset is renumbered or given out again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tidegate.eventtime.durations import format_time_us
from tidegate.files import atomic_write_json, flocked, fsync_dir
from tidegate.inputs.event_log.errors import CorruptFrameError, offsets_text
from tidegate.inputs.event_log.frames import Damage, Frame
from tidegate.inputs.event_log.log import EventLog
from tidegate.inputs.event_log.marks import add_holes
from tidegate.inputs.event_log.reader import stored_batches
from tidegate.inputs.event_log.segments import PartitionIndex, partition_dir_name

QUARANTINE_DIR = "quarantine"
REASON = "corrupt frame"


@dataclass(frozen=True)
class Finding:
    """One span of a segment that does not read back as events."""

    partition: int
    path: Path  # the segment file
    position: int  # byte position in it
    length: int  # bytes
    first_offset: int
    end_offset: int  # [first_offset, end_offset): the events it held
    kind: str  # "damaged" (readers fail on it), "hole" (repaired: skipped), "torn tail" (cut by the next append)
    what: str
    min_arrival: int = 0  # bounds of the held events' arrival times
    max_arrival: int = 0

    def line(self) -> str:
        where = f"partition {self.partition}  {self.path.name}  byte {self.position}"
        if self.kind == "torn tail":
            return f"{where}  torn tail of {self.length} bytes: never acknowledged, the next append cuts it"
        label = "DAMAGED" if self.kind == "damaged" else "hole"
        return f"{where}  {offsets_text(self.first_offset, self.end_offset - self.first_offset)}  {label}: {self.what}"


def verify(log: EventLog, partitions: list[int] | None = None) -> list[Finding]:
    """Every damaged span, repaired hole and torn tail, by partition and offset."""
    findings = []
    for p in range(log.partitions) if partitions is None else partitions:
        ix = _fresh_index(log, p)
        findings += _findings(p, ix.frames()) + _torn_tail(ix)
    return findings


def _fresh_index(log: EventLog, partition: int) -> PartitionIndex:
    """The partition indexed from disk now: a long-lived index trusts the sealed segments
    it read once, and verifying is about what the disk holds today."""
    log._check_partition(partition)
    ix = PartitionIndex(log._indexes[partition].directory, partition)
    ix.refresh()
    return ix


def _findings(partition: int, entries: list[tuple[Path, Frame | Damage]]) -> list[Finding]:
    found = [_finding(partition, path, d, "hole" if d.hole else "damaged", d.what)
             for path, d in entries if isinstance(d, Damage)]  # fmt: skip
    frames = [(path, f) for path, f in entries if isinstance(f, Frame)]
    by_place = {(path, f.position): f for path, f in frames}

    def bad(error: CorruptFrameError) -> None:
        found.append(_finding(partition, error.path, by_place[(error.path, error.position)], "damaged", error.what))

    for _ in stored_batches(partition, frames, on_corrupt=bad):
        pass
    return sorted(found, key=lambda f: (f.first_offset, f.position))


def _finding(partition: int, path: Path, span: Frame | Damage, kind: str, what: str) -> Finding:
    end = span.end_position
    return Finding(partition, path, span.position, end - span.position, span.first_offset, span.end_offset,
                   kind, what, span.min_arrival, span.max_arrival)  # fmt: skip


def _torn_tail(ix: PartitionIndex) -> list[Finding]:
    if not ix.segments:
        return []
    last = ix.segments[-1]
    try:
        size = os.stat(last.path).st_size
    except FileNotFoundError:
        return []
    if size <= last.scanned_to:
        return []
    return [Finding(ix.partition, last.path, last.scanned_to, size - last.scanned_to, last.end_offset,
                    last.end_offset, "torn tail", "never acknowledged")]  # fmt: skip


def repair(log: EventLog, partitions: list[int] | None = None, now_us: int | None = None) -> list[Path]:
    """Move every damaged span aside (see the module docstring); the JSON records written."""
    written: list[Path] = []
    for p in range(log.partitions) if partitions is None else partitions:
        log._check_partition(p)
        with flocked(log._indexes[p].lock_path, exclusive=True):  # no append moves the tail meanwhile
            ix = _fresh_index(log, p)
            damaged = [f for f in _findings(p, ix.frames()) if f.kind == "damaged"]
            holes = [_quarantine(log.root, f, now_us) for f in damaged]
            if holes:
                add_holes(ix.directory, [hole for hole, _ in holes])  # every reader re-indexes on seeing it
            written += [record for _, record in holes]
    return written


def _quarantine(root: Path, f: Finding, now_us: int | None) -> tuple[dict, Path]:
    directory = root / QUARANTINE_DIR / partition_dir_name(f.partition)
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"{f.path.stem}-at-{f.position}-offsets-{f.first_offset}-{f.end_offset}"
    with open(f.path, "rb") as src:
        src.seek(f.position)
        data = src.read(f.length)
    saved = directory / f"{stem}.bin"
    tmp = saved.with_name(f".{saved.name}.tmp")
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, saved)
    fsync_dir(directory)
    record = directory / f"{stem}.json"
    atomic_write_json(record, {
        "reason": REASON, "partition": f.partition, "segment": str(f.path), "byte_position": f.position,
        "length": f.length, "first_offset": f.first_offset, "end_offset": f.end_offset, "problem": f.what,
        "bytes_file": saved.name, "min_arrival": f.min_arrival, "max_arrival": f.max_arrival,
        "quarantined_at": None if now_us is None else format_time_us(now_us),
    })  # fmt: skip
    hole = {
        "segment": f.path.name, "position": f.position, "end_position": f.position + f.length,
        "first_offset": f.first_offset, "end_offset": f.end_offset, "min_arrival": f.min_arrival,
        "max_arrival": f.max_arrival, "what": f.what, "quarantine": str(record.relative_to(root)),
    }  # fmt: skip
    return hole, record


def record_skipped(directory: Path, error: CorruptFrameError) -> Path:
    """Record that a reader skipped a damaged span (``on_corrupt_frame: quarantine``): one
    JSON file per span, named by partition and offsets, so a replayed batch rewrites the
    same record. The JVM reader writes the same records (LogReaderFactory.java)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"partition-{error.partition:05d}-offsets-{error.first_offset:020d}-{error.end_offset:020d}.json"
    atomic_write_json(path, {
        "reason": REASON, "partition": error.partition, "offset": error.first_offset, "end_offset": error.end_offset,
        "segment": str(error.path), "byte_position": error.position, "problem": error.what,
    })  # fmt: skip
    return path
