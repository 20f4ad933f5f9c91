"""How far a lineage's output is final (tidegate.lineage.final), from files written by hand.

Window ends and closes around a frontier W = 12:02:00::

    tumbling/hopping  [12:01, 12:02)   closes at 12:02:00          final through W
    sliding           (12:01, 12:02]   closes at 12:02:00 + 1 µs   final through W − 1 µs
    analytic row      at S = 12:02     emitted once S < W          final through W − 1 µs
    join row          timed 12:02      emitted once 12:02 < W      final through W − 1 µs
"""

from __future__ import annotations

import json

import pytest

from tidegate.eventtime.durations import parse_time_us
from tidegate.eventtime.windows import START_INCLUSIVE, HoppingWindow, SessionWindow, SlidingWindow, TumblingWindow
from tidegate.jobspec import parse_spec
from tidegate.lineage.committed import has_committed_state
from tidegate.lineage.final import emitted_cut, final_through_us, job_final_through_us
from tidegate.lineage.layout import JobPaths, batch_folder_name, hour_dir, hour_of

MIN = 60_000_000
W = parse_time_us("2026-03-01T12:02:00Z")


@pytest.mark.parametrize(
    "window, floor, through",
    [
        # windows that include their end take an event at exactly W: final 1 µs after it
        (TumblingWindow(MIN), None, W - 1),
        (HoppingWindow(2 * MIN, MIN), None, W - 1),
        (SessionWindow(MIN, 10 * MIN), None, W - 1),
        (SlidingWindow(MIN), None, W - 1),
        # [start, end) windows are final at their end
        (TumblingWindow(MIN, edges=START_INCLUSIVE), None, W),
        (HoppingWindow(2 * MIN, MIN, edges=START_INCLUSIVE), None, W),
        (SessionWindow(MIN, 10 * MIN, START_INCLUSIVE), None, W),
        (None, None, W),  # events emitted as judged
        (TumblingWindow(MIN), W + MIN, W + MIN),  # never below the lineage's own output start
        (SlidingWindow(MIN), W - MIN, W - 1),  # a floor already passed changes nothing
    ],
)
def test_output_is_final_1us_short_of_the_frontier_and_through_it_for_start_inclusive_windows(window, floor, through):
    assert final_through_us(window, W, floor) == through


def spec(kind: str, **window):
    return parse_spec({
        "name": "fleet", "version": 1,
        "payload": {"deviceId": "string", "eventTime": "string", "v": "double"},
        "timestamp_by": "eventTime",
        "window": {"kind": kind, "size": "1m", **window},
        "group_by": ["deviceId"], "aggregates": {"n": "count(*)"},
    })  # fmt: skip


def write_lineage(root, frontier_us: int | None, *, visible_batches=(0, 1), uncommitted_version: int = 2) -> JobPaths:
    """A lineage as the engine leaves it: committed state versions, output folders, Spark's logs."""
    paths = JobPaths(root)
    for batch_id in visible_batches:
        version = paths.state_version(batch_id)
        version.mkdir(parents=True)
        frontier = None if frontier_us is None else frontier_us - (visible_batches[-1] - batch_id) * MIN
        (version / "_committed.json").write_text(json.dumps({"batch_id": batch_id, "frontier_us": frontier}))
        (hour_dir(paths.output, hour_of(W)) / batch_folder_name(batch_id)).mkdir(parents=True)
    paths.state_version(uncommitted_version).mkdir(parents=True)  # a crash before its _committed.json
    paths.commits.mkdir(parents=True)
    (paths.commits / str(visible_batches[-1])).write_text("v1\n{}")
    paths.offsets.mkdir(parents=True)
    meta = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'
    for batch_id in visible_batches:
        entry = {"v": 1, "offsets": {"0": 10 * (batch_id + 1), "1": 5 * (batch_id + 1)}, "clock": W}
        (paths.offsets / str(batch_id)).write_text(f"v1\n{meta}\n{json.dumps(entry)}\n")
    return paths


def test_the_cut_is_the_last_committed_frontier_and_the_last_visible_batch(tmp_path):
    write_lineage(tmp_path, W)
    cut = emitted_cut(tmp_path, spec("tumbling", edges="start_inclusive"))
    assert (cut.through_us, cut.batch_id, cut.end_offsets) == (W, 1, {0: 20, 1: 10})
    assert "final through 2026-03-01T12:02:00" in cut.describe()


def test_a_lineage_of_windows_that_include_their_end_is_final_1us_short_of_its_frontier(tmp_path):
    write_lineage(tmp_path, W)
    assert emitted_cut(tmp_path, spec("sliding")).through_us == W - 1
    assert emitted_cut(tmp_path, spec("tumbling")).through_us == W - 1


def test_before_any_frontier_the_cut_is_the_lineages_output_start(tmp_path):
    write_lineage(tmp_path, None)
    assert emitted_cut(tmp_path, spec("tumbling")).through_us is None
    assert emitted_cut(tmp_path, spec("tumbling"), floor_us=W).through_us == W


def test_a_purged_offset_log_leaves_the_end_offsets_unknown(tmp_path):
    paths = write_lineage(tmp_path, W)
    (paths.offsets / "1").unlink()
    assert emitted_cut(tmp_path, spec("tumbling")).end_offsets is None


def test_an_empty_lineage_has_emitted_nothing(tmp_path):
    cut = emitted_cut(tmp_path, spec("tumbling"))
    assert (cut.through_us, cut.batch_id, cut.end_offsets) == (None, None, None)
    assert cut.describe() == "nothing emitted yet"
    assert not has_committed_state(tmp_path)
    write_lineage(tmp_path, W)
    assert has_committed_state(tmp_path)


def test_analytic_rows_are_final_1us_short_of_the_frontier_never_below_the_output_start():
    spec = parse_spec(
        {
            "name": "rise",
            "version": 1,
            "payload": {"d": "string", "t": "double"},
            "analytics": {"prev_t": "LAG(t) OVER (PARTITION BY d LIMIT DURATION(minute, 10))"},
        }
    )
    assert job_final_through_us(spec, W) == W - 1  # a row at exactly W waits for the next step
    assert job_final_through_us(spec, W, W + MIN) == W + MIN


def test_join_rows_are_final_1us_short_of_the_frontier_as_analytic_rows_are():
    spec = parse_spec(
        {
            "name": "pay",
            "version": 1,
            "payload": {"kind": "string", "id": "string"},
            "inputs": {"orders": {"filter": "kind = 'order'"}, "payments": {"filter": "kind = 'payment'"}},
            "join": {
                "left": "orders",
                "right": "payments",
                "keys": ["orders.id = payments.id"],
                "within": "DATEDIFF(minute, orders, payments) BETWEEN 0 AND 15",
            },
            "select": {"id": "orders.id"},
        }
    )
    assert job_final_through_us(spec, W) == W - 1  # a row timed exactly W waits for the next step
    assert job_final_through_us(spec, W, W + MIN) == W + MIN


def test_a_job_with_steps_is_final_as_the_step_it_emits():
    """An analytic first step, then a [start, end) window: the output is window rows, final
    through W itself (a window ending at W is closed at W), not analytic rows' W − 1 µs."""
    rise = {"name": "rise", "analytics": {"prev_t": "LAG(t) OVER (PARTITION BY d LIMIT DURATION(minute, 10))"}}
    per_hour = {
        "name": "per_hour",
        "from": "rise",
        "aggregates": {"n": "count(*)"},
        "window": {"kind": "tumbling", "size": "1h", "edges": "start_inclusive"},
    }
    spec = parse_spec(
        {"name": "rises", "version": 1, "payload": {"d": "string", "t": "double"}, "steps": [rise, per_hour]}
    )
    assert job_final_through_us(spec, W) == W
    assert job_final_through_us(spec.emitted, W) == W and spec.emitted.window == spec.output_window
