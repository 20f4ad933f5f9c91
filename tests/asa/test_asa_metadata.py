"""``GetMetadataPropertyValue(input, 'property')``: a user property is a Kafka record header,
``headers['name']``; the enqueued time, partition and offset are the built-in columns; any
other property is refused naming it and what is translated."""

from __future__ import annotations

import pytest

from tidegate.asa.translate import translate
from tidegate.errors import ConfigError
from tidegate.jobspec import parse_spec
from tidegate.jobspec.spec_expressions import reads_headers


def fields(query: str) -> dict:
    ((step,),) = [t.steps for t in translate(query, "q.asaql")]
    return step.fields


def test_user_properties_are_headers_and_the_system_properties_the_built_in_columns():
    step = fields(
        "SELECT deviceId, GetMetadataPropertyValue(i, '[User].[trace-id]') AS trace,\n"
        "    GetMetadataPropertyValue(i, 'EventEnqueuedUtcTime') AS enqueued INTO o FROM input i TIMESTAMP BY t\n"
        "WHERE GetMetadataPropertyValue(i, 'PartitionId') = 1 AND GetMetadataPropertyValue(i, 'offset') > 3"
    )
    assert step == {
        "filter": "partition = 1 AND offset > 3",
        "select": {"deviceId": "deviceId", "trace": "headers['trace-id']", "enqueued": "arrival_time"},
    }


def test_a_window_grouped_by_a_header_reads_the_headers_and_loads_as_a_spec():
    step = fields(
        "SELECT GetMetadataPropertyValue(input, '[user].[tenant]') AS tenant, COUNT(*) AS n INTO o\n"
        "FROM input TIMESTAMP BY t GROUP BY GetMetadataPropertyValue(input, '[User].[tenant]'), "
        "TumblingWindow(minute, 1)"
    )
    assert step["group_by"] == [{"tenant": "headers['tenant']"}]
    spec = parse_spec({"name": "tenants", "version": 1, "payload": {"t": "string"}, "timestamp_by": "t"} | step)
    assert reads_headers(spec)


@pytest.mark.parametrize(
    ("call", "words"),
    [
        ("GetMetadataPropertyValue(input, 'EventId')", "the metadata property 'EventId' has no Tidegate form"),
        ("GetMetadataPropertyValue(input, '[EventHub].[IoTConnectionDeviceId]')", "'[EventHub].[IoTConnectionDevice"),
        ("GetMetadataPropertyValue(other, 'PartitionId')", "the first argument is not the input the query reads"),
        ("GetMetadataPropertyValue(input, PartitionId)", "takes the input and a property's name as text"),
        ("GetMetadataPropertyValue(input)", "takes the input and a property's name as text"),
    ],
)
def test_any_other_property_is_refused_naming_it_and_what_is_translated(call, words):
    with pytest.raises(ConfigError) as refused:
        translate(f"SELECT deviceId,\n    {call} AS x INTO o FROM input", "q.asaql")
    assert refused.value.problem.startswith("q.asaql:2:5: GetMetadataPropertyValue(")
    assert words in refused.value.problem
    if "first argument" not in words:  # a property that is not translated: the fix lists those that are
        assert "'[User].[name]' (headers['name']), 'EventEnqueuedUtcTime' (arrival_time)" in refused.value.fix


def test_metadata_of_a_joined_input_is_refused():
    with pytest.raises(ConfigError) as refused:
        translate(
            "SELECT o.id, GetMetadataPropertyValue(o, 'PartitionId') AS p INTO out FROM orders o\n"
            "JOIN payments p ON o.id = p.id AND DATEDIFF(minute, o, p) BETWEEN 0 AND 15",
            "q.asaql",
        )
    assert "GetMetadataPropertyValue in a join" in refused.value.problem
