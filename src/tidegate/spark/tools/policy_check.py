"""``tidegate query policy-check``: the per-event policy, verified from outside, on the Spark engine.

Input CSV: a header, a ``partition`` column, an ``arrival_time`` column and the event-time
column; rows in arrival order within each partition. Output CSV: every input column in
input order, then ``action``, ``reason``, ``system_timestamp`` and ``watermark`` (the
unit's watermark right after the event), one row per input row, same order.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tidegate.errors import ConfigError
from tidegate.eventtime import policy as P
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.spark.pipeline.parse import parse_batch
from tidegate.spark.pipeline.policy_stage import apply_policy_stage, split_outcomes

RAW_SCHEMA = "partition INT, offset BIGINT, arrival_time TIMESTAMP, key STRING, payload STRING"


@dataclass(frozen=True)
class Decision:
    action: str
    reason: str
    system_timestamp: str
    watermark: str


def read_rows(path: Path, timestamp_by: str, over: str | None) -> tuple[list[str], list[dict]]:
    if not path.exists():
        raise ConfigError(f"input file {path} does not exist", "give the path of a CSV file with a header row")
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        header = list(reader.fieldnames or [])
        rows = list(reader)
    for column in ("partition", "arrival_time", timestamp_by) + ((over,) if over else ()):
        if column not in header:
            raise ConfigError(
                f"{path}: no column {column!r} (columns: {', '.join(header) or 'none'})",
                "add the column, or name the event-time column with --timestamp-by",
            )
    for i, row in enumerate(rows, start=2):  # line 1 is the header
        for column in ("arrival_time", timestamp_by):
            try:
                parse_time_us(row[column], field=column)
            except ConfigError:
                raise ConfigError(
                    f"{path} line {i}: {column} {row[column]!r} is not an ISO-8601 time",
                    "write times like 2026-01-01T12:07:00Z (UTC when no offset is given)",
                ) from None
        if not row["partition"].strip().lstrip("-").isdigit():
            raise ConfigError(f"{path} line {i}: partition {row['partition']!r} is not a whole number", "use 0, 1, …")
    return header, rows


_TIME_TEXT = "_policy_check_time"


def decide(
    spark: SparkSession,
    rows: list[dict],
    policy: P.TimePolicy,
    timestamp_by: str,
    over: str | None,
) -> list[Decision]:
    """Run the rows through the Spark engine's parse and policy stages."""
    raw_rows = []
    last_arrival: dict[int, int] = {}
    for index, row in enumerate(rows):
        partition = int(row["partition"])
        arrival = parse_time_us(row["arrival_time"])
        if arrival < last_arrival.get(partition, arrival):
            raise ConfigError(
                f"input row {index + 1}: arrival_time goes backwards in partition {partition}",
                "rows must be in arrival order within each partition",
            )
        last_arrival[partition] = arrival
        fields_of_row = {k: v for k, v in row.items() if k not in ("partition", "arrival_time")}
        payload = json.dumps(fields_of_row | {_TIME_TEXT: row.get(timestamp_by)})
        # offset = input row index: keeps input order within a partition, and maps back
        raw_rows.append((partition, index, arrival, row.get(over) if over else None, payload))
    raw = spark.createDataFrame(raw_rows, "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING")
    raw = raw.select("partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload")
    # the time is read as text from a copy under a name of its own: a field named like an engine
    # column (the golden case's `event_time`) would be read twice
    fields = {_TIME_TEXT: "string"} | ({over: "string"} if over and over != timestamp_by else {})
    parsed = parse_batch(raw, fields, _TIME_TEXT)
    events = parsed.good.withColumns(
        {"arrival_us": F.unix_micros("arrival_time"), "event_us": F.unix_micros("event_time")}
    )
    if over:
        events = events.withColumn("_unit", F.col(over).cast("string"))
    partitions = sorted(last_arrival)
    result = apply_policy_stage(spark, events, partitions, None, policy, None, "_unit" if over else None)
    outcomes, _ = split_outcomes(result, events.columns)
    got = {r["offset"]: r for r in outcomes.select("offset", "action", "reason", "system_us", "watermark_us").collect()}
    if len(got) != len(rows):
        bad = parsed.bad.select("offset", "reason").collect()
        detail = ", ".join(f"row {r['offset'] + 1}: {r['reason']}" for r in bad[:5])
        raise ConfigError(f"{len(rows) - len(got)} input rows could not be judged ({detail})", "fix those rows")
    return [
        Decision(
            P.ACTION_NAMES[got[i]["action"]],
            P.REASON_NAMES[got[i]["reason"]],
            format_time_us(got[i]["system_us"]),
            format_time_us(got[i]["watermark_us"]),
        )
        for i in range(len(rows))
    ]


def write_decisions(path: Path, header: list[str], rows: list[dict], decisions: list[Decision]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header + ["action", "reason", "system_timestamp", "watermark"])
        for row, d in zip(rows, decisions, strict=True):  # decide() gives one decision per row
            writer.writerow([row[c] for c in header] + [d.action, d.reason, d.system_timestamp, d.watermark])
