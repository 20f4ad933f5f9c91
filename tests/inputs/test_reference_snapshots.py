"""Reference snapshots on disk: where a spec's folder may be, which folders are snapshots, and
what a snapshot's files must hold."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import parse_time_us
from tidegate.inputs.reference import confined_reference_folder, list_snapshots, read_snapshot, reference_dirs
from tidegate.jobspec.reference import ReferenceSpec

DEVICES = ReferenceSpec("devices", "ref", "csv", {"deviceId": "string", "site": "string"}, (("deviceId", "deviceId"),))


def test_the_reference_folders_default_to_jobs_and_var_reference_and_follow_the_setting(tmp_path):
    assert reference_dirs({}, tmp_path) == (tmp_path / "jobs", tmp_path / "var" / "reference")
    assert reference_dirs({"TIDEGATE_HOME": "/srv/tg"}, tmp_path)[1].as_posix() == "/srv/tg/reference"
    assert reference_dirs({"TIDEGATE_REFERENCE_DIRS": "/data/ref:shared"}, tmp_path) == (
        Path("/data/ref"), tmp_path / "shared")


def test_a_folder_outside_the_reference_folders_is_refused_even_through_a_symlink(tmp_path):
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    (allowed / "devices").mkdir(parents=True)
    outside.mkdir()
    (allowed / "escape").symlink_to(outside)
    assert confined_reference_folder("allowed/devices", [allowed], tmp_path) == (allowed / "devices").resolve()
    with pytest.raises(ConfigError, match="outside the reference folders — put the snapshots under"):
        confined_reference_folder(str(outside), [allowed], tmp_path)
    with pytest.raises(ConfigError, match=r"outside the reference folders \(through a symlink\)"):
        confined_reference_folder("allowed/escape", [allowed], tmp_path)
    with pytest.raises(ConfigError, match="no such folder"):
        confined_reference_folder("allowed/nothing", [allowed], tmp_path)


def test_snapshots_are_the_valid_from_folders_oldest_first_and_work_in_progress_is_skipped(tmp_path):
    for name in ("valid_from=2026-03-01T12:30:00Z", "valid_from=2026-03-01T12:00:00Z", ".valid_from=2026-03-01T13:00:00Z",
                 "_tmp", "notes"):  # fmt: skip
        (tmp_path / name).mkdir()
    (tmp_path / "valid_from=2026-03-01T12:00:00Z" / "a.csv").write_text("deviceId,site\nd1,hall\n")
    (tmp_path / "valid_from=2026-03-01T12:00:00Z" / "readme.txt").write_text("not a table")
    snapshots = list_snapshots(tmp_path, "csv")
    assert [s.valid_from_us for s in snapshots] == [parse_time_us("2026-03-01T12:00:00Z"),
                                                   parse_time_us("2026-03-01T12:30:00Z")]
    assert [f[:2] for f in snapshots[0].files] == [("a.csv", 22)] and snapshots[1].files == ()
    assert read_snapshot(snapshots[0], DEVICES).to_pylist() == [{"deviceId": "d1", "site": "hall"}]
    assert read_snapshot(snapshots[1], DEVICES).num_rows == 0  # published empty: the table is empty from then


def test_a_snapshot_without_a_column_the_spec_reads_is_an_error_naming_the_file(tmp_path):
    folder = tmp_path / "valid_from=2026-03-01T12:00:00Z"
    folder.mkdir()
    (folder / "a.csv").write_text("deviceId,place\nd1,hall\n")
    with pytest.raises(ConfigError, match=r"reference devices: cannot read .*a\.csv.*columns deviceId, site"):
        read_snapshot(list_snapshots(tmp_path, "csv")[0], DEVICES)
    (folder / "a.csv").unlink()
    pq.write_table(pa.table({"deviceId": ["d1"]}), folder / "a.parquet")
    parquet = ReferenceSpec("devices", "ref", "parquet", DEVICES.columns, DEVICES.keys)
    with pytest.raises(ConfigError, match=r"cannot read .*a\.parquet"):
        read_snapshot(list_snapshots(tmp_path, "parquet")[0], parquet)
