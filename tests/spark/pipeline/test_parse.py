"""The parse stage (semantics §9): every payload is judged or quarantined with its reason.

Beyond "not JSON" and "no event time": payloads too large or nested too deep for the job's
limits (``source.max_payload_bytes``, ``source.max_payload_depth``), and numbers that are
not finite (NaN, ±Infinity) in double or float fields, which would otherwise turn every
aggregate they reach into NaN — or, as a JSON ``NaN`` token, silently into NULL.
"""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.jobspec import PayloadLimits, parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine
from tidegate.spark.pipeline.parse import parse_batch

pytestmark = pytest.mark.spark

FIELDS = {"deviceId": "string", "eventTime": "string", "temperature": "double", "ratio": "float", "count": "int"}
T0 = parse_time_us("2026-01-01T12:00:00Z")
TIME = format_time_us(T0)


def nested(depth: int) -> str:
    """An object ``depth`` levels deep: {"deviceId": "d", "eventTime": …, "x": {"x": … 1}}."""
    inner = '{"x": ' * (depth - 1) + "1" + "}" * (depth - 1)
    return f'{{"deviceId": "d", "eventTime": "{TIME}", "x": {inner}}}'


def reading(**raw: str) -> str:
    """A payload with its fields written as raw JSON text (so NaN tokens can be written)."""
    fields = {"deviceId": '"d"', "eventTime": f'"{TIME}"', "temperature": "21.5", **raw}
    return "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}"


def padded(size: int, pad: str = "x") -> str:
    """A good event's payload of exactly ``size`` bytes of UTF-8, padded with ``pad``."""
    head = f'{{"deviceId": "d", "eventTime": "{TIME}", "pad": "'
    room = size - len(head.encode()) - 2
    return head + pad * (room // len(pad.encode())) + "x" * (room % len(pad.encode())) + '"}'


def too_large(size: int, limit: str = "1,048,576") -> str:
    return f"payload_too_large: payload of {size:,} bytes exceeds max_payload_bytes {limit}"


NON_FINITE = "non_finite_number: non-finite number in field"
CASES = [  # (payload, expected quarantine reason or None when the event is judged)
    (reading(), None),
    (padded(1_048_576), None),  # exactly the limit
    (padded(1_048_577), too_large(1_048_577)),
    (padded(1_200_000, "é"), too_large(1_200_000)),  # 600,000 characters, but the limit counts bytes
    (nested(64), None),  # the deepest allowed
    (nested(65), "payload_too_deep: JSON nested deeper than 64 levels (max_payload_depth)"),
    ("[" * 70 + "]" * 70, "unparseable_payload"),  # deep, and not an object either: not an event
    (reading(temperature="NaN"), f"{NON_FINITE} temperature"),  # Jackson's non-standard token
    (reading(temperature='"NaN"'), f"{NON_FINITE} temperature"),  # text Spark casts to NaN
    (reading(temperature="Infinity"), f"{NON_FINITE} temperature"),
    (reading(temperature="-Infinity"), f"{NON_FINITE} temperature"),
    (reading(temperature="1e400"), f"{NON_FINITE} temperature"),  # overflows a double
    (reading(temperature='"-inf"'), f"{NON_FINITE} temperature"),
    (reading(ratio="1e39"), f"{NON_FINITE} ratio"),  # finite as a double, infinite as a float
    (reading(ratio="0.5", temperature='"nan"'), f"{NON_FINITE} temperature"),
    (reading(deviceId='"NaN"'), None),  # text in a string field is just text
    (reading(count="NaN"), None),  # an int cannot hold NaN: NULL in that column, as for any wrong type
    (reading(temperature="null"), None),  # a missing reading is NULL, which aggregates skip
    ("{not json", "unparseable_payload"),
]


def raw_batch(spark, payloads):
    rows = [(0, i, T0 + i, None, p) for i, p in enumerate(payloads)]
    df = spark.createDataFrame(rows, "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING")
    return df.select("partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload")


def reasons(parsed) -> dict[int, str | None]:
    return {r["offset"]: r["_reason"] for r in parsed.judged.select("offset", "_reason").collect()}


# both readers of the documents: Spark's from_json, and Spark's parser run on the JVM by Tidegate's jar
READERS = pytest.mark.parametrize("on_jvm", [False, True], ids=["from_json", "jvm"])


@READERS
def test_payloads_too_large_too_deep_or_with_non_finite_numbers_are_quarantined_with_the_reason(spark, on_jvm):
    payloads = [p for p, _ in CASES]
    parsed = parse_batch(raw_batch(spark, payloads), FIELDS, "eventTime", on_jvm=on_jvm)
    assert reasons(parsed) == {i: reason for i, (_, reason) in enumerate(CASES)}
    good = {r["offset"]: r for r in parsed.good.collect()}
    assert good[0]["temperature"] == 21.5 and good[1]["deviceId"] == good[4]["deviceId"] == "d"


@READERS
def test_headers_a_reader_did_not_decode_are_quarantined_and_decoded_ones_kept_beside_the_fields(spark, on_jvm):
    """A read with ``includeHeaders``: a NULL map is a record whose headers were past the readers'
    bounds (tidegate.inputs.kafka.headers), quarantined before anything reads them."""
    raw = raw_batch(spark, [reading(), reading(), "{not json"]).withColumn(
        "headers", F.expr("CASE offset WHEN 0 THEN map('tenant', 'acme') WHEN 1 THEN NULL ELSE map() END")
    )
    parsed = parse_batch(raw, FIELDS, "eventTime", on_jvm=on_jvm)
    assert reasons(parsed) == {
        0: None,
        1: "headers_too_large: more than 1,024 headers or 65,536 bytes of header names and values",
        2: "unparseable_payload",
    }
    (good,) = parsed.good.select("offset", F.col("headers")["tenant"].alias("tenant"), "temperature").collect()
    assert tuple(good) == (0, "acme", 21.5)
    assert "headers" not in parsed.bad.columns  # the quarantine keeps the input as before: position, payload


@READERS
def test_the_limits_are_the_jobs_settings(spark, on_jvm):
    small = PayloadLimits(max_payload_bytes=100, max_payload_depth=3)
    payloads = [padded(100), padded(101), nested(3), nested(4)]
    parsed = parse_batch(raw_batch(spark, payloads), FIELDS, "eventTime", limits=small, on_jvm=on_jvm)
    assert reasons(parsed) == {
        0: None,
        1: too_large(101, "100"),
        2: None,
        3: "payload_too_deep: JSON nested deeper than 3 levels (max_payload_depth)",
    }


ODD_BYTES = [  # payloads as bytes, where a reader and a string could part: every column must agree
    b'{"deviceId": "caf\xc3\xa9", "eventTime": "%s", "temperature": 1}',
    b'{"deviceId": "bad \xff\xfe utf-8 \xc3", "eventTime": "%s"}',  # malformed UTF-8, replaced
    b'{"deviceId": "cut \xe2\x82", "eventTime": "%s"}',  # a sequence cut short
    b'\xef\xbb\xbf{"deviceId": "bom", "eventTime": "%s"}',  # a byte-order mark first
    b'{"deviceId": "\\u00e9\\ud83d\\ude00", "eventTime": "%s"}',  # escapes, a surrogate pair
    b'{"deviceId": "\\ud83d", "eventTime": "%s"}',  # half a pair
    b'{"deviceId": "a", "deviceId": "b", "eventTime": "%s"}',  # a key twice
    b'{"DeviceId": "case", "eventTime": "%s"}',
    b'{"deviceId": {"nested": [1, 2.50, "x"]}, "eventTime": "%s", "temperature": 0021}',
    b'{"deviceId": "d", "eventTime": "%s", "temperature": 1.0E+2, "count": 12345678901234567890}',
    b'{"deviceId": "d", "eventTime": "%s"} trailing',
    b'{"deviceId": "d", "eventTime": "%s"}{"deviceId": "e"}',
    b"{'deviceId': 'single', \"eventTime\": \"%s\"}",
    b'{"deviceId": "d" /* comment */, "eventTime": "%s"}',
    b'{"deviceId": "tab\there", "eventTime": "%s"}',  # a raw control character in a string
    b'  \n{"deviceId": "spaced", "eventTime": "%s"}\n  ',
    b'[{"deviceId": "in an array", "eventTime": "%s"}]',
    b'"%s"',
    b"",
    b"   ",
    b"null",
    b'{"deviceId": null, "eventTime": "%s", "temperature": true}',
    b'{"deviceId": "' + b"y" * 40_000 + b'", "eventTime": "%s"}',  # longer than Jackson's string buffer
]


def test_the_jvm_reader_gives_every_payload_the_documents_from_json_gives(spark):
    payloads = [p.replace(b"%s", TIME.encode()) for p in ODD_BYTES]
    rows = [(0, i, T0 + i, None, bytearray(p)) for i, p in enumerate(payloads)]
    df = spark.createDataFrame(rows, "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, raw BINARY")
    raw = df.select(
        "partition",
        "offset",
        F.timestamp_micros("arrival_us").alias("arrival_time"),
        "key",
        F.col("raw").cast("string").alias("payload"),
    )  # the bytes as they are, malformed or not
    parsed = [parse_batch(raw, FIELDS, "eventTime", on_jvm=on_jvm).judged for on_jvm in (False, True)]
    leaves = [p._jdf.queryExecution().optimizedPlan().toString().strip().splitlines()[-1] for p in parsed]
    assert "_doc" not in leaves[0] and "_doc" in leaves[1]  # two readers indeed: the JVM's rows come with it
    by_reader = [sorted(p.collect()) for p in parsed]
    assert len(by_reader[0]) == len(payloads)
    assert by_reader[1] == by_reader[0]
    judged = {r["offset"]: r for r in by_reader[1]}
    assert judged[0]["deviceId"] == "café" and judged[1]["deviceId"].startswith("bad \ufffd")
    assert judged[17]["_reason"] == judged[18]["_reason"] == "unparseable_payload"


def test_the_engine_keeps_running_counts_every_event_and_no_nan_reaches_an_aggregate(spark, tmp_path):
    spec = parse_spec({
        "name": "bad-readings", "version": 1,
        "payload": {"deviceId": "string", "eventTime": "string", "temperature": "double"},
        "timestamp_by": "eventTime",
        "window": {"kind": "tumbling", "size": "1m"},
        "group_by": ["deviceId"],
        "aggregates": {"events": "count(*)", "avg_t": "avg(temperature)", "max_t": "max(temperature)"},
    })  # fmt: skip

    def event(i: int, temperature: str) -> str:  # i + 1 s after T0: inside the window (T0, T0 + 1m]
        return reading(eventTime=json.dumps(format_time_us(T0 + (i + 1) * 1_000_000)), temperature=temperature)

    good = [event(i, str(20 + i)) for i in range(4)]  # 20, 21, 22, 23
    bad = [event(4, "NaN"), event(5, "Infinity"), event(6, '"NaN"'), nested(65), padded(1_048_577)]
    engine = Engine(spark, spec, JobPaths(tmp_path), [0])
    report = engine.process_batch(raw_batch(spark, good + bad), 0, T0 + 3_600_000_000)  # clock: an hour on

    assert report.input_events == len(good) + len(bad) and report.quarantined == len(bad)
    counts = report.counts[0]
    assert counts["input"] == counts["judged"] + counts["quarantined"] == len(good) + len(bad)
    [row] = spark.read.parquet(str(engine.paths.output)).collect()
    assert (row["events"], row["avg_t"], row["max_t"]) == (4, 21.5, 23.0)
    q = {r["offset"]: r["reason"] for r in spark.read.parquet(str(engine.paths.quarantine)).collect()}
    assert sorted(q) == [4, 5, 6, 7, 8]
    assert q[4] == q[5] == q[6] == "non_finite_number: non-finite number in field temperature"
    assert q[7].startswith("payload_too_deep") and q[8].startswith("payload_too_large")


def test_the_engine_applies_the_jobs_own_limits(spark, tmp_path):
    spec = parse_spec({
        "name": "small-payloads", "version": 1,
        "source": {"max_payload_bytes": 300},
        "payload": {"deviceId": "string", "eventTime": "string", "temperature": "double"},
        "timestamp_by": "eventTime",
    })  # fmt: skip
    ok = reading(eventTime=json.dumps(format_time_us(T0)), temperature="20")
    engine = Engine(spark, spec, JobPaths(tmp_path), [0])
    report = engine.process_batch(raw_batch(spark, [ok, padded(301)]), 0, T0 + 60_000_000)
    assert report.quarantined == 1
    [q] = spark.read.parquet(str(engine.paths.quarantine)).collect()
    assert q["reason"] == too_large(301, "300")
