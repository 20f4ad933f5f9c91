"""Start planning (semantics §6): first output time, look-back, checkpoint reuse vs replay, retention guard.

Timeline of the log used here (one event per minute per partition, arrivals = event times)::

    12:00 ──────────────────────────────── 13:00   arrivals, 2 partitions
                 T − L = 12:42        T = 12:50
                 └──── look-back L = 1m window + 2m late + 5m early = 8m
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import parse_time_us
from tidegate.inputs.event_log import EventLog
from tidegate.jobspec import parse_spec
from tidegate.lineage.final import EmittedCut
from tidegate.runtime.jobs.planning import PreviousLineage, RetentionGuardError, plan_start

MIN = 60_000_000
T0 = parse_time_us("2026-03-01T12:00:00Z")

SPEC = {
    "name": "fleet",
    "version": 1,
    "payload": {"deviceId": "string", "eventTime": "string", "v": "double"},
    "timestamp_by": "eventTime",
    "over": "deviceId",
    "policy": {"late_arrival_tolerance": "2m"},
    "window": {"kind": "tumbling", "size": "1m"},
    "group_by": ["deviceId"],
    "aggregates": {"n": "count(*)"},
}


@pytest.fixture
def log(tmp_path) -> EventLog:
    log = EventLog.create(tmp_path / "event-log", partitions=2, clock="manual", segment_bytes=1024)
    for i in range(61):  # one frame a minute: small segments that retention can delete one by one
        for p in range(2):
            log.append(
                p, [None], [json.dumps({"deviceId": f"d{p}", "eventTime": "x", "v": i})], [T0 + i * MIN], fsync=False
            )
    log.advance_clock(T0 + 60 * MIN)
    return log


def spec(**changes):
    return parse_spec(SPEC | changes)


def previous(spec_, *, usable=True, through=None, offsets=None, fingerprint=None):
    return PreviousLineage(
        "L1", Path("/nowhere"), fingerprint or spec_.fingerprint, T0, usable, EmittedCut(through, None, offsets)
    )


def test_now_starts_output_at_the_log_clock_and_reads_back_the_look_back(log):
    plan = plan_start(spec(), "now", clock_us=log.clock_now_us(), at_us=None, previous=None, log=log)
    assert plan.output_start_us == T0 + 60 * MIN
    assert plan.lookback_us == 8 * MIN
    assert plan.input_from_us == T0 + 52 * MIN
    assert plan.starting_offsets == {0: 52, 1: 52}  # the first event arriving at or after T − L
    assert plan.checkpoint == "fresh" and plan.new_lineage
    assert plan.emit_after_us == plan.output_start_us


def test_custom_time_positions_the_source_at_t_minus_l(log):
    plan = plan_start(spec(), "custom", clock_us=log.clock_now_us(), at_us=T0 + 50 * MIN, previous=None, log=log)
    assert plan.input_from_us == T0 + 42 * MIN and plan.starting_offsets == {0: 42, 1: 42}
    assert "fresh checkpoint" in plan.reason


def test_last_stopped_reuses_the_checkpoint_only_when_the_logic_is_unchanged(log):
    s = spec()
    plan = plan_start(s, "last-stopped", clock_us=log.clock_now_us(), at_us=None, previous=previous(s), log=log)
    assert plan.checkpoint == "reused" and not plan.new_lineage and plan.lineage_id == "L1"
    assert "fingerprint is unchanged" in plan.reason

    changed = spec(aggregates={"n": "count(*)", "top": "max(v)"})
    plan = plan_start(
        changed,
        "last-stopped",
        clock_us=log.clock_now_us(),
        at_us=None,
        previous=previous(s, through=T0 + 45 * MIN),
        log=log,
    )
    assert plan.checkpoint == "fresh" and plan.new_lineage
    assert "logic changed" in plan.reason and s.fingerprint[:12] in plan.reason
    # replay from where the output was final, T = 12:45, reading from 12:37
    assert plan.output_start_us == T0 + 45 * MIN and plan.input_from_us == T0 + 37 * MIN
    assert plan.emit_after_us == T0 + 45 * MIN


def test_a_lost_checkpoint_is_replayed_from_the_last_output_even_with_the_same_logic(log):
    s = spec()
    plan = plan_start(
        s,
        "last-stopped",
        clock_us=log.clock_now_us(),
        at_us=None,
        previous=previous(s, usable=False, through=T0 + 30 * MIN),
        log=log,
    )
    assert plan.checkpoint == "fresh" and "missing" in plan.reason
    assert plan.output_start_us == T0 + 30 * MIN


def test_an_upgrade_continues_where_the_output_was_final_in_a_fresh_checkpoint(log):
    s = spec()
    plan = plan_start(
        s,
        "last-stopped",
        clock_us=log.clock_now_us(),
        at_us=None,
        log=log,
        fresh_checkpoint=True,
        previous=previous(s, through=T0 + 45 * MIN, offsets={0: 58, 1: 58}),
    )
    assert plan.checkpoint == "fresh" and plan.new_lineage and "engine upgrade" in plan.reason
    assert plan.output_start_us == T0 + 45 * MIN and plan.input_from_us == T0 + 37 * MIN  # a window job: by time
    # a per-event job by position: from where its last batch ended, even where events arrived
    # before the time its output is final through (an event time ahead of its arrival moves the
    # watermark past events not read yet)
    per_event = per_event_spec()
    plan = plan_start(
        per_event,
        "last-stopped",
        clock_us=log.clock_now_us(),
        at_us=None,
        log=log,
        fresh_checkpoint=True,
        previous=previous(per_event, through=T0 + 45 * MIN, offsets={0: 40, 1: 38}),
    )
    assert plan.checkpoint == "fresh" and plan.emit_from_offsets == {0: 40, 1: 38}


def test_last_stopped_without_an_earlier_run_says_what_to_do(log):
    with pytest.raises(ConfigError) as err:
        plan_start(spec(), "last-stopped", clock_us=log.clock_now_us(), at_us=None, previous=None, log=log)
    assert "never run" in str(err.value) and "--mode now" in str(err.value)


def per_event_spec(**changes):
    return parse_spec(
        {k: v for k, v in SPEC.items() if k not in ("window", "group_by", "aggregates")}
        | {"select": {"device": "deviceId"}}
        | changes
    )


def test_a_per_event_job_reads_back_the_policys_stretch_and_emits_from_the_first_event_at_t(log):
    per_event = per_event_spec()
    plan = plan_start(per_event, "custom", clock_us=log.clock_now_us(), at_us=T0 + 50 * MIN, previous=None, log=log)
    # late 2m + early 5m: the events that decide how the first ones emitted are judged
    assert plan.lookback_us == 7 * MIN and plan.input_from_us == T0 + 43 * MIN
    assert plan.starting_offsets == {0: 43, 1: 43} and plan.emit_from_offsets == {0: 50, 1: 50}
    assert plan.emit_after_us is None  # emitted by position, not by time
    assert plan.lineage_info()["emit_from_offsets"] == {"0": 50, "1": 50}


def test_a_per_event_job_continues_at_the_last_outputs_positions_after_reading_back_before_them(log):
    per_event = per_event_spec()
    changed = parse_spec(per_event.to_dict() | {"filter": "v > 3"})
    plan = plan_start(
        changed,
        "last-stopped",
        clock_us=log.clock_now_us(),
        at_us=None,
        previous=previous(per_event, offsets={0: 40, 1: 38}),
        log=log,
    )
    assert plan.checkpoint == "fresh" and plan.emit_from_offsets == {0: 40, 1: 38}
    # from 7 minutes before each partition's last judged event (arrived 12:39 and 12:37)
    assert plan.starting_offsets == {0: 32, 1: 30} and plan.input_from_us == T0 + 30 * MIN
    assert "read back to judge them" in plan.reason

    log.set_retention("20m", None)
    assert log.apply_retention()  # what arrived before 12:40 is gone: the stretch before 38 too
    with pytest.raises(RetentionGuardError) as err:
        plan_start(
            changed,
            "last-stopped",
            clock_us=log.clock_now_us(),
            at_us=None,
            previous=previous(per_event, offsets={0: 45, 1: 44}),
            log=log,
        )
    assert "the policy's stretch before the last output" in str(err.value) and "--accept-partial" in str(err.value)
    plan = plan_start(
        changed,
        "last-stopped",
        clock_us=log.clock_now_us(),
        at_us=None,
        previous=previous(per_event, offsets={0: 45, 1: 44}),
        log=log,
        accept_partial=True,
    )
    assert plan.partial and plan.emit_from_offsets == {0: 45, 1: 44}
    assert plan.starting_offsets == {p: log.start_offset(p) for p in range(2)}


def test_a_per_event_job_timed_by_arrival_reads_nothing_back(log):
    by_arrival = parse_spec({k: v for k, v in SPEC.items()
                             if k not in ("window", "group_by", "aggregates", "timestamp_by", "over", "policy")}
                            | {"select": {"device": "deviceId"}})  # fmt: skip
    plan = plan_start(by_arrival, "custom", clock_us=log.clock_now_us(), at_us=T0 + 50 * MIN, previous=None, log=log)
    assert plan.lookback_us == 0 and plan.input_from_us == T0 + 50 * MIN and plan.emit_from_offsets is None
    plan = plan_start(
        by_arrival,
        "last-stopped",
        clock_us=log.clock_now_us(),
        at_us=None,
        previous=previous(by_arrival, usable=False, offsets={0: 40, 1: 38}),
        log=log,
    )
    assert plan.starting_offsets == {0: 40, 1: 38} and plan.emit_from_offsets is None


def test_a_start_before_retention_is_refused_naming_the_missing_span(log):
    log.set_retention("20m", None)
    assert log.apply_retention()  # segments older than 12:40 are gone
    with pytest.raises(RetentionGuardError) as err:
        plan_start(spec(), "custom", clock_us=log.clock_now_us(), at_us=T0 + 20 * MIN, previous=None, log=log)
    text = str(err.value)
    assert "no longer holds the input from arrival 2026-03-01T12:12:00Z" in text
    # the deleted span each partition would have had to read: up to offset 39, arrived 12:39
    assert "partition 0 offsets 0–39" in text and "partition 1 offsets 0–39" in text
    assert "to 2026-03-01T12:39:00Z" in text
    assert "--accept-partial" in text

    plan = plan_start(
        spec(), "custom", clock_us=log.clock_now_us(), at_us=T0 + 20 * MIN, previous=None, log=log, accept_partial=True
    )
    assert plan.partial and "deleted by retention" in plan.partial_reason
    assert plan.starting_offsets == {p: log.start_offset(p) for p in range(2)}


@pytest.mark.parametrize(
    "mode, at, message",
    [
        ("sometime", None, "start mode 'sometime' is unknown"),
        ("custom", None, "needs a time"),
        ("now", T0, "only for start mode custom"),
    ],
)
def test_bad_start_requests_say_what_to_do(log, mode, at, message):
    with pytest.raises(ConfigError) as err:
        plan_start(spec(), mode, clock_us=log.clock_now_us(), at_us=at, previous=None, log=log)
    assert message in str(err.value)


# -- plan(): the inputs gathered for a job in a region ------------------------------------------
class OneRegion:
    """The slice of the controller planning reads: the job's spec, its event log, and its
    lineages in one region (oldest first)."""

    def __init__(self, log: EventLog, spec_, lineages: list):
        from types import SimpleNamespace as NS

        self.log, self.spec_ = log, spec_
        self.db = NS(lineages=lambda job, region: lineages)

    def spec(self, job, version=None):
        return 1, self.spec_

    def input_of(self, spec_):
        return self.log.root


def lineage_row(root: Path, spec_, *, output_from_us, emitted_through_us):
    from types import SimpleNamespace as NS

    return NS(
        id=root.name,
        root=str(root),
        fingerprint=spec_.fingerprint,
        version=1,
        output_from_us=output_from_us,
        emitted_through_us=emitted_through_us,
        last_offsets=None,
    )


def test_auto_continues_where_the_job_ran_before_and_starts_now_where_it_never_did(log, tmp_path):
    from tidegate.runtime.jobs.planning import plan

    s = spec()
    assert plan(OneRegion(log, s, []), "fleet", "east", "auto").mode == "now"
    (tmp_path / "L1").mkdir()
    ran = OneRegion(
        log, s, [lineage_row(tmp_path / "L1", s, output_from_us=T0 + 10 * MIN, emitted_through_us=T0 + 50 * MIN)]
    )
    planned = plan(ran, "fleet", "east", "auto")
    assert planned.mode == "last-stopped" and planned.output_start_us == T0 + 50 * MIN  # after its last output


def test_a_region_loss_is_planned_before_it_happens_exactly_as_the_region_will_plan_after_it(log, tmp_path):
    """A drill estimates the replay a region loss calls for before it breaks anything: the
    region then has no checkpoint and rebuilds its output from where its oldest lineage began."""
    from tidegate.runtime.jobs.planning import plan, previous_lineage

    s = spec()
    rows = [
        lineage_row(tmp_path / name, s, output_from_us=start, emitted_through_us=start + 20 * MIN)
        for name, start in (("L1", T0 + 10 * MIN), ("L2", T0 + 30 * MIN))
    ]
    for row in rows:
        Path(row.root).mkdir()
    region = OneRegion(log, s, rows)
    foreseen = previous_lineage(region, "fleet", "east", storage_lost=True)
    assert foreseen == PreviousLineage(
        "L2", tmp_path / "L2", s.fingerprint, T0 + 30 * MIN, False, EmittedCut(T0 + 10 * MIN, None, None)
    )
    for row in rows:
        Path(row.root).rmdir()  # the loss
    assert previous_lineage(region, "fleet", "east") == foreseen
    replay = plan(region, "fleet", "east", "last-stopped", previous=foreseen)
    assert replay.checkpoint == "fresh" and replay.output_start_us == T0 + 10 * MIN
    assert replay.input_from_us == T0 + 10 * MIN - s.lookback_us


def test_an_analytic_job_reads_back_its_limit_duration_and_resumes_by_time_not_position(log):
    analytic = parse_spec(
        {k: v for k, v in SPEC.items() if k not in ("window", "group_by", "aggregates")}
        | {"analytics": {"prev_v": "LAG(v) OVER (PARTITION BY deviceId LIMIT DURATION(minute, 10))"}}
    )
    plan = plan_start(analytic, "custom", clock_us=log.clock_now_us(), at_us=T0 + 50 * MIN, previous=None, log=log)
    # L = 10 min LIMIT DURATION + 2 min late + 5 min early
    assert plan.lookback_us == 17 * MIN and plan.input_from_us == T0 + 33 * MIN
    assert plan.emit_after_us == T0 + 50 * MIN  # rows at or before T are rebuilt, not emitted
    changed = parse_spec(analytic.to_dict() | {"filter": "v > prev_v"})
    plan = plan_start(
        changed,
        "last-stopped",
        clock_us=log.clock_now_us(),
        at_us=None,
        previous=previous(analytic, through=T0 + 45 * MIN, offsets={0: 40, 1: 38}),
        log=log,
    )
    assert plan.starting_offsets == {0: 28, 1: 28} and plan.emit_after_us == T0 + 45 * MIN
