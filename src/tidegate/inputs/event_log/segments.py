"""The index of one partition: its segment files, their frames, and what retention removed.

Readers never take a lock. A segment is *sealed* once a later segment exists — the writer
finishes a segment before it creates the next — so a refresh only re-examines the last
segment, at the cost of one ``stat``.

Bytes that do not validate are one of two things. A *torn tail*: the end of the last
segment past the acknowledged end (marks.py) — a writer mid-append, or one killed there;
readers stop before it and the next writer cuts it. Or *damage*: anything else — before
a valid frame, in a sealed segment, or below the acknowledged end. Damage is indexed as a
:class:`~tidegate.inputs.event_log.frames.Damage` span holding the offsets it covers, so those offsets
are never handed out again, the frames around it stay readable, and reading it raises
CorruptFrameError. An acknowledged frame is never cut.
"""

from __future__ import annotations

import bisect
import json
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from tidegate.files import atomic_write_json
from tidegate.inputs.event_log.errors import EventLogError
from tidegate.inputs.event_log.frames import Damage, Frame, find_next_frame, payload_ok, read_frame
from tidegate.inputs.event_log.marks import HoleMap, holes_name, load_holes, read_acked

SEGMENT_SUFFIX = ".seg"
LOCK_NAME = "lock"
RETENTION_NAME = "retention.json"
_LATE = object()  # refresh: read the acknowledged end only if the last segment is scanned
_RECHECK = "recheck"  # _index: the end was read late and a scan found damage: look again, carefully
_DAMAGED_FIX = "the partition is damaged; restore it from a replica, or delete the event log and replay its source"


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def partition_dir_name(partition: int) -> str:
    return f"p-{partition:05d}"


@dataclass(frozen=True)
class RetentionState:
    """What retention deleted from a partition, kept so seeks can name the missing span.

    ``start_offset`` is the first retained offset; ``deleted_through_arrival`` the largest
    arrival time deleted (every retained event arrived at or after it);
    ``deleted_from_arrival`` the smallest ever deleted.
    """

    start_offset: int = 0
    deleted_through_arrival: int | None = None
    deleted_from_arrival: int | None = None

    @classmethod
    def load(cls, path: Path) -> RetentionState:
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            return cls()
        return cls(
            start_offset=int(raw.get("start_offset", 0)),
            deleted_through_arrival=raw.get("deleted_through_arrival"),
            deleted_from_arrival=raw.get("deleted_from_arrival"),
        )

    def save(self, path: Path) -> None:
        atomic_write_json(path, asdict(self))


Entry = Frame | Damage  # what an index holds, in offset order


class Segment:
    """One segment file and the frames (and damaged spans) indexed in it so far."""

    __slots__ = ("base_offset", "path", "frames", "scanned_to", "sealed", "scanned_size")

    def __init__(self, base_offset: int, path: Path) -> None:
        self.base_offset = base_offset
        self.path = path
        self.frames: list[Entry] = []
        self.scanned_to = 0  # byte position just past the last indexed entry
        self.sealed = False
        self.scanned_size: int | None = None  # file size at the last scan; None: never scanned

    @property
    def end_offset(self) -> int:
        return self.frames[-1].end_offset if self.frames else self.base_offset

    def scan(self, size: int, *, last: bool, acked: int | None, next_base: int | None,
             holes: dict[tuple[int, int], Damage], floor_arrival: int | None) -> tuple[list[Entry], int]:  # fmt: skip
        """The entries in ``[scanned_to, size)`` and the byte position after them (nothing
        is changed: :meth:`take` them). In the last segment the end is bounded by the
        acknowledged end ``acked`` (None: unknown, an event log older than the marker); a sealed
        one holds exactly the offsets before ``next_base``."""
        limit = next_base if not last else acked
        position, expected = self.scanned_to, self.end_offset
        prev = self.frames[-1].max_arrival if self.frames else floor_arrival
        found: list[Entry] = []
        problem = ""
        with open(self.path, "rb", buffering=1 << 16) as f:
            while position < size:
                hole = holes.get((position, expected))
                frame, problem = (hole, "") if hole is not None else read_frame(f, position, size)
                if frame is not None and frame.first_offset > expected and (limit is None or frame.end_offset <= limit):
                    found.append(_gap(position, expected, frame, prev, "missing before the frame there"))
                    expected = frame.first_offset
                if frame is not None and frame.first_offset == expected:
                    found.append(frame)
                    position, expected, prev = frame.end_position, frame.end_offset, frame.max_arrival
                    continue
                if frame is not None:
                    problem = f"a frame of offset {frame.first_offset} where offset {expected} was due"
                if last and acked is not None and acked <= expected:
                    break  # past the acknowledged end: a torn tail
                nxt = find_next_frame(f, position, size, expected, limit)
                if nxt is None:
                    break
                what = problem if nxt.first_offset > expected else f"{nxt.position - position} stray bytes ({problem})"
                found.append(Damage(position, nxt.position, expected, nxt.first_offset - expected,
                                    _lo(prev, nxt), nxt.min_arrival, what))  # fmt: skip
                position, expected = nxt.position, nxt.first_offset
            # A crash can leave a full-length frame with garbage in it (power loss with
            # fsync off); it can only be the last one, so only that one is read in full.
            if last and found and isinstance(found[-1], Frame):
                frame = found[-1]
                f.seek(frame.payload_position)
                if not payload_ok(frame, f.read(frame.payload_len)):
                    found.pop()
                    position, expected = frame.position, frame.first_offset
                    problem = "payload fails its CRC check"
                    if acked is not None and acked >= frame.end_offset:
                        found.append(Damage(frame.position, frame.end_position, frame.first_offset, frame.count,
                                            frame.min_arrival, frame.max_arrival, problem))  # fmt: skip
                        position, expected = frame.end_position, frame.end_offset
        # what is left: a sealed segment accounts for every byte and every offset before the
        # next one; the last, for the offsets it acknowledged (the rest is a torn tail)
        owed = (limit if limit is not None else expected) - expected
        if (not last and position < size) or owed > 0:
            what = problem or "missing: the segment ends before them"
            if owed <= 0:
                what = f"{size - position} stray bytes at the end of a sealed segment ({problem})"
            found.append(Damage(position, size, expected, max(owed, 0), _lo(prev, None), _lo(prev, None), what))
            position = size
        return found, position

    def take(self, found: list[Entry], position: int, size: int) -> None:
        self.frames.extend(found)
        self.scanned_to = position
        self.scanned_size = size


def _lo(prev: int | None, nxt: Entry | None) -> int:
    return prev if prev is not None else (nxt.min_arrival if nxt is not None else 0)


def _gap(position: int, expected: int, frame: Entry, prev: int | None, where: str) -> Damage:
    what = f"offsets {expected}–{frame.first_offset - 1} are {where}" if frame.first_offset - expected > 1 else (
        f"offset {expected} is {where}")  # fmt: skip
    return Damage(
        position, position, expected, frame.first_offset - expected, _lo(prev, frame), frame.min_arrival, what
    )


class PartitionIndex:
    """Segments of one partition directory, refreshed incrementally from disk.

    Callers hold ``self.lock`` around ``refresh()`` and any use of the result.
    """

    def __init__(self, directory: Path, partition: int) -> None:
        self.directory = directory
        self.partition = partition
        self.lock = threading.RLock()
        self.segments: list[Segment] = []  # retained ones, in offset order
        self.retention = RetentionState()
        self.holes: HoleMap = {}
        self._retention_stamp: tuple[int, int, int] | None = None
        self._holes_name: str | None = None

    @property
    def lock_path(self) -> Path:
        return self.directory / LOCK_NAME

    @property
    def retention_path(self) -> Path:
        return self.directory / RETENTION_NAME

    def refresh(self) -> None:
        # List before reading retention.json: retention rewrites that file before it
        # unlinks segments, so a listing missing a segment is never paired with the old
        # state. The acknowledged end is read only when the last segment grew; it must
        # come before the listing and the sizes (the writer records it after writing, so
        # all it vouches for is then visible) — when it came after and a scan found
        # damage, the writer may simply have appended meanwhile: look again, in order.
        careful = False
        for _ in range(10):
            acked = read_acked(self.directory) if careful else _LATE
            names = self._list()
            self._refresh_retention()
            self._refresh_holes(names)
            done = self._index(sorted(n for n in names if n.endswith(SEGMENT_SUFFIX)), acked)
            if done is True:
                return
            careful = careful or done == _RECHECK
        raise EventLogError(
            f"partition {self.partition}: segments keep disappearing while indexing {self.directory}",
            "retention is deleting faster than this reader can list; retry",
        )

    def _list(self) -> list[str]:
        try:
            return os.listdir(self.directory)
        except FileNotFoundError:
            raise EventLogError(
                f"partition {self.partition}: directory {self.directory} is missing", _DAMAGED_FIX
            ) from None

    def _index(self, names: list[str], acked) -> bool | str:
        """Index the listed segments; False if one vanished meanwhile (list again)."""
        known = {s.base_offset: s for s in self.segments}
        segments = []
        for name in names:  # zero-padded names: lexical order is offset order
            base = int(name[: -len(SEGMENT_SUFFIX)])
            segments.append(known.get(base) or Segment(base, self.directory / name))
        floor = self.retention.deleted_through_arrival
        for i, seg in enumerate(segments):
            if not seg.sealed:
                try:
                    size = os.stat(seg.path).st_size
                except FileNotFoundError:
                    return False
                is_last = i == len(segments) - 1
                if size < seg.scanned_to:
                    raise EventLogError(
                        f"{seg.path} shrank to {size} bytes below its indexed {seg.scanned_to}", _DAMAGED_FIX
                    )
                if not is_last or size > seg.scanned_to or seg.scanned_size is None:
                    marker = read_acked(self.directory) if acked is _LATE and is_last else acked
                    found, position = seg.scan(
                        size, last=is_last, acked=None if marker is _LATE else marker,
                        next_base=None if is_last else segments[i + 1].base_offset,
                        holes=self.holes.get(seg.path.name, {}), floor_arrival=floor,
                    )  # fmt: skip
                    if is_last and acked is _LATE and any(isinstance(e, Damage) and not e.hole for e in found):
                        return _RECHECK
                    seg.take(found, position, size)
                seg.sealed = not is_last
            if seg.frames:
                floor = seg.frames[-1].max_arrival
        # segments wholly below start_offset are leftovers of an interrupted retention run
        start = self.retention.start_offset
        retained = [s for i, s in enumerate(segments) if s.end_offset > start or i == len(segments) - 1]
        for prev, nxt in zip(retained, retained[1:], strict=False):  # consecutive pairs
            if prev.end_offset != nxt.base_offset:
                raise EventLogError(
                    f"partition {self.partition}: {prev.path.name} ends at offset {prev.end_offset} "
                    f"but {nxt.path.name} starts at {nxt.base_offset}",
                    _DAMAGED_FIX,
                )
        self.segments = retained
        return True

    def _refresh_holes(self, names: list[str]) -> None:
        name = holes_name(names)
        if name != self._holes_name:
            self.holes = load_holes(self.directory, name)
            self._holes_name = name
            self.segments = []  # a repair turned damage into holes: index everything afresh

    def _refresh_retention(self) -> None:
        try:
            st = os.stat(self.retention_path)
        except FileNotFoundError:
            self.retention, self._retention_stamp = RetentionState(), None
            return
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._retention_stamp:
            self.retention = RetentionState.load(self.retention_path)
            self._retention_stamp = stamp

    # --- derived views; call after refresh() under self.lock -------------------------

    def end_offset(self) -> int:
        return self.segments[-1].end_offset if self.segments else self.retention.start_offset

    def start_offset(self) -> int:
        first = self.segments[0].base_offset if self.segments else self.retention.start_offset
        return max(first, self.retention.start_offset)

    def frames(self) -> list[tuple[Path, Entry]]:
        return [(s.path, f) for s in self.segments for f in s.frames]

    def last_arrival(self) -> int | None:
        for seg in reversed(self.segments):
            if seg.frames:
                return seg.frames[-1].max_arrival
        return self.retention.deleted_through_arrival

    def first_arrival(self) -> int | None:
        first = self.frames_between(self.start_offset(), self.end_offset())[:1]
        return first[0][1].min_arrival if first else None

    def retained_bytes(self) -> int:
        total = 0
        for seg in self.segments:
            try:
                total += os.stat(seg.path).st_size
            except FileNotFoundError:
                pass
        return total

    def frames_between(self, start: int, end: int) -> list[tuple[Path, Entry]]:
        """Frames (and damaged spans) holding any offset of ``[start, end)``, in order;
        a damaged span of no offsets counts where its bytes sit, inside the range."""
        out: list[tuple[Path, Entry]] = []
        if start >= end:
            return out
        i = max(bisect.bisect_right(self.segments, start, key=lambda s: s.base_offset) - 1, 0)
        for seg in self.segments[i:]:
            if seg.base_offset >= end:
                break
            j = max(bisect.bisect_right(seg.frames, start, key=lambda f: f.first_offset) - 1, 0)
            for frame in seg.frames[j:]:
                if frame.first_offset >= end:
                    break
                if frame.end_offset > start or (frame.count == 0 and frame.first_offset > start):
                    out.append((seg.path, frame))
        return out

    def first_frame_reaching(self, t_us: int) -> tuple[Path, Entry] | None:
        """The first retained frame holding an event that arrived at or after ``t_us``."""
        start = self.start_offset()
        for seg in self.segments:
            if not seg.frames or seg.frames[-1].max_arrival < t_us or seg.end_offset <= start:
                continue
            j = bisect.bisect_left(seg.frames, t_us, key=lambda f: f.max_arrival)
            for frame in seg.frames[j:]:
                if frame.end_offset > start:
                    return seg.path, frame
        return None
