"""What a lineage — one checkpoint and the outputs written under it — has already emitted.

A replay in a fresh lineage takes over from a cut ``T``: the earlier lineage's output is
read up to ``T``, the new one's after it (:mod:`tidegate.runtime.reader`). Any ``T`` at or
before the point where the earlier lineage's output is final gives a gapless, duplicate-
free union; the highest such point is the lineage's last committed frontier: every window
ending at or before it is final (with per-substream watermarks, the frontier is their
floor, the arrival term, so it holds for every key).

Jobs without windows hand over by input position instead: the end offsets of the last
batch whose output is visible.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tidegate.eventtime.windows import SlidingWindow
from tidegate.jobspec import JobSpec
from tidegate.lineage.layout import JobPaths, batch_dirs


@dataclass(frozen=True)
class EmittedCut:
    """Windows ending at or before ``through_us`` were emitted (or had no events);
    ``None``: nothing is known to be final."""

    through_us: int | None
    batch_id: int | None = None  # the last batch whose output is visible
    end_offsets: dict[int, int] | None = None  # its end offsets: where a per-event job resumes

    def describe(self) -> str:
        from tidegate.eventtime.durations import format_time_us

        if self.through_us is None:
            return "nothing emitted yet"
        return f"output final through {format_time_us(self.through_us)}"


def emitted_cut(root: Path, spec: JobSpec, floor_us: int | None = None) -> EmittedCut:
    """The cut of the lineage at ``root`` for ``spec`` (the spec that lineage ran).

    ``floor_us``: the lineage's own output start; nothing at or before it was emitted by it,
    but it was by its predecessors, so the cut never falls below it.
    """
    paths = JobPaths(root)
    meta = _last_state(paths)
    delta = 1 if isinstance(spec.window, SlidingWindow) else 0  # a sliding window closes 1 µs after its end
    through = None if meta.get("frontier_us") is None else int(meta["frontier_us"]) - delta
    if floor_us is not None:
        through = floor_us if through is None else max(through, floor_us)
    last_batch = _last_output_batch(paths)
    offsets = _end_offsets(paths, last_batch) if last_batch is not None else None
    return EmittedCut(through, last_batch, offsets)


def has_committed_state(root: Path) -> bool:
    """True when the lineage's checkpoint holds at least one committed batch."""
    commits = JobPaths(root).checkpoint / "commits"
    return commits.is_dir() and any(p.name.isdigit() for p in commits.iterdir())


def _last_state(paths: JobPaths) -> dict:
    """The engine's last committed state version's metadata (frontier, batch)."""
    if not paths.state.is_dir():
        return {}
    versions = [int(p.name) for p in paths.state.iterdir() if p.name.isdigit() and (p / "_committed.json").exists()]
    if not versions:
        return {}
    return json.loads((paths.state / str(max(versions)) / "_committed.json").read_text())


def _last_output_batch(paths: JobPaths) -> int | None:
    ids = batch_dirs(paths.output)
    return ids[-1][0] if ids else None


def _end_offsets(paths: JobPaths, batch_id: int) -> dict[int, int] | None:
    from tidegate.errors import TidegateError
    from tidegate.lineage.offsets import batch_offsets

    try:
        _, end = batch_offsets(paths.checkpoint, batch_id)
    except TidegateError:  # the offset log was purged or never written: the caller falls back
        return None
    return dict(end.offsets)
