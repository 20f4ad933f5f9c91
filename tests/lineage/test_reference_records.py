"""The lineage's record of the reference snapshots a job joined: written once, checked after."""

from __future__ import annotations

import pytest

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import parse_time_us
from tidegate.lineage.layout import JobPaths
from tidegate.lineage.reference_records import record_snapshots, recorded_snapshots

NOON = parse_time_us("2026-03-01T12:00:00Z")
FILES = [["devices.csv", 21, "ab" * 32]]


def test_a_snapshot_is_recorded_once_and_the_same_files_pass_every_later_check(tmp_path):
    paths = JobPaths(tmp_path)
    assert record_snapshots(paths, "devices", [(NOON, FILES)]) == 1
    assert record_snapshots(paths, "devices", [(NOON, FILES), (NOON + 1_800_000_000, [])]) == 1
    assert recorded_snapshots(paths, "devices") == [
        {"reference": "devices", "valid_from": "2026-03-01T12:00:00Z", "files": FILES},
        {"reference": "devices", "valid_from": "2026-03-01T12:30:00Z", "files": []},
    ]
    assert (tmp_path / "reference" / "devices" / "valid_from=2026-03-01T12:00:00Z.json").is_file()


def test_a_snapshot_whose_files_changed_is_refused_with_what_changed_and_what_to_do(tmp_path):
    paths = JobPaths(tmp_path)
    record_snapshots(paths, "devices", [(NOON, FILES)])
    with pytest.raises(ConfigError, match=r"snapshot valid_from=2026-03-01T12:00:00Z changed after the job joined "
                                          r"it \(recorded files devices.csv \(21 bytes\), now devices.csv \(22 bytes\)\)"
                                          r".*publish the change as a new valid_from=<later time> folder"):
        record_snapshots(paths, "devices", [(NOON, [["devices.csv", 22, "cd" * 32]])])


def test_a_snapshot_first_read_after_the_watermark_passed_its_time_is_recorded_as_late(tmp_path):
    """Events of its time were processed before it was there: the record says so, for the
    operator to see why a replay may join them differently."""
    paths = JobPaths(tmp_path)
    half_past = NOON + 1_800_000_000
    record_snapshots(paths, "devices", [(NOON, FILES), (half_past, [])], watermark_us=NOON + 60_000_000)
    early, late = recorded_snapshots(paths, "devices")
    assert early["late"] is True and early["first_read_at_watermark"] == "2026-03-01T12:01:00Z"
    assert late["late"] is False
    record_snapshots(paths, "devices", [(NOON, FILES)], watermark_us=half_past)  # a record is written once
    assert recorded_snapshots(paths, "devices")[0]["first_read_at_watermark"] == "2026-03-01T12:01:00Z"
