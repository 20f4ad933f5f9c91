"""Reference snapshots on disk: where a spec's folder may be, which folders are snapshots, what
a snapshot's files must hold, and that what is read stays inside the reference folders even when
the folder changes after it was checked."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import parse_time_us
from tidegate.inputs.reference import list_snapshots, read_snapshot
from tidegate.jobspec.folders import confined_reference_folder, reference_dirs
from tidegate.jobspec.reference import ReferenceSpec

DEVICES = ReferenceSpec("devices", "ref", "csv", {"deviceId": "string", "site": "string"}, (("deviceId", "deviceId"),))


def test_the_reference_folders_default_to_jobs_and_var_reference_and_follow_the_setting(tmp_path):
    assert reference_dirs({}, tmp_path) == (tmp_path / "jobs", tmp_path / "var" / "reference")
    assert reference_dirs({"TIDEGATE_HOME": "/srv/tg"}, tmp_path)[1].as_posix() == "/srv/tg/reference"
    assert reference_dirs({"TIDEGATE_REFERENCE_DIRS": "/data/ref:shared"}, tmp_path) == (
        Path("/data/ref"),
        tmp_path / "shared",
    )


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
    for name in ("valid_from=2026-03-01T12:30:00Z", "valid_from=2026-03-01T12:00:00Z",
                 ".valid_from=2026-03-01T13:00:00Z", "_tmp", "notes"):  # fmt: skip
        (tmp_path / name).mkdir()
    (tmp_path / "valid_from=2026-03-01T12:00:00Z" / "a.csv").write_text("deviceId,site\nd1,hall\n")
    (tmp_path / "valid_from=2026-03-01T12:00:00Z" / "readme.txt").write_text("not a table")
    snapshots = list_snapshots(tmp_path, "csv", roots=[tmp_path])
    assert [s.valid_from_us for s in snapshots] == [
        parse_time_us("2026-03-01T12:00:00Z"),
        parse_time_us("2026-03-01T12:30:00Z"),
    ]
    assert [f[:2] for f in snapshots[0].files] == [("a.csv", 22)] and snapshots[1].files == ()
    assert read_snapshot(snapshots[0], DEVICES, roots=[tmp_path]).to_pylist() == [{"deviceId": "d1", "site": "hall"}]
    assert read_snapshot(snapshots[1], DEVICES, roots=[tmp_path]).num_rows == 0  # published empty: empty from then


def test_a_snapshot_without_a_column_the_spec_reads_is_an_error_naming_the_file(tmp_path):
    folder = tmp_path / "valid_from=2026-03-01T12:00:00Z"
    folder.mkdir()
    (folder / "a.csv").write_text("deviceId,place\nd1,hall\n")
    with pytest.raises(ConfigError, match=r"reference devices: cannot read .*a\.csv.*columns deviceId, site"):
        read_snapshot(list_snapshots(tmp_path, "csv", roots=[tmp_path])[0], DEVICES, roots=[tmp_path])
    (folder / "a.csv").unlink()
    pq.write_table(pa.table({"deviceId": ["d1"]}), folder / "a.parquet")
    parquet = ReferenceSpec("devices", "ref", "parquet", DEVICES.columns, DEVICES.keys)
    with pytest.raises(ConfigError, match=r"cannot read .*a\.parquet"):
        read_snapshot(list_snapshots(tmp_path, "parquet", roots=[tmp_path])[0], parquet, roots=[tmp_path])


# -- what is read stays inside the reference folders -------------------------------------------
# roots/devices is the reference folder; outside/ holds a CSV that must never come back as rows.
SNAPSHOT = "valid_from=2026-03-01T12:00:00Z"
SECRET_ROW = "deviceId,site\nhunter2,vault\n"


@pytest.fixture
def places(tmp_path):
    roots, outside = tmp_path / "roots", tmp_path / "outside"
    (roots / "devices" / SNAPSHOT).mkdir(parents=True)
    (roots / "devices" / SNAPSHOT / "a.csv").write_text("deviceId,site\nd1,hall\n")
    (outside / SNAPSHOT).mkdir(parents=True)
    (outside / SNAPSHOT / "a.csv").write_text(SECRET_ROW)
    return roots, outside


def refused(call) -> str:
    with pytest.raises(ConfigError) as info:
        call()
    message = str(info.value)
    assert "hunter2" not in message and len(message.encode()) < 2048, message
    return message


def test_a_symlinked_csv_leading_outside_is_refused_when_listed_and_when_read_after_listing(places):
    roots, outside = places
    folder = roots / "devices"
    snapshots = list_snapshots(folder, "csv", roots=[roots])  # as the driver lists them, before the change
    (folder / SNAPSHOT / "a.csv").unlink()
    (folder / SNAPSHOT / "a.csv").symlink_to(outside / SNAPSHOT / "a.csv")  # swapped in after the listing
    message = refused(lambda: read_snapshot(snapshots[0], DEVICES, roots=[roots]))
    assert f"reference.path: '{SNAPSHOT}/a.csv' is a symlink that leads outside the reference folders" in message
    assert "TIDEGATE_REFERENCE_DIRS" in message and str(outside) not in message
    refused(lambda: list_snapshots(folder, "csv", roots=[roots]))  # and the next listing refuses it too


def test_a_symlinked_snapshot_folder_leading_outside_is_refused_when_listed_and_when_read_after_listing(places):
    roots, outside = places
    folder = roots / "devices"
    snapshots = list_snapshots(folder, "csv", roots=[roots])
    os.rename(folder / SNAPSHOT, folder / f".{SNAPSHOT}")
    (folder / SNAPSHOT).symlink_to(outside / SNAPSHOT, target_is_directory=True)  # same file names, outside
    message = refused(lambda: read_snapshot(snapshots[0], DEVICES, roots=[roots]))
    assert f"'{SNAPSHOT}/a.csv' is a symlink that leads outside the reference folders" in message
    assert f"'{SNAPSHOT}' is a symlink that leads outside" in refused(
        lambda: list_snapshots(folder, "csv", roots=[roots])
    )


def test_a_symlink_that_stays_inside_the_reference_folders_is_followed(places):
    roots, _ = places
    (roots / "shared").mkdir()
    (roots / "shared" / "b.csv").write_text("deviceId,site\nd2,roof\n")
    (roots / "devices" / SNAPSHOT / "b.csv").symlink_to(roots / "shared" / "b.csv")
    snapshots = list_snapshots(roots / "devices", "csv", roots=[roots])
    assert read_snapshot(snapshots[0], DEVICES, roots=[roots]).to_pylist() == [
        {"deviceId": "d1", "site": "hall"},
        {"deviceId": "d2", "site": "roof"},
    ]


def test_a_file_replaced_after_it_was_checked_is_refused_not_read(places, monkeypatch):
    """The file is checked, then opened, then checked again: one put in its place in between (here,
    as it is opened) is caught by comparing the file opened with the one its path leads to."""
    from tidegate.inputs import reference

    roots, outside = places
    folder = roots / "devices"
    snapshots = list_snapshots(folder, "csv", roots=[roots])
    opened = os.open

    def open_then_swap(path, flags, *args):
        fd = opened(path, flags, *args)
        os.replace(outside / SNAPSHOT / "a.csv", folder / SNAPSHOT / "a.csv")  # another file, inside, same name
        return fd

    monkeypatch.setattr(reference.os, "open", open_then_swap)
    assert "changed while it was opened" in refused(lambda: read_snapshot(snapshots[0], DEVICES, roots=[roots]))
