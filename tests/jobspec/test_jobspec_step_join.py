"""A later step that joins two earlier steps' rows: what each side reads (its step's columns
and ``system_time``), the look-back along both sides, the graph it makes, the fingerprint and
the normalised form; and what is refused, naming the step, the field and the fix."""

from __future__ import annotations

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec import parse_spec
from tidegate.jobspec.model import has_position, step_columns
from tidegate.jobspec.spec_expressions import spec_expressions
from tidegate.validation.comparison import Layout

MIN = 60_000_000
BASE = {
    "name": "peaks",
    "version": 1,
    "payload": {"deviceId": "string", "eventTime": "string", "temperature": "double"},
    "timestamp_by": "eventTime",
}
TENS = {"name": "tens", "window": {"kind": "tumbling", "size": "10m"}, "group_by": ["deviceId"],
        "aggregates": {"top": "max(temperature)"}}  # fmt: skip
HOURS = {"name": "hours", "from": "input", "window": {"kind": "tumbling", "size": "1h"}, "group_by": ["deviceId"],
         "aggregates": {"peak": "max(temperature)"}}  # fmt: skip
JOIN = {"left": "tens", "right": "hours", "keys": ["tens.deviceId = hours.deviceId"],
        "within": "DATEDIFF(minute, tens, hours) BETWEEN 0 AND 50"}  # fmt: skip
PEAKS = {"name": "peaks", "join": JOIN, "filter": "tens.top = hours.peak",
         "select": {"deviceId": "tens.deviceId", "peak": "hours.peak", "at": "tens.system_time"}}  # fmt: skip


def spec(*steps, **more):
    return parse_spec(BASE | {"steps": list(steps or (TENS, HOURS, PEAKS))} | more)


def test_a_join_step_reads_two_steps_and_its_rows_are_join_rows_of_no_one_position():
    job = spec()
    peaks = job.steps[-1]
    assert peaks.join is not None and peaks.reads_all == ("tens", "hours") and not peaks.per_event
    assert step_columns(job, "peaks") == ("deviceId", "peak", "at", "partition", "offset", "right_partition",
                                          "right_offset", "system_time")  # fmt: skip
    assert not has_position(job, "peaks")  # its sides' rows are window rows
    layout = Layout.of(job, positioned=False)
    assert layout.time == "system_time" and layout.keys == ("deviceId", "peak", "at")
    assert "peaks: tens join hours on tens.deviceId = hours.deviceId" in job.describe()
    assert parse_spec(job.to_dict()) == job and job.to_dict()["steps"][2]["join"]["right"] == "hours"


def test_the_look_back_takes_the_longer_side_then_the_join_bound():
    # tens reach 10 min, hours 60 min; the join's bound adds 50 min
    assert spec().span_us == 110 * MIN
    assert spec(TENS, HOURS, PEAKS | {"join": JOIN | {"within": "DATEDIFF(minute, tens, hours) BETWEEN 0 AND 5"}})\
        .span_us == 65 * MIN  # fmt: skip


def test_the_fingerprint_follows_the_join_and_its_keys_and_bound_are_read_again_by_sparks_parser():
    base = spec().fingerprint
    assert spec(TENS, HOURS, PEAKS | {"join": JOIN | {"type": "left"}}).fingerprint != base
    assert spec(TENS, HOURS, PEAKS | {"join": JOIN | {"within": "DATEDIFF(minute, tens, hours) BETWEEN 0 AND 40"}})\
        .fingerprint != base  # fmt: skip
    assert spec(TENS, HOURS, PEAKS | {"filter": None}).fingerprint != base
    read = [(e.where, e.text) for e in spec_expressions(spec())]
    assert ("steps[2] (peaks) join.keys[0]", "hours.deviceId") in read
    assert ("steps[2] (peaks) filter", "tens.top = hours.peak") in read


def test_written_with_the_sides_swapped_the_bound_is_turned_around():
    swapped = spec(TENS, HOURS, PEAKS | {"join": JOIN | {"within": "DATEDIFF(minute, hours, tens) BETWEEN -50 AND 0"}})
    assert swapped.steps[-1].join == spec().steps[-1].join


@pytest.mark.parametrize("peaks, problem, fix", [
    (PEAKS | {"from": "tens"}, r"steps\[2\]\.from is set on a join step", "reads the two steps"),
    (PEAKS | {"join": JOIN | {"right": "input"}}, r"join\.right: a join step joins two steps, not the input",
     "join in the first step"),
    (PEAKS | {"join": JOIN | {"right": "later"}}, r"steps\[2\]\.join\.right: 'later' is not an earlier step",
     "name an earlier step: tens, hours"),
    (PEAKS | {"join": JOIN | {"right": "tens"}}, "the same step as join.left", "two different steps"),
    (PEAKS | {"join": {k: v for k, v in JOIN.items() if k != "within"}}, "join.within is missing", "BETWEEN"),
    (PEAKS | {"join": JOIN | {"within": "DATEDIFF(minute, tens, other) BETWEEN 0 AND 5"}},
     "not the join's steps", "DATEDIFF(minute, tens, hours)"),
    (PEAKS | {"join": JOIN | {"keys": ["tens.deviceId = tens.deviceId"]}}, "must compare a tens expression", ""),
    (PEAKS | {"select": None}, "select is missing", "hours.system_time"),
    (PEAKS | {"select": {"t": "tens.temperature"}}, r"select\.t: tens\.temperature is not a column of tens",
     "window_start"),
    (PEAKS | {"filter": "hours.arrival_time > tens.system_time"}, "hours.arrival_time is not a column of hours", ""),
    (PEAKS | {"window": {"kind": "tumbling", "size": "1h"}}, r"unknown field steps\[2\]\.window", "join, filter"),
])  # fmt: skip
def test_a_join_step_that_cannot_work_is_refused_naming_the_step_and_field(peaks, problem, fix):
    with pytest.raises(ConfigError, match=problem) as raised:  # hours is an output: no step is left unused
        spec(TENS, HOURS, peaks, sinks={"output": {"step": "peaks"}, "outputs": {"hourly": {"step": "hours"}}})
    assert fix in raised.value.fix


def test_each_side_must_lead_somewhere_and_a_side_both_join_and_output_is_fine():
    job = spec(TENS, HOURS, PEAKS, sinks={"output": {"step": "peaks"}, "outputs": {"hourly": {"step": "hours"}}})
    assert job.output_step_of("hourly") == "hours"
    # a step read by the join only is used; one read by nothing is not
    spare = {"name": "spare", "from": "input", "filter": "temperature > 0", "select": ["deviceId"]}
    with pytest.raises(ConfigError, match="step spare is not used"):
        spec(TENS, HOURS, spare, PEAKS)
