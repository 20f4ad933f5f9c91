"""The layout of a lineage on disk (tidegate.lineage.layout): names the engine writes and the runtime reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidegate.lineage.layout import JobPaths, batch_dirs, batch_id_of, batch_name, is_staging, staging_dir


def test_every_file_of_a_lineage_sits_under_its_root():
    paths = JobPaths(Path("/r"))
    assert paths.checkpoint == Path("/r/checkpoint")
    assert (paths.offsets, paths.commits) == (Path("/r/checkpoint/offsets"), Path("/r/checkpoint/commits"))
    assert paths.state == Path("/r/checkpoint/tidegate/state")
    assert paths.state_version(7) == Path("/r/checkpoint/tidegate/state/7")
    assert paths.output == Path("/r/output")
    assert paths.metrics_file(12) == Path("/r/metrics/batch_id=12.json")
    assert paths.corrupt_frames == Path("/r/corrupt_frames")
    assert (paths.fence, paths.lineage_file) == (Path("/r/.fence"), Path("/r/lineage.json"))


@pytest.mark.parametrize(
    "name, batch_id",
    [
        ("batch_id=0", 0),
        ("batch_id=1234", 1234),
        ("batch_id=", None),  # no number
        ("batch_id=-1", None),  # batch ids are never negative
        ("batch_id=3.json", None),  # a metrics file, not an output folder
        (".tmp-batch_id=3-0123abcd", None),  # staging: not visible yet
        ("_tmp_batch_id=7_0123abcd", None),  # staging of earlier versions
        ("part-00000.parquet", None),
    ],
)
def test_a_batch_id_is_read_only_from_a_visible_batch_folder_name(name, batch_id):
    assert batch_id_of(name) == batch_id


def test_a_batch_folder_name_reads_back_as_its_batch_id():
    assert batch_id_of(batch_name(42)) == 42


def test_batch_folders_are_listed_in_batch_order_without_staging(tmp_path):
    for name in ("batch_id=10", "batch_id=2", ".tmp-batch_id=11-ab", "_tmp_batch_id=12_cd", "other"):
        (tmp_path / name).mkdir()
    assert [batch_id for batch_id, _ in batch_dirs(tmp_path)] == [2, 10]
    assert batch_dirs(tmp_path / "missing") == []


def test_staging_is_hidden_from_readers_and_fresh_each_time(tmp_path):
    first, second = staging_dir(tmp_path, "batch_id=3"), staging_dir(tmp_path, "batch_id=3")
    assert first != second
    assert first.name.startswith(".")  # Spark's and DuckDB's listings skip dot names
    assert is_staging(first.name) and is_staging("_tmp_batch_id=3_x")
    assert not is_staging("batch_id=3")
