"""Retention of a job's own files (tidegate.runtime.outputs.upkeep): audit, quarantine and metrics go
by the hour or day once wholly past their retention; retired lineages go oldest first; what a
running lineage, the next start or the consumer view needs stays."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from tidegate.errors import ConfigError
from tidegate.lineage.layout import HOUR_US, JobPaths, batch_folder_name, hour_dir
from tidegate.runtime.outputs.upkeep import DAY_US, Upkeep, clean_job

H0 = 1_767_225_600_000_000 // HOUR_US  # 2026-01-01T00:00Z in hours
NOW = (H0 + 24 * 10) * HOUR_US + 30 * 60 * 1_000_000  # 2026-01-11T00:30Z on the broker clock
SETTINGS = Upkeep(audit_us=2 * DAY_US, quarantine_us=5 * DAY_US, metrics_us=3 * DAY_US, lineages_us=4 * DAY_US)


def lineage(tmp_path: Path, name: str, until_hour: int | None, *, hours=range(H0, H0 + 24 * 11, 6)) -> NS:
    """A lineage with a folder of every output every 6 hours, retired at ``until_hour`` (None: open)."""
    paths = JobPaths(tmp_path / name)
    for hour in hours:
        for output in paths.partitioned_outputs:
            (hour_dir(output, hour) / batch_folder_name(hour - H0)).mkdir(parents=True)
        paths.metrics_file(hour - H0, hour * HOUR_US).parent.mkdir(parents=True, exist_ok=True)
        paths.metrics_file(hour - H0, hour * HOUR_US).write_text("{}")
    until = None if until_hour is None else until_hour * HOUR_US
    return NS(id=name, root=str(paths.root), retired_at=None if until is None else 1.0, output_until_us=until)


def controller(lineages: list[NS], live: tuple[str, ...] = ()) -> NS:
    runs = [NS(lineage=row.id, status="running" if row.id in live else "stopped") for row in lineages]
    db = NS(
        lineages=lambda job, region: lineages if region == "east" else [],
        runs=lambda job, region: runs if region == "east" else [],
        active_region=lambda job: None,
    )
    return NS(db=db, config=NS(regions=("east", "west")))


def hours_left(directory: Path) -> list[int]:
    return sorted(int(p.name.removeprefix("batch-")) // 24 for p in directory.glob("date=*/hour=*/batch-*"))


def test_side_outputs_go_by_whole_hours_and_days_past_their_retention_and_the_output_stays(tmp_path):
    row = lineage(tmp_path, "l1", None)
    cleaned = clean_job(controller([row]), "job", NOW, settings=SETTINGS)
    paths = JobPaths(Path(row.root))
    # days 0–10 written, 4 hours each; at 01-11T00:30 audit keeps the hours ending after 01-09T00:30:
    # 01-09 00:00–01:00 ends after it, so that day is whole
    assert hours_left(paths.audit) == [8] * 4 + [9] * 4 + [10] * 4
    assert hours_left(paths.quarantine) == [d for d in range(5, 11) for _ in range(4)]  # from 01-06T00:30
    # metrics by whole days: 01-08 ends after 01-08T00:30
    assert sorted(p.name for p in paths.metrics.iterdir()) == [f"date=2026-01-{d:02d}" for d in (8, 9, 10, 11)]
    assert len(hours_left(paths.output)) == 44  # consumers read the output: never removed here
    assert not any(p.is_dir() and not any(p.iterdir()) for p in paths.audit.glob("date=*"))  # no empty days left
    assert cleaned.removed and not cleaned.kept


def test_retired_lineages_go_oldest_first_and_never_one_a_run_uses_nor_the_newest(tmp_path):
    old = lineage(tmp_path, "old", H0 + 24 * 2)  # retired 8 days before NOW: past 4 days
    used = lineage(tmp_path, "used", H0 + 24 * 3)  # past too, but a run is on it
    after = lineage(tmp_path, "after", H0 + 24 * 4)  # past, yet after a kept one: no hole in the history
    newest = lineage(tmp_path, "newest", H0 + 24 * 5)  # retired and past, but the next start needs it
    cleaned = clean_job(controller([old, used, after, newest], live=("used",)), "job", NOW, settings=SETTINGS)
    assert not Path(old.root).exists()
    assert all(Path(r.root).exists() for r in (used, after, newest))
    assert Path(old.root) in cleaned.removed
    assert cleaned.kept == ["lineage used: a run uses it"]


def test_a_dry_run_lists_what_would_go_and_removes_nothing(tmp_path):
    old, newest = lineage(tmp_path, "old", H0 + 24), lineage(tmp_path, "newest", None)
    cleaned = clean_job(controller([old, newest]), "job", NOW, settings=SETTINGS, apply=False)
    assert Path(old.root) in cleaned.removed and Path(old.root).exists()
    assert all(p.exists() for p in cleaned.removed)


def test_settings_come_from_the_environment_with_off_to_keep_forever():
    settings = Upkeep.from_env({"TIDEGATE_RETAIN_AUDIT": "off", "TIDEGATE_RETAIN_METRICS": "12h"})
    assert settings.audit_us is None and settings.metrics_us == 12 * HOUR_US
    assert settings.quarantine_us == 30 * DAY_US and settings.compact_every_us == 15 * 60 * 1_000_000
    with pytest.raises(ConfigError, match="TIDEGATE_COMPACTION_GRACE=off"):
        Upkeep.from_env({"TIDEGATE_COMPACTION_GRACE": "off"})
    with pytest.raises(ConfigError, match="TIDEGATE_RETAIN_LINEAGES"):
        Upkeep.from_env({"TIDEGATE_RETAIN_LINEAGES": "a week"})


def test_retention_is_aged_by_the_clock_of_the_log_the_job_reads(tmp_path):
    """``tidegate output clean`` and the upkeep DAG age folders by the job's own log (event log or Kafka
    topic, through the one partitioned-log interface), not by the wall clock."""
    from platform_support import Platform, fill
    from tidegate.runtime.outputs.upkeep import broker_now_us

    log = fill(tmp_path / "event-log", 200, seed=3)  # a manual clock: far from the wall clock
    (tmp_path / "platform").mkdir()
    p = Platform(tmp_path / "platform", tmp_path / "event-log")
    p.controller.deploy(p.spec_file())
    assert broker_now_us(p.controller, "device-fleet-counts") == log.clock_now_us()


def test_on_s3_the_same_hours_and_days_go_and_a_read_of_the_side_outputs_skips_them(s3_stores, monkeypatch):
    import time

    import pyarrow as pa

    from s3 import BUCKETS
    from tidegate.lineage.committed import committed_files
    from tidegate.lineage.layout import BATCH_COLUMN, hour_dirs
    from tidegate.spark.pipeline.sink.files import HOUR_KEY, write_batch_table
    from tidegate.storage.s3 import S3Settings

    settings = s3_stores["east"].settings()
    monkeypatch.setattr(S3Settings, "from_env", classmethod(lambda cls, *args, **kwargs: settings))
    root = f"s3a://{BUCKETS['east']}/lineages/{time.time_ns()}"
    paths = JobPaths.at(root)
    hours = range(H0, H0 + 24 * 11, 6)
    for hour in hours:  # one batch per hour of every output, and its metrics
        rows = pa.table({"id": [hour], BATCH_COLUMN: [hour - H0], HOUR_KEY: [hour]})
        for output in paths.partitioned_outputs:
            write_batch_table(rows, output, hour - H0, store=paths.store)
        paths.store.write_json(paths.metrics_file(hour - H0, hour * HOUR_US), {})

    clean_job(
        controller([NS(id="l1", root=root, retired_at=None, output_until_us=None)]), "job", NOW, settings=SETTINGS
    )

    def days_left(directory) -> list[int]:
        return [(hour - H0) // 24 for hour, _ in hour_dirs(directory, store=paths.store)]

    def days_read(directory) -> list[int]:
        ids = [paths.store.read_parquet(f)["id"][0].as_py() for f in committed_files(directory, store=paths.store)]
        return sorted((i - H0) // 24 for i in ids)

    # as on a local root (the test above): audit from 01-09, quarantine from 01-06, metrics from 01-08
    assert days_left(paths.audit) == days_read(paths.audit) == [8] * 4 + [9] * 4 + [10] * 4
    assert days_left(paths.quarantine) == days_read(paths.quarantine) == [d for d in range(5, 11) for _ in range(4)]
    assert [e.name for e in paths.store.list(paths.metrics)] == [f"date=2026-01-{d:02d}" for d in (8, 9, 10, 11)]
    assert len(days_read(paths.output)) == 44  # the output is never removed here
    # a later compaction merges what is kept and skips the removed hours its batch records still name
    from tidegate.lineage.object_compaction import compact_output

    compact_output(paths.store, paths.audit, len(hours) * 6, now_s=1000.0, grace_s=0.0)
    assert days_read(paths.audit) == [8] * 4 + [9] * 4 + [10] * 4
