"""Where every file of a lineage lives: the one place that knows the folder layout.

Layout under a lineage's root directory::

    checkpoint/                  Spark's offsets and commits
    checkpoint/tidegate/state/N/ policy state, window buffer, _committed.json
    output/batch_id=N/           emitted rows (final windows, or events without a window)
    audit/batch_id=N/            every judged event's outcome (optional)
    quarantine/batch_id=N/       bad input with reason and input position
    behind_watermark/batch_id=N/ kept events behind a percentile watermark (only in that mode)
    metrics/batch_id=N.json      counts and watermarks of the batch
    corrupt_frames/              frames of the event log the job skipped (on_corrupt_frame: quarantine)
    lineage.json                 the plan the lineage's driver starts from
    .fence                       the fencing epoch of the driver allowed to commit here
    */.tmp-*                     staging, hidden from readers, renamed into place (tidegate.spark.pipeline.sink)

Why the batch id is in every folder name: a batch re-run after a crash finds its folder
already visible and leaves it as it is, so the name is what makes a write exactly once.
Why staging names start with a dot: Spark's and DuckDB's file listings skip them, so a
reader never meets a half-written batch.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

BATCH_PREFIX = "batch_id="
BATCH_GLOB = f"{BATCH_PREFIX}*"
BATCH_FILES_GLOB = f"{BATCH_GLOB}/*.parquet"  # every visible row file of an output folder
OFFSET_LOG = "offsets"  # Spark's, under the checkpoint: what each batch reads
COMMIT_LOG = "commits"  # Spark's, under the checkpoint: which batches are done
COMMITTED_FILE = "_committed.json"  # written last into a state version: the version is valid
FENCE_FILE = ".fence"
LINEAGE_FILE = "lineage.json"
CORRUPT_FRAMES_DIR = "corrupt_frames"  # beside quarantine/, whose Parquet the engine owns
STAGING_PREFIX = ".tmp-"
LEGACY_STAGING_PREFIX = "_tmp_"  # what earlier versions staged under: cleared like the rest
STAGING_PREFIXES = (STAGING_PREFIX, LEGACY_STAGING_PREFIX)


@dataclass(frozen=True)
class JobPaths:
    """The files of the lineage at ``root``."""

    root: Path

    @property
    def checkpoint(self) -> Path:
        return self.root / "checkpoint"

    @property
    def commits(self) -> Path:
        """Spark's commit log: one file per batch it recorded as done."""
        return self.checkpoint / COMMIT_LOG

    @property
    def offsets(self) -> Path:
        """Spark's offset log: one file per batch it planned (:mod:`tidegate.lineage.offsets`)."""
        return self.checkpoint / OFFSET_LOG

    @property
    def state(self) -> Path:
        return self.checkpoint / "tidegate" / "state"

    @property
    def output(self) -> Path:
        return self.root / "output"

    @property
    def audit(self) -> Path:
        return self.root / "audit"

    @property
    def quarantine(self) -> Path:
        return self.root / "quarantine"

    @property
    def behind_watermark(self) -> Path:
        """Kept events that fell behind a percentile watermark (the lossy mode's side output)."""
        return self.root / "behind_watermark"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics"

    @property
    def corrupt_frames(self) -> Path:
        return self.root / CORRUPT_FRAMES_DIR

    @property
    def lineage_file(self) -> Path:
        return self.root / LINEAGE_FILE

    @property
    def fence(self) -> Path:
        return self.root / FENCE_FILE

    @property
    def staged_folders(self) -> list[Path]:
        """The folders a batch stages its writes in: one ``batch_id=N`` (or state version) each."""
        return [self.output, self.audit, self.quarantine, self.behind_watermark, self.metrics, self.state]

    def metrics_file(self, batch_id: int) -> Path:
        return self.metrics / f"{batch_name(batch_id)}.json"

    def state_version(self, version: int) -> Path:
        return self.state / str(version)


def batch_name(batch_id: int) -> str:
    """The name of batch ``batch_id``'s folder in an output: ``batch_id=N``."""
    return f"{BATCH_PREFIX}{batch_id}"


def batch_id_of(name: str) -> int | None:
    """The batch id a ``batch_id=N`` folder name carries; None for any other name."""
    if not name.startswith(BATCH_PREFIX):
        return None
    digits = name[len(BATCH_PREFIX):]
    return int(digits) if digits.isdigit() else None


def batch_dirs(directory: Path) -> list[tuple[int, Path]]:
    """The visible ``batch_id=N`` folders of ``directory`` with their ids, in batch order."""
    if not directory.is_dir():
        return []
    found = [(batch_id_of(p.name), p) for p in directory.iterdir()]
    return sorted((batch_id, p) for batch_id, p in found if batch_id is not None)


def is_staging(name: str) -> bool:
    """True for a staging file or folder (this version's or an earlier one's)."""
    return name.startswith(STAGING_PREFIXES)


def staging_dir(base: Path, name: str) -> Path:
    """A fresh hidden folder beside ``base``'s visible ones to stage ``name`` in."""
    return base / f"{STAGING_PREFIX}{name}-{uuid.uuid4().hex}"
