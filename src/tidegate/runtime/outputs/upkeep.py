"""Upkeep of a job's own files: compaction of its outputs and retention of what it keeps.

Settings (environment, each a duration such as ``7d``, or ``off`` to keep forever):

=============================  =======  ====================================================
``TIDEGATE_RETAIN_AUDIT``      ``7d``   hours of ``audit/`` (every event's outcome)
``TIDEGATE_RETAIN_QUARANTINE`` ``30d``  hours of ``quarantine/`` (bad input)
``TIDEGATE_RETAIN_METRICS``    ``30d``  days of ``metrics/`` (also in the control database)
``TIDEGATE_RETAIN_LINEAGES``   ``7d``   a retired lineage, once its span ended this long ago
``TIDEGATE_COMPACTION_GRACE``  ``1h``   merged batch folders stay this long for readers
``TIDEGATE_COMPACTION_EVERY``  ``15m``  a running driver compacts its lineage this often
=============================  =======  ====================================================

Age is measured on the broker clock of the job's event log — the clock the event-time
folders are stamped in — never a caller's wall clock, as the log's own retention is.

What is never deleted: anything of a lineage a run is starting, running or stopping on;
the newest lineage of each region (the next start resumes or hands over from it); the
job's ``output/`` of any kept lineage (consumers read it; only a retired lineage goes, and
whole); and an hour or day that is not entirely older than its retention. The consumer
view is rewritten afterwards, so it never names a lineage that is gone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePath

from tidegate.errors import ConfigError
from tidegate.lineage.commits import drop_hours_before
from tidegate.lineage.compaction import DEFAULT_GRACE_S, Compacted, compact_lineage
from tidegate.lineage.layout import HOUR_US, JobPaths, hour_dirs, hour_of, hour_of_dir
from tidegate.storage.store import Store

DAY_US = 24 * HOUR_US
LIVE_STATUSES = ("starting", "running", "stopping")
SETTINGS = {  # variable: (field, default)
    "TIDEGATE_RETAIN_AUDIT": ("audit_us", "7d"),
    "TIDEGATE_RETAIN_QUARANTINE": ("quarantine_us", "30d"),
    "TIDEGATE_RETAIN_METRICS": ("metrics_us", "30d"),
    "TIDEGATE_RETAIN_LINEAGES": ("lineages_us", "7d"),
    "TIDEGATE_COMPACTION_GRACE": ("grace_us", "1h"),
    "TIDEGATE_COMPACTION_EVERY": ("compact_every_us", "15m"),
}


@dataclass(frozen=True)
class Upkeep:
    """How long each kind of file is kept (µs; None: forever), and the compaction schedule."""

    audit_us: int | None = 7 * DAY_US
    quarantine_us: int | None = 30 * DAY_US
    metrics_us: int | None = 30 * DAY_US
    lineages_us: int | None = 7 * DAY_US
    grace_us: int = int(DEFAULT_GRACE_S * 1_000_000)
    compact_every_us: int | None = 15 * 60 * 1_000_000

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Upkeep:
        from tidegate.eventtime.durations import parse_duration_us

        env = os.environ if env is None else env
        values: dict[str, int | None] = {}
        for name, (attr, default) in SETTINGS.items():
            text = env.get(name, default).strip()
            if text.lower() == "off":
                if attr == "grace_us":  # "off" for the schedule means: no automatic compaction
                    raise ConfigError(
                        f"{name}=off: merged files need a grace time for readers that listed them",
                        "set a duration, e.g. 1h",
                    )
                values[attr] = None
                continue
            values[attr] = parse_duration_us(text, field=name)
        grace_us = values.pop("grace_us")
        assert grace_us is not None, "grace_us=off is refused above"
        return cls(grace_us=grace_us, **values)


@dataclass
class Cleaned:
    """What one clean-up removed (paths) and what it kept on purpose (reasons)."""

    removed: list[PurePath] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    compacted: list[Compacted] = field(default_factory=list)


def broker_now_us(controller, job: str) -> int:
    """The clock of the log ``job`` reads (its event log or Kafka topic): what the event-time
    folders are aged against."""
    from tidegate.inputs.log import open_log

    _, spec = controller.spec(job)
    return open_log(controller.input_of(spec)).clock_now_us()


def compact_job(controller, job: str, *, settings: Upkeep | None = None) -> list[Compacted]:
    """Compact every kept lineage of ``job`` in both regions, then rewrite the consumer view."""
    from tidegate.runtime.outputs.reader import publish_view

    settings = settings or Upkeep.from_env()
    done = []
    for region in controller.config.regions:
        for row in controller.db.lineages(job, region):
            paths = JobPaths.at(row.root, region=region)
            if paths.store.list(paths.root):
                done.extend(
                    compact_lineage(paths.root, now_s=time.time(), grace_s=settings.grace_us / 1e6, store=paths.store)
                )
    publish_view(controller, job)
    return done


def clean_job(controller, job: str, now_us: int, *, settings: Upkeep | None = None, apply: bool = True) -> Cleaned:
    """Remove what ``settings`` no longer keeps of ``job`` as of the broker time ``now_us``
    (``apply`` False: only say what would go)."""
    from tidegate.runtime.outputs.reader import publish_view

    settings = settings or Upkeep.from_env()
    cleaned = Cleaned()
    for region in controller.config.regions:
        lineages = controller.db.lineages(job, region)
        live = {r.lineage for r in controller.db.runs(job, region) if r.status in LIVE_STATUSES}
        oldest_kept = False  # lineages go oldest first only: the region's history never gets a hole
        for i, row in enumerate(lineages):
            paths = JobPaths.at(
                row.root, region=region
            )  # a local folder or an s3a:// root: the same rules, through its store
            store = paths.store
            if not store.list(paths.root):
                continue
            if not oldest_kept and _lineage_expired(
                row, i == len(lineages) - 1, row.id in live, now_us, settings, cleaned
            ):
                cleaned.removed.append(paths.root)
                if apply:
                    store.delete(paths.root)
                continue
            oldest_kept = True
            for directory, keep_us in ((paths.audit, settings.audit_us), (paths.quarantine, settings.quarantine_us)):
                if keep_us is not None:
                    cleaned.removed.extend(_expired_hours(store, directory, now_us - keep_us, apply))
            if settings.metrics_us is not None:
                cleaned.removed.extend(_expired_days(store, paths.metrics, now_us - settings.metrics_us, apply))
    if apply:
        publish_view(controller, job)
    return cleaned


def _lineage_expired(row, newest: bool, live: bool, now_us: int, settings: Upkeep, cleaned: Cleaned) -> bool:
    if settings.lineages_us is None or row.retired_at is None or row.output_until_us is None:
        return False
    if newest or live:
        cleaned.kept.append(f"lineage {row.id}: {'the newest of its region' if newest else 'a run uses it'}")
        return False
    return row.output_until_us <= now_us - settings.lineages_us


def _expired_hours(store: Store, directory: PurePath, before_us: int, apply: bool) -> list[PurePath]:
    """Hour folders whose whole hour ends at or before ``before_us``; then their emptied days.
    On an object store readers are told to skip those hours first (their batch records still
    name the files), and the hours' files outside the hour folders go too."""
    first_kept = hour_of(before_us)
    expired = [folder for _, folder in hour_dirs(directory, None, first_kept - 1, store)]
    if not apply:
        return expired
    removed = list(expired)
    if expired and not store.is_local:
        removed += drop_hours_before(store, directory, first_kept)
    for folder in expired:
        store.delete(folder)
    for day in {folder.parent for folder in expired}:
        if not store.list(day):
            store.delete(day)
    return removed


def _expired_days(store: Store, directory: PurePath, before_us: int, apply: bool) -> list[PurePath]:
    """``date=D`` folders (metrics) whose whole day ends at or before ``before_us``."""
    expired = []
    for day in store.list(directory):
        first_hour = hour_of_dir(day.name, "hour=00")
        if day.is_dir and first_hour is not None and (first_hour + 24) * HOUR_US <= before_us:
            expired.append(day.path)
            if apply:
                store.delete(day.path)
    return expired
