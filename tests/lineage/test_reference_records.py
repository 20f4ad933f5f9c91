"""The lineage's record of the reference snapshots a job joined: written once, checked after."""

from __future__ import annotations

import pytest

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import parse_time_us
from tidegate.lineage.layout import JobPaths
from tidegate.lineage.reference_records import keep_records, record_snapshots, recorded_snapshots

NOON = parse_time_us("2026-03-01T12:00:00Z")
FILES = [["devices.csv", 21, "ab" * 32]]


def test_a_snapshot_is_recorded_once_and_the_same_files_pass_every_later_check(tmp_path):
    paths = JobPaths(tmp_path)
    assert record_snapshots(paths, "devices", [(NOON, FILES)]) == {NOON: NOON}
    assert record_snapshots(paths, "devices", [(NOON, FILES), (NOON + 1_800_000_000, [])]) == {
        NOON: NOON,
        NOON + 1_800_000_000: NOON + 1_800_000_000,
    }
    assert recorded_snapshots(paths, "devices") == [
        {
            "reference": "devices",
            "valid_from": "2026-03-01T12:00:00Z",
            "effective_from": "2026-03-01T12:00:00Z",
            "late": False,
            "files": FILES,
        },
        {
            "reference": "devices",
            "valid_from": "2026-03-01T12:30:00Z",
            "effective_from": "2026-03-01T12:30:00Z",
            "late": False,
            "files": [],
        },
    ]
    assert (tmp_path / "reference" / "devices" / "valid_from=2026-03-01T12:00:00Z.json").is_file()


def test_a_snapshot_whose_files_changed_is_refused_with_what_changed_and_what_to_do(tmp_path):
    paths = JobPaths(tmp_path)
    record_snapshots(paths, "devices", [(NOON, FILES)])
    with pytest.raises(
        ConfigError,
        match=r"snapshot valid_from=2026-03-01T12:00:00Z changed after the job joined "
        r"it \(recorded files devices.csv \(21 bytes\), now devices.csv \(22 bytes\)\)"
        r".*publish the change as a new valid_from=<later time> folder",
    ):
        record_snapshots(paths, "devices", [(NOON, [["devices.csv", 22, "cd" * 32]])])


def test_a_snapshot_first_read_after_events_of_its_time_starts_after_them_and_the_record_is_kept(tmp_path):
    """Events up to 12:05 were processed (the watermark, held back by another partition, at
    12:01) when the 12:00 snapshot was first read: it joins from 12:05 and a microsecond on,
    and every later read — whatever the job's progress then — takes that from the record."""
    paths = JobPaths(tmp_path)
    half_past, minute = NOON + 1_800_000_000, 60_000_000
    effective = record_snapshots(
        paths,
        "devices",
        [(NOON, FILES), (half_past, [])],
        watermark_us=NOON + minute,
        processed_through_us=NOON + 5 * minute,
    )
    assert effective == {NOON: NOON + 5 * minute + 1, half_past: half_past}
    early, on_time = recorded_snapshots(paths, "devices")
    assert early["late"] is True and early["effective_from"] == "2026-03-01T12:05:00.000001Z"
    assert early["first_read_at_watermark"] == "2026-03-01T12:01:00Z"
    assert early["first_read_after"] == "2026-03-01T12:05:00Z"
    assert on_time["late"] is False and on_time["effective_from"] == on_time["valid_from"]
    # a restarted driver, much later: the record decides, not its own progress
    assert record_snapshots(
        paths, "devices", [(NOON, FILES)], watermark_us=half_past, processed_through_us=half_past
    ) == {NOON: NOON + 5 * minute + 1}
    # a new lineage that keeps the records joins from the same starts; its own come on top
    replay = JobPaths(tmp_path / "replay")
    assert keep_records(paths, replay, "devices") == 2
    assert record_snapshots(replay, "devices", [(NOON, FILES)]) == {NOON: NOON + 5 * minute + 1}
    assert keep_records(paths, replay, "devices") == 0  # a record there is never replaced
