"""A Kafka record's headers as the built-in column ``headers``: what every reader makes of them
(tidegate.inputs.kafka.headers, the JVM reader's KafkaHeaders.java, the connector's mapping)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tidegate.inputs.event_log.reader import EVENT_HEADERS_SCHEMA, EVENT_SCHEMA, with_headers
from tidegate.inputs.kafka.headers import MAX_HEADER_BYTES, MAX_HEADERS, decode_headers, headers_array


@pytest.mark.parametrize(
    ("record", "column"),
    [
        (None, {}),  # a record without headers: the empty map
        ([], {}),
        ([("tenant", b"acme")], {"tenant": "acme"}),
        ([("tenant", b"acme"), ("tenant", b"globex")], {"tenant": "globex"}),  # the last value, as lastHeader
        ([("trace", None)], {"trace": None}),  # a header without a value: NULL
        ([("trace", b"t-1"), ("trace", None)], {"trace": None}),  # a later null value wins too
        ([("v", b"\xffok\xed\xa0\x80")], {"v": "\ufffdok\ufffd\ufffd\ufffd"}),  # invalid UTF-8: U+FFFD, as "replace"
        ([(b"\xc0name", b"x")], {"\ufffdname": "x"}),  # a name read as bytes is decoded the same way
        ([("b", b"2"), ("a", b"1"), ("é", b"3"), ("B", b"4")], {"B": "4", "a": "1", "b": "2", "é": "3"}),
    ],
)
def test_a_records_headers_become_one_entry_per_name_with_its_last_value(record, column):
    decoded = decode_headers(record)
    assert decoded == column
    assert list(decoded or {}) == sorted(column, key=lambda n: n.encode())  # ordered by the names' UTF-8 bytes


def test_headers_past_the_bounds_are_not_decoded_and_the_column_is_null():
    assert decode_headers([(f"h{i}", b"") for i in range(MAX_HEADERS)]) is not None
    assert decode_headers([(f"h{i}", b"") for i in range(MAX_HEADERS + 1)]) is None
    assert decode_headers([("h", b"x")] * (MAX_HEADERS + 1)) is None  # counted as sent, a repeated name included
    assert decode_headers([("h", b"x" * (MAX_HEADER_BYTES - 1))]) is not None
    assert decode_headers([("h", b"x" * MAX_HEADER_BYTES)]) is None  # name and value bytes together
    assert decode_headers([("h", b"\xff" * (MAX_HEADER_BYTES // 3 + 1))]) is None  # as decoded: U+FFFD is 3 bytes


def test_a_batch_carries_the_headers_column_and_the_embedded_logs_events_the_empty_map():
    batch = pa.RecordBatch.from_pylist(
        [{"partition": 0, "offset": o, "arrival_time": None, "key": None, "payload": "{}"} for o in range(3)],
        schema=EVENT_SCHEMA,
    )
    assert with_headers(batch).schema == EVENT_HEADERS_SCHEMA
    assert with_headers(batch).column("headers").to_pylist() == [[], [], []]
    given = headers_array([{"a": "1", "n": None}, None, {}])
    assert with_headers(batch, given).column("headers").to_pylist() == [[("a", "1"), ("n", None)], None, []]
