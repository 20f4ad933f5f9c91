"""Where every file of a lineage lives: the one place that knows the folder layout.

Layout under a lineage's root directory::

    checkpoint/                          Spark's offsets and commits
    checkpoint/tidegate/state/N/         policy state, window buffer, _committed.json
    output/date=D/hour=H/batch-N/        emitted rows of batch N whose window ends (events
                                         without a window: system time) fall in hour H of day D
    output/date=D/hour=H/compacted-A-B.parquet   batches A..B of that hour, merged
    output/_compacted.json               the batch through which compacted files replace batch folders
    outputs/<name>/date=D/hour=H/…       a named output (sinks.outputs) of a job with steps: its step's
                                         rows, filed, compacted and committed as output/ is
    audit/date=D/hour=H/…                every judged event's outcome, by system time (optional)
    quarantine/date=D/hour=H/…           bad input with reason and input position, by arrival time
    behind_watermark/date=D/hour=H/…     kept events behind a percentile watermark, by system time (only in that mode)
    metrics/date=D/batch_id=N.json       counts and watermarks of the batch, by its broker clock
    corrupt_frames/                      frames of the event log the job skipped (on_corrupt_frame: quarantine)
    reference/<name>/valid_from=T.json   each reference snapshot the job joined: its files and their hashes
    lineage.json                         the plan the lineage's driver starts from
    .fence                               the fencing epoch of the driver allowed to commit here
    */.tmp-*                             staging, hidden from readers, renamed into place (tidegate.spark.pipeline.sink)

On an object store (``s3a://`` roots) nothing is renamed: a batch's files stay where they
were written, under names of their own attempt, and ``<output>/_commits/N.json`` — created
once, with put-if-absent — lists them (:mod:`tidegate.lineage.commits`); ``.fence/`` holds one
object per claimed epoch (:mod:`tidegate.lineage.fence`). Compacted files are
``compacted-A-B-<attempt>.parquet``, visible once ``<output>/_compactions/A.json`` names them
(:mod:`tidegate.lineage.object_compaction`); ``<side output>/_retained.json`` is the first
hour retention kept.

Why folders by event time (UTC day and hour): a read of a span lists the hours of that
span only, so it costs what the span costs however long the lineage has run; and
retention removes whole days and hours. Every row also carries its ``batch_id``: a batch
re-run after a crash finds its folder of each hour already visible and leaves it as it
is, so the name is what makes a write exactly once, and compaction keeps the id in the
rows it merges. Why staging names start with a dot: Spark's and DuckDB's file listings
skip them, so a reader never meets a half-written batch.
"""

from __future__ import annotations

import calendar
import time
import uuid
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TypeVar

from tidegate.storage.store import LOCAL, Store

HOUR_US = 3_600_000_000
BATCH_COLUMN = "batch_id"  # in every row of an output: the batch that wrote it
LAYOUT_COLUMNS = (BATCH_COLUMN, "date", "hour")  # what the layout adds to a job's columns
BATCH_FOLDER_PREFIX = "batch-"  # a batch's rows of one hour
COMPACTED_PREFIX = "compacted-"  # compacted-A-B.parquet: batches A..B of one hour
COMPACTION_FILE = "_compacted.json"  # per output: batches through which compacted files are read
METRICS_PREFIX = "batch_id="
OFFSET_LOG = "offsets"  # Spark's, under the checkpoint: what each batch reads
COMMIT_LOG = "commits"  # Spark's, under the checkpoint: which batches are done
COMMITS_DIR = "_commits"  # per output, on an object store: one record per committed batch
COMPACTIONS_DIR = "_compactions"  # per output, on an object store: one record per compaction
RETAINED_FILE = "_retained.json"  # per side output, on an object store: the first hour retention kept
COMMITTED_FILE = "_committed.json"  # written last into a state version: the version is valid
FENCE_FILE = ".fence"
LINEAGE_FILE = "lineage.json"
CORRUPT_FRAMES_DIR = "corrupt_frames"  # beside quarantine/, whose Parquet the engine owns
STAGING_PREFIX = ".tmp-"
LEGACY_STAGING_PREFIX = "_tmp_"  # what earlier versions staged under: cleared like the rest
STAGING_PREFIXES = (STAGING_PREFIX, LEGACY_STAGING_PREFIX)

P = TypeVar("P", bound=PurePath)  # a local Path stays a Path, an object-store path a pure one


@dataclass(frozen=True)
class JobPaths:
    """The files of the lineage at ``root``, a path of ``store`` (a local folder by default;
    ``bucket/prefix/…`` on S3, see :meth:`tidegate.storage.store.Store.path_of`)."""

    root: PurePath
    store: Store = field(default=LOCAL, compare=False)

    @classmethod
    def at(cls, root: str | PurePath, settings=None, *, region: str | None = None) -> JobPaths:
        """The lineage at ``root`` as the control database records it: a local folder, or an
        ``s3a://`` URI reached with ``settings`` (default: the environment's S3 settings of
        ``region``, ``TIDEGATE_S3_<REGION>_*`` before ``TIDEGATE_S3_*``: each region its own store)."""
        from tidegate.storage.s3 import S3Settings
        from tidegate.storage.store import open_store
        from tidegate.storage.uri import parse_root

        parsed = parse_root(str(root))
        if settings is None and not parsed.is_local:
            settings = S3Settings.from_env(region)
        store = open_store(parsed, settings)
        return cls(store.path_of(parsed), store)

    @property
    def on_object_store(self) -> bool:
        """True on an S3 root: batches commit by record, not by rename (:mod:`tidegate.lineage.commits`)."""
        return not self.store.is_local

    def uri(self, path: PurePath) -> str:
        """What Spark opens for ``path`` (a path under this lineage)."""
        return self.store.uri(path)

    @property
    def checkpoint(self) -> PurePath:
        return self.root / "checkpoint"

    @property
    def commits(self) -> PurePath:
        """Spark's commit log: one file per batch it recorded as done."""
        return self.checkpoint / COMMIT_LOG

    @property
    def offsets(self) -> PurePath:
        """Spark's offset log: one file per batch it planned (:mod:`tidegate.lineage.offsets`)."""
        return self.checkpoint / OFFSET_LOG

    @property
    def state(self) -> PurePath:
        return self.checkpoint / "tidegate" / "state"

    @property
    def output(self) -> PurePath:
        return self.root / "output"

    @property
    def outputs(self) -> PurePath:
        """The folder of the named outputs (``sinks.outputs``), one folder each."""
        return self.root / "outputs"

    def output_of(self, name: str | None) -> PurePath:
        """Output ``name``'s folder: ``output/`` for the job's own output (``None`` or
        ``output``), ``outputs/<name>/`` for a named one (a name the spec checked)."""
        return self.output if name in (None, "output") else self.outputs / name

    @property
    def named_outputs(self) -> list[PurePath]:
        """The named outputs' folders the lineage has written (listed: the layout does not hold the spec)."""
        return [e.path for e in self.store.list(self.outputs) if e.is_dir and not is_staging(e.name)]

    @property
    def audit(self) -> PurePath:
        return self.root / "audit"

    @property
    def quarantine(self) -> PurePath:
        return self.root / "quarantine"

    @property
    def behind_watermark(self) -> PurePath:
        """Kept events that fell behind a percentile watermark (the lossy mode's side output)."""
        return self.root / "behind_watermark"

    @property
    def metrics(self) -> PurePath:
        return self.root / "metrics"

    @property
    def corrupt_frames(self) -> PurePath:
        return self.root / CORRUPT_FRAMES_DIR

    def reference_record(self, name: str, snapshot_folder: str) -> PurePath:
        """The record of reference ``name``'s snapshot ``valid_from=T`` (:mod:`tidegate.lineage.reference_records`)."""
        return self.root / "reference" / name / f"{snapshot_folder}.json"

    @property
    def lineage_file(self) -> PurePath:
        return self.root / LINEAGE_FILE

    @property
    def fence(self) -> PurePath:
        return self.root / FENCE_FILE

    @property
    def staged_folders(self) -> list[PurePath]:
        """The folders a batch stages its writes in (``.tmp-…`` at their top): each output, the
        metrics and the state versions."""
        return [
            self.output,
            *self.named_outputs,
            self.audit,
            self.quarantine,
            self.behind_watermark,
            self.metrics,
            self.state,
        ]

    @property
    def partitioned_outputs(self) -> list[PurePath]:
        """The outputs written in ``date=D/hour=H`` folders: the row outputs of the query."""
        return [self.output, *self.named_outputs, self.audit, self.quarantine]

    def metrics_file(self, batch_id: int, clock_us: int) -> PurePath:
        """Batch ``batch_id``'s metrics, in the day of its broker clock (fixed by Spark's
        offset log, so a re-run of the batch replaces the same file)."""
        return self.metrics / date_name(clock_us) / f"{METRICS_PREFIX}{batch_id}.json"

    def find_metrics_file(self, batch_id: int) -> PurePath | None:
        """Batch ``batch_id``'s metrics file, wherever its day put it; None when absent."""
        name = f"{METRICS_PREFIX}{batch_id}.json"
        found = [
            day.path / name
            for day in self.store.list(self.metrics)
            if day.is_dir and day.name.startswith("date=") and self.store.exists(day.path / name)
        ]
        return found[-1] if found else None

    def state_version(self, version: int) -> PurePath:
        return self.state / str(version)


# -- event-time folders: ``date=YYYY-MM-DD/hour=HH`` (UTC) ---------------------------------
def hour_of(us: int) -> int:
    """The hour (since the epoch) holding the instant ``us``: ``[h·1h, (h+1)·1h)``."""
    return us // HOUR_US


def date_name(us: int) -> str:
    return "date=" + time.strftime("%Y-%m-%d", time.gmtime(us // 1_000_000))


def hour_dir(base: P, hour: int) -> P:
    """The folder of ``hour`` under the output ``base``: ``date=D/hour=HH``."""
    return base / date_name(hour * HOUR_US) / f"hour={time.gmtime(hour * 3600).tm_hour:02d}"


def hour_of_dir(date_folder: str, hour_folder: str) -> int | None:
    """The hour a ``date=D`` / ``hour=HH`` pair of names stands for; None for other names."""
    if not date_folder.startswith("date=") or not hour_folder.startswith("hour="):
        return None
    try:
        day = calendar.timegm(time.strptime(date_folder[5:], "%Y-%m-%d")) // 3600
        hh = int(hour_folder[5:])
    except ValueError:
        return None
    return day + hh if 0 <= hh < 24 else None


def hour_dirs(
    base: PurePath, first_hour: int | None = None, last_hour: int | None = None, store: Store = LOCAL
) -> list[tuple[int, PurePath]]:
    """The visible hour folders of ``base`` in ``[first_hour, last_hour]`` (None: open), in
    time order. Days outside the range are skipped by name, unlisted: the cost is the span's."""
    found = []
    for day in store.list(base):
        day_hour = hour_of_dir(day.name, "hour=00")
        if (
            not day.is_dir
            or day_hour is None
            or (last_hour is not None and day_hour > last_hour)
            or (first_hour is not None and day_hour + 23 < first_hour)
        ):
            continue
        for folder in store.list(day.path):
            hour = hour_of_dir(day.name, folder.name)
            if (
                folder.is_dir
                and hour is not None
                and (first_hour is None or hour >= first_hour)
                and (last_hour is None or hour <= last_hour)
            ):
                found.append((hour, folder.path))
    return sorted(found)


def batch_folder_name(batch_id: int) -> str:
    """The folder of batch ``batch_id``'s rows within one hour: ``batch-N``."""
    return f"{BATCH_FOLDER_PREFIX}{batch_id}"


def batch_of_folder(name: str) -> int | None:
    """The batch id a ``batch-N`` folder name carries; None for any other name."""
    digits = name[len(BATCH_FOLDER_PREFIX) :] if name.startswith(BATCH_FOLDER_PREFIX) else ""
    return int(digits) if digits.isdigit() else None


def compacted_name(first_batch: int, last_batch: int) -> str:
    return f"{COMPACTED_PREFIX}{first_batch}-{last_batch}.parquet"


def compacted_range(name: str) -> tuple[int, int] | None:
    """(A, B) of a ``compacted-A-B.parquet`` file name; None for any other name."""
    if not (name.startswith(COMPACTED_PREFIX) and name.endswith(".parquet")):
        return None
    bounds = name[len(COMPACTED_PREFIX) : -len(".parquet")].split("-")
    return (int(bounds[0]), int(bounds[1])) if len(bounds) == 2 and all(b.isdigit() for b in bounds) else None


def is_staging(name: str) -> bool:
    """True for a staging file or folder (this version's or an earlier one's)."""
    return name.startswith(STAGING_PREFIXES)


def staging_dir(base: P, name: str) -> P:
    """A fresh hidden folder beside ``base``'s visible ones to stage ``name`` in."""
    return base / f"{STAGING_PREFIX}{name}-{uuid.uuid4().hex}"
