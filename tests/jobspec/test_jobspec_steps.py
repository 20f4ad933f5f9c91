"""``steps:`` (Stream Analytics' WITH): the graph a spec may draw, what it refuses with the
step named, and what follows — look-back adding up along the steps, fingerprint, normal form."""

from __future__ import annotations

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec import parse_spec

MIN = 60_000_000
BASE = {
    "name": "steps",
    "version": 1,
    "payload": {"deviceId": "string", "eventTime": "string", "temperature": "double"},
    "timestamp_by": "eventTime",
    "policy": {"late_arrival_tolerance": "1m"},
}
RISES = {
    "name": "rises",
    "from": "input",
    "analytics": {"previous": "LAG(temperature) OVER (PARTITION BY deviceId LIMIT DURATION(minute, 10))"},
    "filter": "temperature - previous > 5",
}
HOURLY = {
    "name": "hourly",
    "from": "rises",
    "window": {"kind": "tumbling", "size": "1h"},
    "group_by": ["deviceId"],
    "aggregates": {"rises": "count(*)"},
}
MINUTES = {
    "name": "minutes",
    "window": {"kind": "tumbling", "size": "1m"},
    "group_by": ["deviceId"],
    "aggregates": {"n": "count(*)"},
}
HOURS = {
    "name": "hours",
    "from": "minutes",
    "window": {"kind": "tumbling", "size": "1h"},
    "aggregates": {"busy_minutes": "count_if(n > 2)", "peak": "max(n)"},
}
PAYMENTS = {
    "name": "pay",
    "version": 1,
    "payload": {"kind": "string", "orderId": "string", "amount": "double", "eventTime": "string"},
    "timestamp_by": "eventTime",
    "policy": {"late_arrival_tolerance": "1m"},
    "inputs": {"orders": {"filter": "kind = 'order'"}, "payments": {"filter": "kind = 'payment'"}},
}
PAID = {
    "name": "paid",
    "join": {
        "left": "orders",
        "right": "payments",
        "keys": ["orders.orderId = payments.orderId"],
        "within": "DATEDIFF(minute, orders, payments) BETWEEN 0 AND 15",
    },
    "select": {"orderId": "orders.orderId", "amount": "payments.amount"},
}
PER_HOUR = {
    "name": "per_hour",
    "from": "paid",
    "window": {"kind": "tumbling", "size": "1h"},
    "aggregates": {"paid_orders": "count(*)", "revenue": "sum(amount)"},
}


def steps(*items, base=BASE, **more):
    return parse_spec(base | {"steps": list(items)} | more)


def refused(*items, base=BASE, **more) -> str:
    with pytest.raises(ConfigError) as exc:
        steps(*items, base=base, **more)
    return str(exc.value)


def test_an_analytic_step_then_a_window_over_its_rows_reads_back_both_spans():
    job = steps(RISES, HOURLY)
    assert job.first_step == "rises" and [s.name for s in job.steps] == ["hourly"]
    assert [a.name for a in job.analytics] == ["previous"] and job.window is None
    assert job.steps[0].reads == "rises" and job.steps[0].window.span_us == 60 * MIN
    # LAG's 10 min under the hour's windows, + late 1 min + early 5 min
    assert job.lookback_us == (10 + 60 + 1 + 5) * MIN
    assert job.output_window == job.steps[0].window
    assert job.emitted.window == job.steps[0].window and job.emitted.group_by == (("deviceId", "deviceId"),)
    assert job.sinks.output_step == "hourly"


def test_a_window_over_a_window_reads_its_window_columns_and_adds_the_spans():
    job = steps(MINUTES, HOURS)
    assert job.window.span_us == MIN and job.steps[0].aggregates == (
        ("busy_minutes", "count_if(n > 2)"),
        ("peak", "max(n)"),
    )
    assert job.lookback_us == (1 + 60 + 1 + 5) * MIN
    assert "hours: tumbling 1h windows of minutes over all rows" in job.describe()


def test_a_join_step_then_a_window_counts_paid_orders_per_hour():
    job = steps(PAID, PER_HOUR, base=PAYMENTS)
    assert job.join is not None and job.first_step == "paid"
    assert job.lookback_us == (15 + 60 + 1 + 5) * MIN


@pytest.mark.parametrize(
    "items, base",
    [((RISES, HOURLY), BASE), ((MINUTES, HOURS), BASE), ((PAID, PER_HOUR), PAYMENTS)],
    ids=["analytic-window", "window-window", "join-window"],
)
def test_the_normal_form_reads_back_to_the_same_spec(items, base):
    job = steps(*items, base=base)
    assert parse_spec(job.to_dict()) == job
    assert parse_spec(job.to_dict()).fingerprint == job.fingerprint


def test_several_steps_may_read_one_step_each_an_output_with_the_longest_way_as_look_back():
    daily = {
        "name": "days",
        "from": "minutes",
        "window": {"kind": "tumbling", "size": "1d"},
        "aggregates": {"rows": "count(*)"},
    }
    sinks = {"output": {"step": "hours"}, "outputs": {"days": {"step": "days"}}}
    job = steps(MINUTES, HOURS, daily, sinks=sinks)
    assert [(s.name, s.reads) for s in job.steps] == [("hours", "minutes"), ("days", "minutes")]
    assert job.lookback_us == (1 + 24 * 60 + 1 + 5) * MIN  # minutes then days, not minutes + hours + days
    assert parse_spec(job.to_dict()) == job and parse_spec(job.to_dict()).fingerprint == job.fingerprint
    # the same steps as a chain (days reads hours) compute other rows: another fingerprint
    chain = steps(MINUTES, HOURS, daily | {"from": "hours"}, sinks=sinks)
    assert chain.fingerprint != job.fingerprint and chain.lookback_us == (1 + 60 + 24 * 60 + 1 + 5) * MIN


def test_the_fingerprint_follows_a_later_step_but_not_the_names_of_the_steps():
    job = steps(MINUTES, HOURS)
    assert steps(MINUTES | {"name": "m"}, HOURS | {"name": "h", "from": "m"}).fingerprint == job.fingerprint
    assert steps(MINUTES, HOURS | {"window": {"kind": "tumbling", "size": "2h"}}).fingerprint != job.fingerprint
    single = parse_spec(BASE | {k: v for k, v in MINUTES.items() if k != "name"})
    assert single.fingerprint != job.fingerprint and single.lookback_us < job.lookback_us


def test_the_output_may_name_its_step():
    assert steps(RISES, HOURLY, sinks={"output": {"step": "hourly"}}).sinks.output_step == "hourly"


@pytest.mark.parametrize(
    "items, more, message",
    [
        ((RISES, HOURLY | {"from": "risse"}), {}, "steps[1].from: 'risse' is not a step (did you mean rises?)"),
        ((RISES, HOURLY | {"from": "hourly"}), {}, "steps[1].from: hourly reads hourly, itself"),
        ((RISES | {"from": "hourly"}, HOURLY), {}, "steps[0].from: 'hourly': the first step reads the job's events"),
        (
            (MINUTES, HOURS | {"from": "later"}, HOURS | {"name": "later"}),
            {},
            "steps[1].from: hours reads later, a later step",
        ),
        ((RISES, HOURLY | {"from": None}), {}, "steps[1].from is missing"),
        ((RISES, HOURLY), {"sinks": {"output": {"step": "rises"}}}, "step hourly is not used"),
        ((RISES, HOURLY), {"sinks": {"output": {"step": "daily"}}}, "sinks.output.step: 'daily' is not a step"),
        (
            (MINUTES, HOURS, HOURS | {"name": "other"}),
            {},
            "step hours is not used: it is neither an output's step (output: other)",
        ),
        ((RISES, HOURLY | {"from": "input"}), {}, "step rises is not used"),
        ((RISES, RISES), {}, "steps[1].name: rises is the name of steps[0] too"),
        ((RISES, HOURLY | {"name": None}), {}, "steps[1].name is missing"),
        (
            (RISES, {k: v for k, v in HOURLY.items() if k != "window"}),
            {},
            "steps[1] (hourly): aggregates are set but there is no window",
        ),
        (
            (RISES, HOURLY | {"join": PAID["join"]}),
            {},
            "steps[1].from is set on a join step",
        ),
        (
            (RISES, HOURLY | {"group_by": ["temperatur"]}),
            {},
            "steps[1] (hourly): group_by[0]: 'temperatur' is not a payload field",
        ),
        ((RISES, HOURLY | {"aggregates": {"n": "avg(arrival_time)"}}), {}, "steps[1] (hourly): aggregates.n"),
        ((RISES, HOURLY), {"window": {"kind": "tumbling", "size": "1m"}}, "window is set beside steps"),
        ((RISES, HOURLY), {"watermark": {"percentile": 90}}, "a percentile watermark cannot be used with steps"),
        (
            (RISES | {"window": HOURLY["window"], "aggregates": {"n": "count(*)"}},),
            {},
            "analytics cannot be used with a window in one step",
        ),
    ],
    ids=[
        "unknown",
        "itself",
        "first-reads-a-step",
        "cycle",
        "no-from",
        "unused",
        "unknown-output",
        "branch-without-output",
        "input-reader-leaves-the-first-unused",
        "same-name",
        "no-name",
        "no-window",
        "join-later",
        "unknown-column",
        "no-such-column",
        "beside",
        "percentile",
        "analytics-and-window",
    ],
)
def test_bad_graphs_and_bad_steps_are_refused_naming_the_step(items, more, message):
    assert message in refused(*items, **more)


def test_a_join_step_reads_its_inputs_not_a_from():
    assert "steps[0].from is set on a join step" in refused(PAID | {"from": "input"}, PER_HOUR, base=PAYMENTS)
    assert "join in the first step and window its rows in a step that reads it" in str(
        pytest.raises(
            ConfigError,
            parse_spec,
            PAYMENTS | {"join": PAID["join"], "select": PAID["select"], "window": {"kind": "tumbling", "size": "1h"}},
        ).value
    )


def test_a_later_step_reads_the_columns_of_the_step_before_it():
    job = steps(MINUTES, HOURS | {"filter": "n > 0 AND window_end > window_start"})
    assert job.steps[0].filter == "n > 0 AND window_end > window_start"
    assert "is not a payload field" in refused(MINUTES, HOURS | {"group_by": ["temperature"]})


# -- named outputs (sinks.outputs): a pass-through archive beside a windowed alert ----------
READINGS = {"name": "readings", "select": {"deviceId": "deviceId", "temperature": "temperature"}}
ALERTS = {
    "name": "alerts",
    "from": "readings",
    "filter": "temperature > 30",
    "window": {"kind": "tumbling", "size": "1h"},
    "group_by": ["deviceId"],
    "aggregates": {"hot": "count(*)"},
}
ARCHIVE_SINKS = {"output": {"step": "alerts"}, "outputs": {"archive": {"step": "readings"}}}


def test_a_named_output_holds_an_earlier_step_and_round_trips():
    job = steps(READINGS, ALERTS, sinks=ARCHIVE_SINKS)
    assert job.sinks.outputs == (("archive", "readings"),) and job.output_names == ("output", "archive")
    assert job.output_step_of("output") == "alerts" and job.output_step_of("archive") == "readings"
    archive = job.output_view("archive")
    assert archive.window is None and dict(archive.select) == READINGS["select"] and not archive.steps
    assert job.output_view("output").window == job.steps[0].window == job.output_window
    assert parse_spec(job.to_dict()) == job
    assert "outputs output ← alerts, archive ← readings" in job.describe()


def test_the_primary_output_may_hold_the_first_step_when_a_named_one_holds_the_last():
    job = steps(READINGS, ALERTS, sinks={"output": {"step": "readings"}, "outputs": {"alerts": {"step": "alerts"}}})
    assert job.output_window is None and dict(job.emitted.select) == READINGS["select"]
    assert job.output_view("alerts").window == job.steps[0].window


def test_the_fingerprint_follows_the_named_outputs_but_not_the_steps_names():
    job = steps(READINGS, ALERTS, sinks=ARCHIVE_SINKS)
    assert job.fingerprint != steps(READINGS, ALERTS).fingerprint
    assert (
        job.fingerprint
        != steps(READINGS, ALERTS, sinks=ARCHIVE_SINKS | {"outputs": {"raw": {"step": "readings"}}}).fingerprint
    )
    renamed = steps(
        READINGS | {"name": "r"},
        ALERTS | {"from": "r"},
        sinks={"output": {"step": "alerts"}, "outputs": {"archive": {"step": "r"}}},
    )
    assert renamed.fingerprint == job.fingerprint


@pytest.mark.parametrize(
    "outputs, message",
    [
        (
            {"archive": {"step": "readigns"}},
            "sinks.outputs.archive.step: 'readigns' is not a step (did you mean readings?)",
        ),
        ({"output": {"step": "readings"}}, "sinks.outputs: output is the name of the job's own output"),
        ({"../x": {"step": "readings"}}, "sinks.outputs: '../x' is not an output name"),
        ({"Archive": {"step": "readings"}}, "sinks.outputs: 'Archive' is not an output name"),
        ({"_commits": {"step": "readings"}}, "sinks.outputs: '_commits' is not an output name"),
        ({"a" * 64: {"step": "readings"}}, "is not an output name"),
        ({"archive": {"step": "alerts"}}, "sinks.outputs.archive.step: alerts is the step of output too"),
        (
            {"archive": {"step": "readings"}, "raw": {"step": "readings"}},
            "sinks.outputs.raw.step: readings is the step of archive too",
        ),
        ({"archive": {}}, "sinks.outputs.archive.step is missing"),
        ({"archive": {"step": "readings", "path": "/tmp"}}, "sinks.outputs.archive"),
        ({}, "sinks.outputs is empty"),
    ],
    ids=[
        "unknown-step",
        "primary-name",
        "path",
        "upper-case",
        "underscore",
        "too-long",
        "primary-step",
        "same-step",
        "no-step",
        "unknown-field",
        "empty",
    ],
)
def test_bad_named_outputs_are_refused_naming_the_output(outputs, message):
    assert message in refused(READINGS, ALERTS, sinks={"output": {"step": "alerts"}, "outputs": outputs})


def test_a_step_read_by_no_output_is_still_refused_and_named_outputs_need_steps():
    assert "step alerts is not used" in refused(READINGS, ALERTS, sinks={"output": {"step": "readings"}})
    with pytest.raises(ConfigError, match="sinks.outputs is set but the job has no steps"):
        parse_spec(BASE | {"sinks": {"outputs": {"archive": {"step": "readings"}}}})


# -- later steps of any per-event form, and several steps reading the job's events ----------
BUSY = {"name": "busy", "from": "minutes", "filter": "n > 2", "select": {"deviceId": "deviceId", "twice": "n * 2"}}
INPUT_HOURS = {
    "name": "hours",
    "from": "input",
    "window": {"kind": "tumbling", "size": "1h"},
    "group_by": ["deviceId"],
    "aggregates": {"n": "count(*)", "top": "max(temperature)"},
}


def test_a_per_event_step_over_a_window_step_reads_its_columns_and_adds_no_span():
    job = steps(MINUTES, BUSY)
    busy = job.steps[0]
    assert busy.window is None and busy.per_event and busy.filter == "n > 2"
    assert busy.select == (("deviceId", "deviceId"), ("twice", "n * 2"))
    assert job.lookback_us == (1 + 1 + 5) * MIN  # the minute's span alone: a projection reaches no further back
    view = job.emitted
    assert view.window is None and view.output_window is None and dict(view.select) == BUSY["select"]
    assert "busy: each row of minutes as deviceId, twice where n > 2" in job.describe()
    assert parse_spec(job.to_dict()) == job and parse_spec(job.to_dict()).fingerprint == job.fingerprint


def test_a_per_event_step_without_select_keeps_every_column_it_reads_and_a_window_reads_them():
    hourly = {"name": "hourly", "from": "kept", "window": {"kind": "tumbling", "size": "1h"},
              "aggregates": {"rows": "count(*)", "ends": "max(window_end)", "at": "max(system_time)"}}  # fmt: skip
    job = steps(MINUTES, {"name": "kept", "from": "minutes", "filter": "n > 2"}, hourly)
    kept = job.step_view("kept")
    assert [n for n, _ in kept.select] == ["window_start", "window_end", "deviceId", "n"]
    assert job.lookback_us == (1 + 60 + 1 + 5) * MIN
    assert parse_spec(job.to_dict()) == job
    # a window over the rows of a per-event step reads its columns, not the payload's
    assert "'temperature' is not a payload field" in refused(
        MINUTES, {"name": "kept", "from": "minutes"}, hourly | {"group_by": ["temperature"]}
    )


def test_a_per_event_step_over_a_per_event_step_reads_its_selected_columns():
    job = steps(READINGS, {"name": "hot", "from": "readings", "select": {"f": "temperature * 9 / 5 + 32"}})
    assert job.step_view("hot").select == (("f", "temperature * 9 / 5 + 32"),)
    assert "steps[1] (hot): select.x" in refused(
        READINGS, {"name": "hot", "from": "readings", "select": {"x": "humidity"}}
    )


def test_two_windows_of_one_input_take_the_longest_way_as_look_back():
    job = steps(MINUTES, INPUT_HOURS, sinks={"outputs": {"minutes": {"step": "minutes"}}})
    assert job.steps[0].reads == "input" and job.steps[0].reads_input
    assert job.lookback_us == (60 + 1 + 5) * MIN  # the hour, not the minute + the hour
    assert parse_spec(job.to_dict()) == job and parse_spec(job.to_dict()).fingerprint == job.fingerprint
    # the same hour over the minutes' rows is another query
    over_minutes = steps(
        MINUTES,
        INPUT_HOURS | {"from": "minutes", "aggregates": {"n": "sum(n)"}},
        sinks={"outputs": {"minutes": {"step": "minutes"}}},
    )
    assert over_minutes.fingerprint != job.fingerprint
    reads_input = steps(
        MINUTES,
        INPUT_HOURS | {"aggregates": {"n": "sum(n)"}, "group_by": ["deviceId"]} | {"from": "minutes"},
        sinks={"outputs": {"minutes": {"step": "minutes"}}},
    )
    assert reads_input.fingerprint == over_minutes.fingerprint  # names aside, the same steps


def test_a_step_reading_the_input_reads_the_payload_and_built_in_columns():
    hot = {"name": "hot", "from": "input", "filter": "temperature > 30 AND key IS NOT NULL", "select": ["deviceId"]}
    job = steps(READINGS, hot, sinks={"output": {"step": "hot"}, "outputs": {"archive": {"step": "readings"}}})
    assert job.steps[0].select == (("deviceId", "deviceId"),) and job.steps[0].reads_input
    assert job.step_view("hot").select == (("deviceId", "deviceId"),)
    # a per-event job's look-back: the policy's stretch, no span
    assert job.span_us == 0 and job.lookback_us == (1 + 5) * MIN
    assert "steps[1] (hot): filter" in refused(READINGS, hot | {"filter": "n > 2"}, sinks={"output": {"step": "hot"},
                                               "outputs": {"archive": {"step": "readings"}}})  # fmt: skip
    # aggregates read position and payload, as the first step's do
    assert "steps[1] (hours): aggregates.late" in refused(
        MINUTES,
        INPUT_HOURS | {"aggregates": {"late": "max(arrival_time)"}},
        sinks={"outputs": {"m": {"step": "minutes"}}},
    )


def test_later_steps_are_refused_where_they_are_not_supported_yet_naming_the_step():
    sinks = {"outputs": {"minutes": {"step": "minutes"}}}
    # a later join step joins two earlier steps (tests/jobspec/test_jobspec_step_join.py), not inputs
    assert "steps[1].join.left: 'orders' is not an earlier step" in refused(
        MINUTES, {"name": "hours", "join": PAID["join"], "select": {"x": "orders.orderId"}}, sinks=sinks
    )
    assert "steps[1] (hours): analytics cannot be used with a window in one step" in refused(
        MINUTES, INPUT_HOURS | {"analytics": RISES["analytics"]}, sinks=sinks
    )
    assert "steps[1].from: per_hour reads the input, and the job has several (inputs)" in refused(
        PAID, PER_HOUR | {"from": "input"}, base=PAYMENTS, sinks={"outputs": {"paid": {"step": "paid"}}}
    )
    assert "steps[1] (busy): select cannot be used with a window" in refused(
        MINUTES, BUSY | {"window": {"kind": "tumbling", "size": "1h"}, "aggregates": {"n": "count(*)"}}
    )
    assert "steps[1] (busy): aggregates are set but there is no window" in refused(
        MINUTES, BUSY | {"aggregates": {"n": "count(*)"}}
    )
    assert "steps[1] (busy): select: output column" not in refused(MINUTES, BUSY | {"select": {"offset": "n"}})
    assert "steps[1] (busy): select.offset" in refused(MINUTES, BUSY | {"select": {"offset": "n"}})


# -- a later step with analytic functions over the rows it reads -----------------------------
RISING = {
    "name": "rising",
    "from": "minutes",
    "analytics": {"prev": "LAG(n) OVER (PARTITION BY deviceId LIMIT DURATION(minute, 30))"},
    "filter": "n > prev",
    "select": {"deviceId": "deviceId", "n": "n", "prev": "prev"},
}


def test_an_analytic_step_over_a_window_step_adds_its_duration_and_reads_its_columns():
    job = steps(MINUTES, RISING)
    rising = job.steps[0]
    assert rising.per_event and [a.name for a in rising.analytics] == ["prev"] and rising.span_us == 30 * MIN
    assert job.lookback_us == (1 + 30 + 1 + 5) * MIN
    assert "rising: each row of minutes with prev=LAG(n) OVER (PARTITION BY deviceId LIMIT DURATION(minute, 30))" in (
        job.describe()
    )
    assert parse_spec(job.to_dict()) == job and parse_spec(job.to_dict()).fingerprint == job.fingerprint
    other = steps(
        MINUTES, RISING | {"analytics": {"prev": "LAG(n) OVER (PARTITION BY deviceId LIMIT DURATION(minute, 20))"}}
    )
    assert other.fingerprint != job.fingerprint and other.lookback_us == job.lookback_us - 10 * MIN
    # without select: the columns read, then the analytic column
    bare = steps(MINUTES, {k: v for k, v in RISING.items() if k != "select"})
    assert [n for n, _ in bare.step_view("rising").select] == ["window_start", "window_end", "deviceId", "n", "prev"]
    assert "steps[1] (rising): analytics.prev" in refused(
        MINUTES, RISING | {"analytics": {"prev": "LAG(temperature) OVER (LIMIT DURATION(minute, 30))"}}
    )
    assert "steps[1] (rising): analytics.n" in refused(
        MINUTES, RISING | {"analytics": {"n": "LAG(n) OVER (LIMIT DURATION(minute, 30))"}}
    )
