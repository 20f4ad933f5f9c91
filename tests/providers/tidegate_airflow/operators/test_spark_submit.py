"""The completeness check's own decisions, without Spark: what it records when its work cannot
run, and a check the warm service ran."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowException

from tidegate.control.db import ControlDB


class FakeTI:
    def __init__(self) -> None:
        self.pushed: dict = {}

    def xcom_push(self, key: str, value) -> None:
        self.pushed[key] = value


def test_a_completeness_check_that_could_not_run_is_recorded_as_a_failed_check(tmp_path, monkeypatch):
    from tidegate_airflow.operators import spark_submit as operators

    url = f"sqlite:///{tmp_path / 'control.db'}"
    monkeypatch.setenv("TIDEGATE_HOME", str(tmp_path))
    monkeypatch.setenv("TIDEGATE_CONTROL_DB", url)
    monkeypatch.setenv("TIDEGATE_CHECK_SERVICE", "off")

    def spark_submit_dies(self, context):
        raise RuntimeError("spark-submit exited 1: java.io.FileNotFoundException: output/batch_id=245")

    monkeypatch.setattr(operators.TidegateSparkSubmitOperator, "execute", spark_submit_dies)
    check = operators.TidegateCompletenessOperator(
        task_id="check_completeness", job="fleet", target=["east", "consumer"], result_dir=str(tmp_path)
    )
    ti = FakeTI()
    with pytest.raises(AirflowException, match="could not run: spark-submit exited 1"):
        check.execute({"run_id": "manual__2026-11-23", "ti": ti})
    rows = ControlDB(url).checks("fleet")
    assert sorted(row.target for row in rows) == ["consumer", "east"] and not any(row.success for row in rows)
    assert all("could not run" in row.summary and "FileNotFoundException" in row.summary for row in rows)
    # the procedure's record sees a failed check per target, not none
    assert [(o["target"], o["success"]) for o in ti.pushed["outcomes"]] == [("east", False), ("consumer", False)]


def test_a_check_the_warm_service_ran_is_not_submitted_again_and_says_how_long_it_took(tmp_path, monkeypatch):
    import json

    from tidegate.runtime.checks import check_service
    from tidegate_airflow.operators import spark_submit as operators

    monkeypatch.setenv("TIDEGATE_HOME", str(tmp_path))
    monkeypatch.setenv("TIDEGATE_CONTROL_DB", f"sqlite:///{tmp_path / 'control.db'}")
    monkeypatch.setenv("TIDEGATE_CHECK_SERVICE", "5m")
    asked = []

    def served(home, argv, **kwargs):  # the service's answer: the outcomes file the command writes
        asked.append((home, argv))
        result = Path(argv[argv.index("--result") + 1])
        result.parent.mkdir(parents=True)
        with open(result, "w") as out:
            json.dump([{"target": "east", "success": True, "summary": "complete", "message": ""}], out)
        return check_service.Served(0, "complete\n", 3.0)

    monkeypatch.setattr(
        check_service, "start", lambda home, idle_s, env=None: (asked.append(("start", idle_s)), None)[1]
    )
    monkeypatch.setattr(check_service, "run", served)
    monkeypatch.setattr(
        operators.TidegateSparkSubmitOperator,
        "execute",
        lambda self, context: pytest.fail("a check the service ran must not be submitted"),
    )
    ti = FakeTI()
    outcomes = operators.TidegateCompletenessOperator(
        task_id="check", job="fleet", target="east", result_dir=str(tmp_path)
    ).execute({"run_id": "r1", "ti": ti})
    assert (
        asked[0] == ("start", 300.0)
        and asked[1][0] == tmp_path
        and asked[1][1][:4] == ["check", "fleet", "--target", "east"]
    )
    assert outcomes == ti.pushed["outcomes"] and outcomes[0]["warm"] is True and outcomes[0]["task_s"] >= 0


@pytest.mark.parametrize(
    ("try_number", "folder"), [(1, "manual__2026-11-23T10_00_00_00_00"), (2, "manual__2026-11-23T10_00_00_00_00.try2")]
)
def test_a_retried_batch_reference_writes_beside_its_first_attempts_half_written_run(
    tmp_path, monkeypatch, try_number, folder
):
    """A batch reference refuses a directory that already holds a run: the retry's is its own."""
    from types import SimpleNamespace

    from tidegate_airflow.operators import spark_submit as operators

    monkeypatch.setenv("TIDEGATE_HOME", str(tmp_path))
    monkeypatch.setenv("TIDEGATE_CONTROL_DB", f"sqlite:///{tmp_path / 'control.db'}")
    reference = operators.TidegateBatchReferenceOperator(
        task_id="batch_reference", job="fleet", region="east", from_time="2026-01-01T00:10:00Z"
    )
    found = reference._beside_stream(
        {"run_id": "manual__2026-11-23T10:00:00+00:00", "ti": SimpleNamespace(try_number=try_number)}
    )
    assert found.parent.name == "batch_reference" and found.name == folder
