"""Which columns name a row of a job's output when two outputs are compared (semantics §8):
a cross-applied row is its event's position and its place in the event."""

from __future__ import annotations

from tidegate.jobspec import parse_spec
from tidegate.jobspec.model import has_position
from tidegate.validation.comparison import Layout

BASE = {
    "name": "batched", "version": 1, "timestamp_by": "eventTime",
    "payload": {"deviceId": "string", "eventTime": "string", "readings": "array<double>"},
}  # fmt: skip


def test_a_per_event_row_is_named_by_its_event_s_position():
    layout = Layout.of(parse_spec(BASE | {"select": {"d": "deviceId"}}))
    assert (layout.keys, layout.aggregates) == (("partition", "offset"), ("d",))


def test_a_cross_applied_row_is_named_by_its_event_s_position_and_its_index_in_the_event():
    spec = parse_spec(BASE | {"cross_apply": {"name": "a", "elements": "readings"}})
    layout = Layout.of(spec)
    assert layout.keys == ("partition", "offset", "cross_apply_index")
    assert layout.aggregates == ("a", "deviceId", "eventTime", "readings")  # the element, then the event's fields
    selected = Layout.of(parse_spec(spec.to_dict() | {"select": {"v": "a.ArrayValue"}}))
    assert (selected.keys, selected.aggregates) == (("partition", "offset", "cross_apply_index"), ("v",))


def test_a_per_event_step_s_row_is_named_by_its_position_or_without_one_by_all_its_columns():
    """A per-event step over the job's events keeps each event's position; one over a window
    step's rows has none (a window row is no one event's): its rows are named by their time and
    every column, so two different rows at one window end are two rows, not a duplicate."""
    readings = BASE | {"payload": {"deviceId": "string", "eventTime": "string", "temperature": "double"}}
    minutes = {"name": "minutes", "window": {"kind": "tumbling", "size": "10m"}, "group_by": ["deviceId"],
               "aggregates": {"n": "count(*)"}}  # fmt: skip
    busy = {"name": "busy", "from": "minutes", "filter": "n > 2", "select": {"deviceId": "deviceId", "n": "n"}}
    hot = {"name": "hot", "from": "input", "filter": "temperature > 30", "select": ["deviceId"]}
    spec = parse_spec(readings | {"steps": [minutes, busy, hot], "sinks": {"output": {"step": "busy"},
                                  "outputs": {"hot": {"step": "hot"}}}})  # fmt: skip
    assert [has_position(spec, n) for n in ("minutes", "busy", "hot")] == [False, False, True]
    over_windows = Layout.of(spec.output_view("output"), positioned=False)
    assert (over_windows.keys, over_windows.aggregates, over_windows.time) == (("deviceId", "n"), (), "system_time")
    assert over_windows.not_null == ("window_start", "window_end")  # its NULL position is no finding
    over_events = Layout.of(spec.output_view("hot"))
    assert (over_events.keys, over_events.aggregates) == (("partition", "offset"), ("deviceId",))
