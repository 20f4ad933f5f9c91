"""A database table captured as reference snapshots: one per change, moving forward in time,
read back by a job like any Parquet snapshot; connections are the operator's."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import parse_time_us
from tidegate.inputs.reference import list_snapshots, read_snapshot
from tidegate.inputs.reference_capture import connection_url, publish_snapshot, read_table, reference_connections
from tidegate.jobspec.reference import ReferenceSpec

NOON = parse_time_us("2026-03-01T12:00:00Z")
DEVICES = ReferenceSpec(
    "devices", "ref", "parquet", {"deviceId": "string", "site": "string"}, (("deviceId", "deviceId"),)
)


def database(tmp_path, rows) -> str:
    url = f"sqlite:///{tmp_path / 'inventory.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS devices (deviceId TEXT, site TEXT, max_temperature REAL)"))
        conn.execute(sa.text("DELETE FROM devices"))
        for row in rows:
            conn.execute(sa.text("INSERT INTO devices VALUES (:d, :s, :t)"), {"d": row[0], "s": row[1], "t": row[2]})
    engine.dispose()
    return url


def test_each_change_of_the_table_is_a_snapshot_from_its_capture_time_and_no_change_publishes_nothing(tmp_path):
    url, folder = database(tmp_path, [("d1", "hall", 30.0)]), tmp_path / "devices"
    first = publish_snapshot(read_table(url, "devices"), folder, NOON + 123)  # whole seconds
    assert first.name == "valid_from=2026-03-01T12:00:00Z"
    assert publish_snapshot(read_table(url, "devices"), folder, NOON + 60_000_000) is None  # unchanged
    database(tmp_path, [("d1", "roof", 30.0), ("d2", "yard", 25.0)])
    second = publish_snapshot(read_table(url, "devices"), folder, NOON + 120_000_000)
    assert second.name == "valid_from=2026-03-01T12:02:00Z"
    snapshots = list_snapshots(folder, "parquet", roots=[tmp_path])  # what a job with format: parquet reads
    assert [s.valid_from_us for s in snapshots] == [NOON, NOON + 120_000_000]
    assert read_snapshot(snapshots[1], DEVICES, roots=[tmp_path]).to_pylist() == [
        {"deviceId": "d1", "site": "roof"},
        {"deviceId": "d2", "site": "yard"},
    ]
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # nothing left half written


def test_a_changed_table_captured_not_later_than_the_newest_snapshot_and_odd_table_names_are_refused(tmp_path):
    url, folder = database(tmp_path, [("d1", "hall", 30.0)]), tmp_path / "devices"
    publish_snapshot(read_table(url, "devices"), folder, NOON)
    assert publish_snapshot(read_table(url, "devices"), folder, NOON) is None  # unchanged: nothing, however soon
    database(tmp_path, [("d1", "roof", 30.0)])
    with pytest.raises(ConfigError, match="not older than the capture time.*snapshots only move forward"):
        publish_snapshot(read_table(url, "devices"), folder, NOON)
    with pytest.raises(ConfigError, match="not a plain table name"):
        read_table(url, "devices; DROP TABLE devices")
    with pytest.raises(ConfigError, match="table missing does not exist"):
        read_table(url, "missing")


def test_a_connection_names_where_its_url_is_read_never_the_url_itself(tmp_path):
    connections = reference_connections(
        {
            "reference_connections": {
                "inventory": {"url_env": "INVENTORY_URL"},
                "files": {"url_file": str(tmp_path / "url")},
            }
        }
    )
    assert connection_url("inventory", connections, {"INVENTORY_URL": "sqlite://"}) == "sqlite://"
    (tmp_path / "url").write_text("sqlite:///x.db\n")
    assert connection_url("files", connections, {}) == "sqlite:///x.db"
    with pytest.raises(ConfigError, match="INVENTORY_URL is not set"):
        connection_url("inventory", connections, {})
    with pytest.raises(ConfigError, match=r"'other' is not configured \(configured: files, inventory\)"):
        connection_url("other", connections, {})
    with pytest.raises(ConfigError, match="give exactly one of url_env or url_file"):
        reference_connections({"reference_connections": {"inventory": {"url": "postgresql://u:secret@db/inv"}}})
