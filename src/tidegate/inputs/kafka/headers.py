"""A Kafka record's headers as the built-in column ``headers`` (``map<string,string>``).

Every reader turns a record's headers into the same map (this module in Python; the JVM
reader's ``KafkaColumns.java``; :func:`tidegate.spark.kafka.from_kafka_columns` over Spark's
connector):

* one entry per name holding the name's **last** value (as Kafka's ``Headers.lastHeader``),
  entries ordered by name (by their UTF-8 bytes, as Spark orders text), so that every reader
  writes the same map;
* names and values decoded as UTF-8, invalid bytes replaced by U+FFFD; a header without a
  value (null) maps its name to NULL;
* a record without headers (and every event of the embedded log) has the empty map;
* headers beyond :data:`MAX_HEADERS` in number or :data:`MAX_HEADER_BYTES` bytes of names and
  values (UTF-8, as decoded) are not decoded at all: the column is NULL, and the event goes to
  quarantine (``headers_too_large``, :mod:`tidegate.spark.pipeline.parse`). A hostile record
  cannot make a reader hold more than that.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pyarrow as pa

from tidegate.inputs.event_log.reader import HEADERS_TYPE

MAX_HEADERS = 1024
MAX_HEADER_BYTES = 65536

Headers = dict[str, str | None]
Pairs = Iterable[tuple[str | bytes, str | bytes | None]]


def text(raw: str | bytes) -> str:
    """A header's name or value as text: UTF-8, invalid bytes replaced by U+FFFD."""
    return raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "replace")


def decode_headers(headers: Pairs | Mapping[str, str | bytes | None] | None) -> Headers | None:
    """A record's headers (``(name, value)`` pairs in record order, as confluent-kafka gives them;
    None for none) as the column's map; None when they exceed the bounds (see the module docstring)."""
    out: Headers = {}
    size = 0
    pairs = headers.items() if isinstance(headers, Mapping) else headers or ()
    for count, (name, value) in enumerate(pairs, start=1):
        key, decoded = text(name), None if value is None else text(value)
        size += len(key.encode()) + (0 if decoded is None else len(decoded.encode()))
        if count > MAX_HEADERS or size > MAX_HEADER_BYTES:
            return None
        out[key] = decoded  # the last value of a name wins
    return dict(sorted(out.items()))


def headers_array(rows: Iterable[Headers | None]) -> pa.Array:
    """The ``headers`` column of a batch, one map (or NULL) per row."""
    return pa.array([None if r is None else list(r.items()) for r in rows], type=HEADERS_TYPE)
