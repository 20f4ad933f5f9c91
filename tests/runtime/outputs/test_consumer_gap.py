"""How far the consumer view fell behind the live stream during a procedure, and for how long.

Times are wall seconds; window ends and clocks are µs, written as seconds (``S``) to read.
"""

from __future__ import annotations

import pytest

from support import Clock
from tidegate.runtime.outputs.consumer_gap import (
    LineageSpan,
    Moment,
    active_timeline,
    gap_of,
    measure,
    view_delays,
)

S = 1_000_000
JOB = "fleet"


@pytest.mark.parametrize(
    "delays, until, allowed, worst, beyond",
    [
        ([(0, 60), (10, 70), (20, 60)], 30, 100, 70, 0),  # always within: nothing beyond
        # beyond from 10 to 30 (its next moment), within again from 30 on
        ([(0, 60), (10, 150), (20, 300), (30, 60)], 40, 100, 300, 20),
        ([(0, 60), (10, 150)], 45, 100, 150, 35),  # still beyond at the end: counted up to it
        ([], 45, 100, None, 0),  # no moment: not measured
    ],
)
def test_the_gap_is_the_largest_delay_and_the_time_beyond_the_allowed_delay(delays, until, allowed, worst, beyond):
    gap = gap_of(delays, until, allowed)
    assert (gap.max_delay_s, gap.beyond_allowed_s, gap.within_allowed) == (worst, beyond, beyond == 0)


def east(
    lineage: str, created_at: float, from_s: float | None, until_s: float | None = None, cut_at: float | None = None
) -> LineageSpan:
    return LineageSpan(
        lineage,
        "east",
        created_at,
        None if from_s is None else int(from_s * S),
        None if until_s is None else int(until_s * S),
        cut_at,
    )


def moment(at: float, lineage: str | None, last_output_s: float | None, clock_s: float) -> Moment:
    return Moment(at, lineage, None if last_output_s is None else int(last_output_s * S), int(clock_s * S))


def test_a_restart_that_replays_holds_the_view_at_the_old_lineages_cut_until_it_passes_it():
    # lineage a emits up to 1000; at t=50 b opens at T=1000 (a's span ends there) and replays:
    # its first windows end at or before T and are not emitted; the view holds at 1000 meanwhile
    # (a moment before the procedure began tells what a had emitted by then)
    #
    #   t:      0     10     50 (b opens)   60      90
    #   a:    ─990───1000────┤
    #   b:                   ├─(replay)─────────── 1060
    #   clock: 1100   1110          1150    1160    1190
    spans = [east("a", 0, None, 1000, cut_at=50), east("b", 50, 1000)]
    moments = [
        moment(0, "a", 990, 1100),
        moment(10, "a", 1000, 1110),
        moment(60, "b", None, 1160),
        moment(90, "b", 1060, 1190),
    ]
    delays = view_delays(moments, spans, lambda at: "east", since=5, until=100)
    assert delays == [(5, 110.0), (10, 110.0), (60, 160.0), (90, 130.0), (100, 130.0)]


def test_a_rolled_back_lineage_disappears_from_the_view_when_the_previous_version_takes_over_again():
    # b (the failed version) emitted up to 1100 from T=1000; c (the rollback) opens at t=40 from T:
    # b's span becomes (1000, 1000], so the view falls back to a's 1000 until c passes it
    spans = [east("a", 0, None, 1000, cut_at=20), east("b", 20, 1000, 1000, cut_at=40), east("c", 40, 1000)]
    moments = [moment(0, "a", 1000, 1100), moment(30, "b", 1100, 1130), moment(50, "c", None, 1150)]
    delays = view_delays(moments, spans, lambda at: "east", since=0, until=50)
    assert delays == [(0, 100.0), (30, 30.0), (50, 150.0), (50, 150.0)]


def test_the_view_follows_the_region_consumers_read():
    west = LineageSpan("w", "west", 0, None, None, None)
    spans = [east("a", 0, None), west]
    moments = [moment(0, "a", 1000, 1100), moment(0, "w", 900, 1100), moment(20, "w", 1050, 1120)]
    active_at = active_timeline([(10.0, "west", "east")], current="west")
    assert (active_at(5), active_at(10), active_at(30)) == ("east", "west", "west")
    assert view_delays(moments, spans, active_at, since=0, until=30) == [(0, 100.0), (0, 100.0), (20, 70.0), (30, 70.0)]


def test_a_rehearsals_batches_move_the_clock_but_are_never_read_by_consumers():
    spans = [east("a", 0, None)]
    moments = [moment(0, "a", 1000, 1100), moment(10, None, 1200, 1200)]
    assert view_delays(moments, spans, lambda at: "east", since=0, until=10) == [(0, 100.0), (10, 200.0), (10, 200.0)]


def test_the_gap_is_measured_from_the_control_databases_records(tmp_path):
    from tidegate.control.db import ControlDB
    from tidegate.runtime.jobs.config import load_config

    clock = Clock(0.0)
    db = ControlDB(load_config(env={"TIDEGATE_HOME": str(tmp_path)}).control_db, now=clock)
    db.set_active_region(JOB, "east", "deploy")
    runs = {}
    for lineage, region, from_s in (("a", "east", None), ("w", "west", None)):
        db.create_lineage(
            id=lineage,
            job=JOB,
            region=region,
            fingerprint="f" * 64,
            version=1,
            root=f"/{lineage}",
            output_from_us=from_s,
            windowed=True,
        )
        runs[lineage] = db.create_run(
            job=JOB,
            region=region,
            version=1,
            fingerprint="f" * 64,
            lineage=lineage,
            input="/h",
            start_mode="now",
            checkpoint="fresh",
            checkpoint_reason="t",
            status="running",
        )

    def batch(lineage: str, batch_id: int, at: float, last_output_s: float | None, clock_s: float) -> None:
        watermark = int((clock_s - 150) * S)
        db.record_batch(
            run_id=runs[lineage],
            job=JOB,
            region="east" if lineage == "a" else "west",
            batch_id=batch_id,
            processed_at=at,
            input_events=1,
            quarantined=0,
            rows_emitted=1,
            job_watermark_us=watermark,
            watermark_delay_us=int(clock_s * S) - watermark,
            last_output_us=None if last_output_s is None else int(last_output_s * S),
        )

    batch("a", 0, 100, 1000, 1100)
    batch("w", 0, 101, 1000, 1101)
    batch("a", 1, 110, None, 1400)  # east's driver stalls: its output stays at 1000 while the clock runs on
    clock.advance(120)
    db.record_operation("switch-active", "done", job=JOB, region="west", detail={"from": "east"})
    batch("w", 1, 125, 1360, 1425)  # consumers read west from 120 on: it is 65 s behind
    gap = measure(db, JOB, ["east", "west"], since=100, until=140, allowed_delay_s=300)
    # east 100 s behind, 101 s, then 400 s from 110 until consumers moved at 120 and west's batch at 125
    assert (gap.max_delay_s, gap.beyond_allowed_s, gap.worst_at, gap.moments) == (400.0, 15.0, 110, 5)
    db.dispose()
