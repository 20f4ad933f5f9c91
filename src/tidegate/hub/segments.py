"""The index of one partition: its segment files, their frames, and what retention removed.

Readers never take a lock: they index what is on disk up to the first frame that does
not validate (a writer mid-append or a torn tail) and stop there. A segment is *sealed*
once a later segment exists — the writer finishes a segment before it creates the next —
so a refresh only re-examines the last segment, at the cost of one ``stat``.
"""

from __future__ import annotations

import bisect
import json
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from tidegate.hub.errors import HubError
from tidegate.hub.files import atomic_write_json
from tidegate.hub.frames import Frame, payload_ok, scan_frames

SEGMENT_SUFFIX = ".seg"
LOCK_NAME = "lock"
RETENTION_NAME = "retention.json"
_DAMAGED_FIX = "the partition is damaged; restore it from a replica, or delete the hub and replay its source"


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


class Segment:
    """One segment file and the frames indexed in it so far."""

    __slots__ = ("base_offset", "path", "frames", "scanned_to", "sealed")

    def __init__(self, base_offset: int, path: Path) -> None:
        self.base_offset = base_offset
        self.path = path
        self.frames: list[Frame] = []
        self.scanned_to = 0  # byte position just past the last valid frame
        self.sealed = False

    @property
    def end_offset(self) -> int:
        return self.frames[-1].end_offset if self.frames else self.base_offset

    def scan(self, size: int, *, verify_last_payload: bool) -> None:
        with open(self.path, "rb", buffering=1 << 16) as f:
            found = scan_frames(f, self.scanned_to, size)
            # A crash can leave a full-length frame with garbage in it (power loss with
            # fsync off); it can only be the last one, so only that one is read in full.
            if found and verify_last_payload:
                last = found[-1]
                f.seek(last.payload_position)
                if not payload_ok(last, f.read(last.payload_len)):
                    found.pop()
        expected = self.end_offset
        for frame in found:
            if frame.first_offset != expected:
                raise HubError(
                    f"{self.path}: frame at byte {frame.position} starts at offset {frame.first_offset}, "
                    f"expected {expected}",
                    _DAMAGED_FIX,
                )
            expected = frame.end_offset
        self.frames.extend(found)
        if found:
            self.scanned_to = found[-1].end_position


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
        self._retention_stamp: tuple[int, int, int] | None = None

    @property
    def lock_path(self) -> Path:
        return self.directory / LOCK_NAME

    @property
    def retention_path(self) -> Path:
        return self.directory / RETENTION_NAME

    def refresh(self) -> None:
        # List before reading retention.json: retention rewrites that file before it
        # unlinks segments, so a listing missing a segment is never paired with the old state.
        for _ in range(10):
            names = self._list_segments()
            self._refresh_retention()
            if self._index(names):
                return
        raise HubError(
            f"partition {self.partition}: segments keep disappearing while indexing {self.directory}",
            "retention is deleting faster than this reader can list; retry",
        )

    def _list_segments(self) -> list[str]:
        try:
            return sorted(n for n in os.listdir(self.directory) if n.endswith(SEGMENT_SUFFIX))
        except FileNotFoundError:
            raise HubError(
                f"partition {self.partition}: directory {self.directory} is missing", _DAMAGED_FIX
            ) from None

    def _index(self, names: list[str]) -> bool:
        """Index the listed segments; False if one vanished meanwhile (list again)."""
        known = {s.base_offset: s for s in self.segments}
        segments = []
        for name in names:  # zero-padded names: lexical order is offset order
            base = int(name[: -len(SEGMENT_SUFFIX)])
            segments.append(known.get(base) or Segment(base, self.directory / name))
        for i, seg in enumerate(segments):
            if seg.sealed:
                continue
            try:
                size = os.stat(seg.path).st_size
            except FileNotFoundError:
                return False
            is_last = i == len(segments) - 1
            if size < seg.scanned_to:
                raise HubError(
                    f"{seg.path} shrank to {size} bytes below its indexed {seg.scanned_to}", _DAMAGED_FIX
                )
            if size > seg.scanned_to:
                seg.scan(size, verify_last_payload=is_last)
            if not is_last:
                if seg.scanned_to != size:
                    raise HubError(
                        f"{seg.path}: invalid frame at byte {seg.scanned_to} of {size} before a later segment",
                        _DAMAGED_FIX,
                    )
                seg.sealed = True
        # segments wholly below start_offset are leftovers of an interrupted retention run
        start = self.retention.start_offset
        retained = [s for i, s in enumerate(segments) if s.end_offset > start or i == len(segments) - 1]
        for prev, nxt in zip(retained, retained[1:]):
            if prev.end_offset != nxt.base_offset:
                raise HubError(
                    f"partition {self.partition}: {prev.path.name} ends at offset {prev.end_offset} "
                    f"but {nxt.path.name} starts at {nxt.base_offset}",
                    _DAMAGED_FIX,
                )
        self.segments = retained
        return True

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

    def frames(self) -> list[tuple[Path, Frame]]:
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

    def frames_between(self, start: int, end: int) -> list[tuple[Path, Frame]]:
        """Frames holding any offset of ``[start, end)``, in order."""
        out: list[tuple[Path, Frame]] = []
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
                if frame.end_offset > start:
                    out.append((seg.path, frame))
        return out

    def first_frame_reaching(self, t_us: int) -> tuple[Path, Frame] | None:
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
