"""The layout of a lineage on disk (tidegate.lineage.layout): names the engine writes and the runtime reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidegate.lineage.layout import (
    HOUR_US,
    JobPaths,
    batch_folder_name,
    batch_of_folder,
    compacted_name,
    compacted_range,
    hour_dir,
    hour_dirs,
    hour_of,
    hour_of_dir,
    is_staging,
    staging_dir,
)

H0 = 1_767_225_600_000_000 // HOUR_US  # 2026-01-01T00:00Z, in hours since the epoch


def test_every_file_of_a_lineage_sits_under_its_root():
    paths = JobPaths(Path("/r"))
    assert paths.checkpoint == Path("/r/checkpoint")
    assert (paths.offsets, paths.commits) == (Path("/r/checkpoint/offsets"), Path("/r/checkpoint/commits"))
    assert paths.state == Path("/r/checkpoint/tidegate/state")
    assert paths.state_version(7) == Path("/r/checkpoint/tidegate/state/7")
    assert paths.output == Path("/r/output")
    assert paths.metrics_file(12, (H0 + 5) * HOUR_US) == Path("/r/metrics/date=2026-01-01/batch_id=12.json")
    assert paths.corrupt_frames == Path("/r/corrupt_frames")
    assert (paths.fence, paths.lineage_file) == (Path("/r/.fence"), Path("/r/lineage.json"))
    assert paths.output_of(None) == paths.output_of("output") == paths.output
    assert paths.output_of("archive") == Path("/r/outputs/archive")


def test_named_outputs_are_cleared_of_staging_and_compacted_beside_the_output(tmp_path):
    paths = JobPaths(tmp_path)
    assert paths.named_outputs == [] and paths.partitioned_outputs == [paths.output, paths.audit, paths.quarantine]
    paths.output_of("archive").mkdir(parents=True)
    staging_dir(paths.outputs, "archive").mkdir()  # a half-made folder is not an output
    assert paths.named_outputs == [tmp_path / "outputs" / "archive"]
    assert (
        paths.output_of("archive") in paths.partitioned_outputs and paths.output_of("archive") in paths.staged_folders
    )


@pytest.mark.parametrize(
    "instant_us, folder",
    [
        (H0 * HOUR_US, "date=2026-01-01/hour=00"),  # [00:00, 01:00) starts the hour
        ((H0 + 1) * HOUR_US - 1, "date=2026-01-01/hour=00"),  # 00:59:59.999999 still in it
        ((H0 + 23) * HOUR_US + 1, "date=2026-01-01/hour=23"),
        ((H0 + 24) * HOUR_US, "date=2026-01-02/hour=00"),  # the next day
    ],
)
def test_rows_are_filed_by_the_utc_day_and_hour_of_their_time(instant_us, folder):
    path = hour_dir(Path("/o"), hour_of(instant_us))
    assert path == Path("/o") / folder
    assert hour_of_dir(path.parent.name, path.name) == hour_of(instant_us)


@pytest.mark.parametrize(
    "name, batch_id",
    [
        ("batch-0", 0),
        ("batch-1234", 1234),
        ("batch-", None),  # no number
        ("batch--1", None),  # batch ids are never negative
        ("batch_id=3.json", None),  # a metrics file, not an output folder
        (".tmp-batch-3-0123abcd", None),  # staging: not visible yet
        ("compacted-0-9.parquet", None),  # merged batches: a file, not a batch folder
    ],
)
def test_a_batch_id_is_read_only_from_a_visible_batch_folder_name(name, batch_id):
    assert batch_of_folder(name) == batch_id


def test_batch_and_compacted_names_read_back():
    assert batch_of_folder(batch_folder_name(42)) == 42
    assert compacted_range(compacted_name(3, 17)) == (3, 17)
    assert compacted_range(".tmp-compacted-3-17") is None and compacted_range("batch-3") is None


def test_hour_folders_of_a_span_are_listed_in_time_order_and_other_days_are_not_opened(tmp_path, monkeypatch):
    for hour in (H0, H0 + 1, H0 + 30, H0 + 24 * 6):
        hour_dir(tmp_path, hour).mkdir(parents=True)
    (tmp_path / ".tmp-batch-9-ab").mkdir()  # staging beside the days
    (tmp_path / "date=2026-01-01" / "other").mkdir()
    assert [h for h, _ in hour_dirs(tmp_path)] == [H0, H0 + 1, H0 + 30, H0 + 24 * 6]
    assert [h for h, _ in hour_dirs(tmp_path, H0 + 1, H0 + 30)] == [H0 + 1, H0 + 30]
    listed: list[str] = []
    real_iterdir = Path.iterdir
    monkeypatch.setattr(Path, "iterdir", lambda self: listed.append(self.name) or real_iterdir(self))
    assert [h for h, _ in hour_dirs(tmp_path, H0, H0 + 1)] == [H0, H0 + 1]
    assert sorted(listed) == sorted([tmp_path.name, "date=2026-01-01"])  # days outside the span are skipped by name
    assert hour_dirs(tmp_path / "missing") == []


def test_staging_is_hidden_from_readers_and_fresh_each_time(tmp_path):
    first, second = staging_dir(tmp_path, "batch-3"), staging_dir(tmp_path, "batch-3")
    assert first != second
    assert first.name.startswith(".")  # Spark's and DuckDB's listings skip dot names
    assert is_staging(first.name) and is_staging("_tmp_batch_id=3_x")
    assert not is_staging("batch-3")
