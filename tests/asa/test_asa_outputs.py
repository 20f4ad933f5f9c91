"""A query of several ``SELECT … INTO``: one job when the outputs begin with one first step, each
output the rows of its step; one job per output when they fork at the input. Every spec is one the loader
accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tidegate.asa import spec_text, translated_jobs
from tidegate.asa.outputs import output_name
from tidegate.errors import ConfigError
from tidegate.jobspec import load_spec

SIDE = "inputs:\n  input:\n    payload: {deviceId: string, eventTime: string, temperature: double}\n"
CHAIN = """\
WITH Readings AS (
    SELECT deviceId, temperature FROM input TIMESTAMP BY eventTime WHERE temperature IS NOT NULL
)
SELECT * INTO Archive FROM Readings

SELECT deviceId, COUNT(*) AS hot
INTO HotAlerts
FROM Readings
WHERE temperature > 25
GROUP BY deviceId, TumblingWindow(hour, 1)
"""
BESIDE = """\
SELECT * INTO archive FROM input TIMESTAMP BY eventTime

SELECT deviceId, COUNT(*) AS readings
INTO alerts
FROM input TIMESTAMP BY eventTime
GROUP BY deviceId, TumblingWindow(minute, 1)
HAVING COUNT(*) >= 3
"""
FORK = """\
WITH readings AS (SELECT deviceId, temperature FROM input TIMESTAMP BY eventTime)
SELECT deviceId, AVG(temperature) AS avgT INTO perMinute FROM readings GROUP BY deviceId, TumblingWindow(minute, 1)
SELECT deviceId, MAX(temperature) AS maxT INTO perHour FROM readings GROUP BY deviceId, TumblingWindow(hour, 1)
"""


SPLIT = """\
SELECT deviceId, temperature INTO hot FROM input TIMESTAMP BY eventTime WHERE temperature > 30
SELECT deviceId, temperature INTO cold FROM input TIMESTAMP BY eventTime WHERE temperature < 10
"""


def jobs(tmp_path: Path, query: str, stem: str = "q"):
    (tmp_path / f"{stem}.asaql").write_text(query)
    (tmp_path / "side.yaml").write_text(SIDE)
    return translated_jobs(tmp_path / f"{stem}.asaql", tmp_path / "side.yaml")


def loaded(tmp_path: Path, job):
    path = tmp_path / f"{job.name}.yaml"
    path.write_text(job.text)
    return load_spec(path)


def test_outputs_on_one_chain_of_steps_are_one_job_each_output_the_rows_of_its_step(tmp_path):
    (job,) = jobs(tmp_path, CHAIN)
    assert job.outputs == {"Archive": "output", "HotAlerts": "hotalerts"}
    spec = loaded(tmp_path, job)
    assert [s.name for s in spec.steps] == ["hotalerts"]  # the later steps; Readings is the first
    assert spec.first_step == "Readings" and spec.steps[0].reads == "Readings"
    assert spec.sinks.output_step == "Readings"
    assert spec.sinks.outputs == (("hotalerts", "hotalerts"),)
    assert "# INTO HotAlerts" in job.text and "output Archive → the job's output" in job.text


def test_a_select_star_of_the_input_beside_a_window_of_it_is_one_job_the_window_reading_the_star(tmp_path):
    (job,) = jobs(tmp_path, BESIDE)
    raw = yaml.safe_load(job.text)
    assert [s["name"] for s in raw["steps"]] == ["archive", "alerts"]
    assert raw["steps"][1]["from"] == "archive" and raw["steps"][1]["having"] == "readings >= 3"
    assert raw["sinks"] == {
        "output": {"format": "parquet", "step": "archive"},
        "outputs": {"alerts": {"step": "alerts"}},
    }
    loaded(tmp_path, job)


def test_two_windows_over_one_step_are_one_job_both_steps_reading_it(tmp_path):
    (job,) = jobs(tmp_path, FORK, stem="temps")
    assert job.outputs == {"perMinute": "output", "perHour": "perhour"}
    raw = yaml.safe_load(job.text)
    assert [(s["name"], s.get("from")) for s in raw["steps"]] == [
        ("readings", None), ("perminute", "readings"), ("perhour", "readings"),
    ]  # fmt: skip
    spec = loaded(tmp_path, job)
    assert [(s.name, s.reads) for s in spec.steps] == [("perminute", "readings"), ("perhour", "readings")]


def test_outputs_that_fork_at_the_input_are_one_job_per_output_each_with_the_steps_it_reads(tmp_path):
    hot, cold = jobs(tmp_path, SPLIT, stem="temps")
    assert (hot.name, cold.name) == ("temps-hot", "temps-cold")
    assert hot.outputs == {"hot": "output"} and cold.outputs == {"cold": "output"}
    for job, condition in ((hot, "temperature > 30"), (cold, "temperature < 10")):
        raw = yaml.safe_load(job.text)
        assert raw["filter"] == condition and "steps" not in raw and "outputs" not in raw["sinks"]
        loaded(tmp_path, job)


def test_the_same_input_timed_two_ways_is_two_jobs(tmp_path):
    query = (
        "SELECT * INTO byEvent FROM input TIMESTAMP BY eventTime\n"
        "SELECT deviceId, COUNT(*) AS n INTO byArrival FROM input GROUP BY deviceId, TumblingWindow(minute, 1)\n"
    )
    assert [j.name for j in jobs(tmp_path, query)] == ["q-byevent", "q-byarrival"]


def test_spec_text_of_a_query_that_forks_names_the_jobs_and_how_to_write_them(tmp_path):
    (tmp_path / "temps.asaql").write_text(SPLIT)
    with pytest.raises(ConfigError) as err:
        spec_text(tmp_path / "temps.asaql", None)
    assert "temps-hot, temps-cold" in err.value.problem
    assert "--out jobs/NAME.yaml" in err.value.fix


@pytest.mark.parametrize(("into", "name"), [("HotAlerts", "hotalerts"), ("alerts-eu", "alerts_eu"), ("1st", "st")])
def test_an_output_is_named_as_a_folder_may_be(into, name):
    assert output_name(into) == name


@pytest.mark.parametrize(
    ("outputs", "problem"),
    [
        ("{archive: {}}", "the query writes INTO alerts, which its outputs do not list"),
        ("{archive: {}, alerts: {}, audit: {}}", "outputs lists audit, which no SELECT … INTO writes"),
    ],
)
def test_outputs_the_side_file_lists_are_the_ones_the_query_writes(tmp_path, outputs, problem):
    (tmp_path / "q.asaql").write_text(BESIDE)
    (tmp_path / "side.yaml").write_text(SIDE + f"outputs: {outputs}\n")
    with pytest.raises(ConfigError) as err:
        translated_jobs(tmp_path / "q.asaql", tmp_path / "side.yaml")
    assert err.value.problem == f"{tmp_path / 'side.yaml'}: {problem}"


def test_outputs_listed_in_another_case_are_the_querys(tmp_path):
    (tmp_path / "q.asaql").write_text(BESIDE)
    (tmp_path / "side.yaml").write_text(SIDE + "outputs: {Archive: {}, ALERTS: {}}\n")
    (job,) = translated_jobs(tmp_path / "q.asaql", tmp_path / "side.yaml")
    assert job.outputs == {"archive": "output", "alerts": "alerts"}
