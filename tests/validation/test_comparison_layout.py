"""Which columns name a row of a job's output when two outputs are compared (semantics §8):
a cross-applied row is its event's position and its place in the event."""

from __future__ import annotations

from tidegate.jobspec import parse_spec
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
