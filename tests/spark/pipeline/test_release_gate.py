"""The release gate: which jobs it may hold, and when it holds a caught-up job's triggers."""

from __future__ import annotations

import pytest

from tidegate.jobspec import parse_spec
from tidegate.spark.pipeline.release_gate import ReleaseGate, release_window

S = 1_000_000
BASE = {
    "name": "gated",
    "version": 1,
    "payload": {"deviceId": "string", "eventTime": "string", "temperature": "double"},
    "timestamp_by": "eventTime",
}
WINDOWED = BASE | {"window": {"kind": "tumbling", "size": "1m"}, "aggregates": {"n": "count(*)"}}


@pytest.mark.parametrize(
    "extra, held",
    [
        ({}, True),
        ({"window": {"kind": "hopping", "size": "1m", "hop": "20s"}}, True),
        ({"over": "deviceId", "group_by": ["deviceId"]}, True),
        ({"window": {"kind": "sliding", "size": "1m"}}, False),
        ({"window": {"kind": "session", "gap": "1m", "max_duration": "10m"}}, False),
        ({"watermark": {"percentile": 90}}, False),
        (
            {
                "window": None,
                "aggregates": None,
                "steps": [
                    {"name": "minutes", "window": {"kind": "tumbling", "size": "1m"}, "aggregates": {"n": "count(*)"}},
                    {
                        "name": "hours",
                        "from": "minutes",
                        "window": {"kind": "tumbling", "size": "1h"},
                        "aggregates": {"n": "sum(n)"},
                    },
                ],
            },
            False,
        ),
    ],
    ids=["tumbling", "hopping", "substreams", "sliding", "session", "percentile", "later-steps"],
)
def test_only_a_job_whose_rows_a_fixed_windows_ends_release_is_held(extra, held):
    spec = {k: v for k, v in (WINDOWED | extra).items() if v is not None}
    assert (release_window(parse_spec(spec)) is not None) is held


def test_a_per_event_job_is_never_held():
    assert release_window(parse_spec(BASE | {"select": {"t": "temperature"}})) is None


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_it_admits_every_trigger_until_the_job_has_caught_up():
    clock = Clock()
    gate = ReleaseGate(30.0, clock)
    gate.after_batch(50 * S, 0.5)
    assert gate.admits()
    assert gate.engage()  # the first engagement is news (the driver says so once)
    assert not gate.admits()
    assert not gate.engage()


def test_it_holds_until_the_nearest_watermark_is_due_at_the_next_window_end():
    """The batch read its input 0.5 s before it ended, 20 s of event time short of a window
    end: the input is read again 19.5 s after the batch."""
    clock = Clock()
    gate = ReleaseGate(30.0, clock)
    gate.engage()
    gate.after_batch(20 * S, 0.5)
    clock.now += 19.4
    assert not gate.admits()
    clock.now += 0.1
    assert gate.admits()
    assert gate.held_triggers == 1


def test_it_holds_no_longer_than_the_stretch_after_a_batch():
    clock = Clock()
    gate = ReleaseGate(30.0, clock)
    gate.engage()
    gate.after_batch(55 * S, 0.5)
    clock.now += 29.9
    assert not gate.admits()
    clock.now += 0.1
    assert gate.admits()


def test_with_no_unit_known_or_a_window_already_due_it_reads_at_the_next_trigger():
    clock = Clock()
    gate = ReleaseGate(30.0, clock)
    gate.engage()
    gate.after_batch(None, 0.5)
    assert gate.admits()
    gate.after_batch(1, 2.0)  # a watermark 1 µs short when the batch read: due since
    assert gate.admits()


def test_a_gate_needs_a_stretch():
    with pytest.raises(ValueError, match="positive stretch"):
        ReleaseGate(0.0)
