"""The reference capture procedure: what a scheduled run captures, and a run by hand's untrusted
connection, table and folder refused with what to do."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException

from support import inventory_database
from tidegate.errors import ConfigError
from tidegate.eventtime.durations import parse_time_us

NOON = parse_time_us("2026-03-01T12:00:00Z")


@pytest.fixture
def platform(tmp_path, monkeypatch):
    env = inventory_database(tmp_path, "deviceId TEXT, site TEXT", "('d1', 'hall')")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(tmp_path)
    return env


def test_a_run_without_params_captures_every_configured_table_and_one_by_hand_its_own(platform, tmp_path):
    from tidegate_airflow.hooks.tidegate import TidegateHook
    from tidegate_airflow.procedures.reference_capture import capture

    hook = TidegateHook(tidegate_conn_id=None)
    assert capture(hook, now_us=lambda: NOON) == [
        {
            "connection": "inventory",
            "table": "devices",
            "to": str(tmp_path / "reference" / "devices"),
            "published": "valid_from=2026-03-01T12:00:00Z",
            "rows": 1,
        }
    ]
    assert capture(hook, now_us=lambda: NOON + 60_000_000)[0]["published"] is None  # unchanged
    by_hand = capture(hook, "inventory", "devices", "reference/other", now_us=lambda: NOON)
    assert by_hand[0]["published"] == "valid_from=2026-03-01T12:00:00Z"
    assert (tmp_path / "reference" / "other" / by_hand[0]["published"] / "table.parquet").is_file()


@pytest.mark.parametrize("connection, table, folder, refusal", [
    ("inventory", "devices", "/etc/tidegate", "outside the reference folders"),
    ("inventory", "devices", "reference/../escape", "outside the reference folders"),
    ("elsewhere", "devices", "reference/devices", r"'elsewhere' is not configured \(configured: inventory\)"),
    ("inventory", "devices; DROP TABLE devices", "reference/devices", "not a plain table name"),
    ("inventory", "", "reference/devices", "give connection, table and folder together"),
])  # fmt: skip
def test_a_run_by_hand_names_a_configured_connection_a_plain_table_and_a_folder_for_snapshots(
        platform, tmp_path, connection, table, folder, refusal):  # fmt: skip
    from tidegate_airflow.hooks.tidegate import TidegateHook
    from tidegate_airflow.procedures.reference_capture import capture, captures_to_run

    with pytest.raises(ConfigError, match=refusal):
        captures_to_run(platform, connection, table, folder, tmp_path)
    with pytest.raises(AirflowFailException, match=refusal):
        capture(TidegateHook(tidegate_conn_id=None), connection, table, folder)
    assert not (tmp_path / "reference").exists() or not any((tmp_path / "reference").iterdir())
