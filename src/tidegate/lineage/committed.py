"""What a lineage has committed: the engine's state versions and the batches readers can see.

Two records of progress sit side by side. Spark's commit log says which micro-batches it
finished; the engine's own state versions (``checkpoint/tidegate/state/N``) say what the
event-time core had decided after batch N — its frontier among them. A state version
counts only once its ``_committed.json`` is there: it is written last and renamed into
place with the rest, so a version without it is a crash's left-over, never read.
An output folder ``batch_id=N`` counts once visible: the rename is the commit.
"""

from __future__ import annotations

import json
from pathlib import Path

from tidegate.lineage.layout import COMMITTED_FILE, JobPaths, batch_dirs


def committed_versions(state_dir: Path) -> list[int]:
    """The state versions under ``state_dir`` that were committed (unordered)."""
    if not state_dir.is_dir():
        return []
    return [int(p.name) for p in state_dir.iterdir() if p.name.isdigit() and (p / COMMITTED_FILE).exists()]


def has_committed_state(root: Path) -> bool:
    """True when the lineage's checkpoint holds at least one committed batch."""
    commits = JobPaths(root).commits
    return commits.is_dir() and any(p.name.isdigit() for p in commits.iterdir())


def last_state(paths: JobPaths) -> dict:
    """The engine's last committed state version's metadata (frontier, batch); {} before any."""
    versions = committed_versions(paths.state)
    if not versions:
        return {}
    return json.loads((paths.state_version(max(versions)) / COMMITTED_FILE).read_text())


def last_output_batch(paths: JobPaths) -> int | None:
    """The last batch whose output rows are visible; None before the first."""
    ids = batch_dirs(paths.output)
    return ids[-1][0] if ids else None
