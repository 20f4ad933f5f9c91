"""A reference join in a later step: a per-event step over any step's rows (or the input) joins
its own tables; what it reads, what its rows carry, the fingerprint and the normalised form;
what is refused (beside a window or analytic functions in one step, a name used twice in the
job, a column the table does not have), each with the two-step form that gives the same rows;
and every table's folder and key expressions checked as the first step's are."""

from __future__ import annotations

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec import parse_spec
from tidegate.jobspec.folders import check_places
from tidegate.jobspec.model import step_columns
from tidegate.jobspec.spec_expressions import spec_expressions
from tidegate.validation.comparison import Layout

LIMITS = {"name": "limits", "path": "refs/limits", "columns": {"deviceId": "string", "max_temperature": "double"},
          "keys": ["deviceId = limits.deviceId"]}  # fmt: skip
SITES = {"name": "sites", "path": "refs/sites", "type": "left", "columns": {"deviceId": "string", "site": "string"},
         "keys": ["deviceId = sites.deviceId"]}  # fmt: skip
MINUTES = {"name": "minutes", "window": {"kind": "tumbling", "size": "10m"}, "group_by": ["deviceId"],
           "aggregates": {"top": "max(temperature)"}}  # fmt: skip
OVER = {"name": "over", "from": "minutes", "reference": LIMITS, "filter": "top > limits.max_temperature",
        "select": {"deviceId": "deviceId", "top": "top", "limit": "limits.max_temperature"}}  # fmt: skip
BASE = {
    "name": "over-limit-minutes",
    "version": 1,
    "payload": {"deviceId": "string", "eventTime": "string", "temperature": "double"},
    "timestamp_by": "eventTime",
}


def spec(*steps, **more):
    return parse_spec(BASE | {"steps": list(steps or (MINUTES, OVER))} | more)


def test_a_step_over_window_rows_joins_its_table_and_its_rows_name_the_snapshot_by_the_table():
    job = spec()
    (over,) = job.steps
    assert over.references[0].name == "limits" and over.per_event and not job.references
    assert job.reference_tables == over.references
    assert step_columns(job, "over") == ("deviceId", "top", "limit", "reference_snapshot_limits",
                                         "partition", "offset", "system_time")  # fmt: skip
    assert "join reference limits" in job.describe()
    assert parse_spec(job.to_dict()) == job and job.to_dict()["steps"][1]["reference"]["name"] == "limits"
    # the completeness check compares the snapshot joined, as a column of the row
    assert Layout.of(job, positioned=False).keys[-1] == "reference_snapshot_limits"


def test_without_a_select_the_row_carries_every_column_read_then_the_tables_row_and_snapshot():
    job = spec(MINUTES, {k: v for k, v in OVER.items() if k != "select"})
    assert step_columns(job, "over")[:5] == ("window_start", "window_end", "deviceId", "top", "limits")
    assert step_columns(job, "over")[5] == "reference_snapshot_limits"


def test_several_steps_and_the_first_join_their_own_tables_each_under_its_own_name():
    first = {"name": "readings", "select": {"deviceId": "deviceId", "temperature": "temperature"}}
    chained = LIMITS | {"keys": ["sites.deviceId = limits.deviceId"]}
    sited = {"name": "sited", "from": "readings", "reference": [SITES, chained],
             "select": {"deviceId": "deviceId", "site": "sites.site", "limit": "limits.max_temperature"}}  # fmt: skip
    job = spec(first, sited)
    assert [r.name for r in job.reference_tables] == ["sites", "limits"]
    assert step_columns(job, "sited")[3:5] == ("reference_snapshot_sites", "reference_snapshot_limits")
    read = [(e.where, e.text) for e in spec_expressions(job)]
    assert ("steps[1] (sited) reference[1].keys[0]", "sites.deviceId") in read


def test_the_fingerprint_follows_the_steps_table_and_a_job_without_one_keeps_its_own():
    base = spec().fingerprint
    assert spec(MINUTES, OVER | {"reference": LIMITS | {"type": "left"}}).fingerprint != base
    assert spec(MINUTES, OVER | {"reference": LIMITS | {"path": "refs/limits2"}}).fingerprint != base
    plain = OVER | {"filter": "top > 30", "select": {"deviceId": "deviceId", "top": "top"}}
    del plain["reference"]
    assert "reference" not in spec(MINUTES, plain).steps[0].canonical()


@pytest.mark.parametrize("step, problem, fix", [
    (OVER | {"window": {"kind": "tumbling", "size": "1h"}, "aggregates": {"n": "count(*)"}, "select": None},
     "window cannot be used with reference in one step", "window its rows in a step that reads it"),
    (OVER | {"analytics": {"prev": "LAG(top) OVER (LIMIT DURATION(hour, 1))"}},
     "analytics cannot be used with reference in one step", "evaluates LAG, LAST and ISFIRST before the JOIN"),
    (OVER | {"filter": "top > limits.limit"}, r"filter: limits\.limit is not one of reference\.columns", "use one of"),
    (OVER | {"select": {"reference_snapshot_limits": "top"}}, "every row carries it already", "another name"),
    (OVER | {"reference": LIMITS | {"name": "top"}}, r"reference\.name: top", ""),
    (OVER | {"reference": LIMITS | {"keys": ["temperature = limits.deviceId"]}}, "temperature", ""),
    (OVER | {"reference": LIMITS | {"path": "../limits"}}, r"contains '\.\.'", ""),
])  # fmt: skip
def test_a_step_reference_that_cannot_work_is_refused_naming_the_step(step, problem, fix):
    with pytest.raises(ConfigError, match=r"steps\[1\] \(over\): .*" + problem) as raised:
        spec(MINUTES, step)
    assert fix in raised.value.fix


def test_a_table_name_is_used_once_in_a_job():
    first_table = BASE | {
        "reference": LIMITS,
        "steps": [
            {"name": "readings", "select": ["deviceId", "temperature"]},
            {"name": "again", "from": "readings", "reference": LIMITS},
        ],
    }
    with pytest.raises(ConfigError, match=r"steps\[1\] \(again\): reference limits: the first step joins a table"):
        parse_spec(first_table)
    twice = {"name": "twice", "from": "minutes", "reference": LIMITS}
    with pytest.raises(ConfigError, match=r"steps\[2\] \(twice\): reference limits: step over joins a table") as e:
        spec(MINUTES, OVER, twice, sinks={"outputs": {"over": {"step": "over"}}})
    assert "its own name" in e.value.fix
    more = LIMITS | {"name": "more", "keys": ["deviceId = more.deviceId"]}
    after = {"name": "after", "from": "over", "reference": more, "select": ["deviceId"]}
    assert spec(MINUTES, OVER, after).steps[1].references[0].name == "more"
    named = {"name": "named", "select": {"deviceId": "deviceId", "reference_snapshot_sites": "eventTime"}}
    with pytest.raises(ConfigError, match="reference_snapshot_sites is a column of the rows the step reads"):
        spec(named, {"name": "sited", "from": "named", "reference": SITES})


def test_the_first_step_refuses_a_reference_beside_analytics_or_a_join_naming_the_two_step_form():
    first = {"name": "rises", "analytics": {"prev": "LAG(temperature) OVER (LIMIT DURATION(minute, 10))"}}
    with pytest.raises(ConfigError, match="analytics cannot be used with reference in one step") as raised:
        parse_spec(BASE | {"reference": LIMITS, "steps": [first]})
    assert "later per-event step" in raised.value.fix


def test_every_steps_table_folder_must_lie_inside_the_reference_folders(tmp_path):
    (tmp_path / "refs" / "limits").mkdir(parents=True)
    (tmp_path / "outside" / "limits").mkdir(parents=True)
    check_places(spec(), logs=[tmp_path], base=tmp_path, references=[tmp_path / "refs"])
    outside = spec(MINUTES, OVER | {"reference": LIMITS | {"path": "outside/limits"}})
    with pytest.raises(ConfigError, match="reference.path 'outside/limits' is outside the reference folders"):
        check_places(outside, logs=[tmp_path], base=tmp_path, references=[tmp_path / "refs"])
