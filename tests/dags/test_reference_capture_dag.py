"""``tidegate_reference_capture`` end to end with ``airflow dags test``: a configured database
table published as a snapshot, and nothing more while it is unchanged."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from airflow_support import dags_test, migrate
from support import inventory_database

pytestmark = pytest.mark.slow


def test_a_scheduled_run_publishes_the_table_and_a_run_on_the_unchanged_table_publishes_nothing(tmp_path):
    home = tmp_path / "airflow"
    migrate(home)
    env = inventory_database(
        tmp_path,
        "deviceId TEXT, site TEXT, max_temperature REAL",
        "('dev-0001', 'hall', 30.0), ('dev-0002', 'roof', 25.5)",
    )
    folder = tmp_path / "reference" / "devices"

    first = dags_test(home, "tidegate_reference_capture", {}, env, tmp_path, timeout_s=600)
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    snapshots = sorted(p.name for p in folder.iterdir())
    assert len(snapshots) == 1 and snapshots[0].startswith("valid_from="), snapshots
    assert pq.read_table(folder / snapshots[0] / "table.parquet").to_pylist() == [
        {"deviceId": "dev-0001", "site": "hall", "max_temperature": 30.0},
        {"deviceId": "dev-0002", "site": "roof", "max_temperature": 25.5},
    ]

    second = dags_test(home, "tidegate_reference_capture", {}, env, tmp_path, timeout_s=600)
    assert second.returncode == 0, (second.stdout + second.stderr)[-4000:]
    assert sorted(p.name for p in folder.iterdir()) == snapshots  # unchanged: nothing published
    assert "unchanged since the newest snapshot" in second.stdout + second.stderr
