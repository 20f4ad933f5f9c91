"""Operators' own decisions, without Spark: what they record when their work cannot run."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowException

from tidegate.control.db import ControlDB


class FakeTI:
    def __init__(self) -> None:
        self.pushed: dict = {}

    def xcom_push(self, key: str, value) -> None:
        self.pushed[key] = value


def test_a_completeness_check_that_could_not_run_is_recorded_as_a_failed_check(tmp_path, monkeypatch):
    from tidegate_airflow import operators

    url = f"sqlite:///{tmp_path / 'control.db'}"
    monkeypatch.setenv("TIDEGATE_HOME", str(tmp_path))
    monkeypatch.setenv("TIDEGATE_CONTROL_DB", url)

    def spark_submit_dies(self, context):
        raise RuntimeError("spark-submit exited 1: java.io.FileNotFoundException: output/batch_id=245")

    monkeypatch.setattr(operators.TidegateSparkSubmitOperator, "execute", spark_submit_dies)
    check = operators.TidegateCompletenessOperator(task_id="check_consumer_view", job="fleet", target="consumer",
                                                   result_dir=str(tmp_path))
    ti = FakeTI()
    with pytest.raises(AirflowException, match="could not run: spark-submit exited 1"):
        check.execute({"run_id": "manual__2026-11-23", "ti": ti})
    rows = ControlDB(url).checks("fleet")
    assert len(rows) == 1 and not rows[0].success and rows[0].target == "consumer"
    assert "could not run" in rows[0].summary and "FileNotFoundException" in rows[0].summary
    assert ti.pushed["outcome"]["success"] is False  # the procedure's record sees a failed check, not none
