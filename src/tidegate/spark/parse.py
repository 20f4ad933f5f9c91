"""Payload parsing (SPEC §9): split a batch into events the policy can judge and bad input.

Bad input — a payload that is not a JSON object, an event without its event-time field,
or one whose time cannot be read — goes to quarantine with the reason and its input
position. Nothing is dropped here silently.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

# reasons written to the quarantine output
UNPARSEABLE_PAYLOAD = "unparseable_payload"
MISSING_EVENT_TIME = "missing_event_time"
UNPARSEABLE_EVENT_TIME = "unparseable_event_time"

INPUT_COLUMNS = ("partition", "offset", "arrival_time", "key", "payload")


@dataclass(frozen=True)
class ParsedBatch:
    good: DataFrame  # partition, offset, arrival_time, key, event_time, <payload fields>
    bad: DataFrame  # partition, offset, arrival_time, key, payload, reason


def _json_string(name: str) -> str:
    return "'" + name.replace("\\", "\\\\").replace("'", "\\'") + "'"


def read_field(variant: Column, name: str, sql_type: str) -> Column:
    """A payload field as ``sql_type``; NULL when absent or not convertible."""
    path = "$[" + _json_string(name).replace("'", '"') + "]"
    if sql_type.lower() in ("timestamp", "date"):
        return F.try_variant_get(variant, path, "string").try_cast(sql_type)
    return F.try_variant_get(variant, path, sql_type)


def parse_time(text: Column, time_format: str | None) -> Column:
    if time_format:
        return F.try_to_timestamp(text, F.lit(time_format))
    return text.try_cast("timestamp")


def parse_batch(
    raw: DataFrame,
    payload_fields: dict[str, str],
    timestamp_by: str | None,
    time_format: str | None = None,
) -> ParsedBatch:
    """Parse ``payload`` JSON into typed columns and the event time (``E = A`` without
    ``timestamp_by``), keeping the input position of every row."""
    variant = F.try_parse_json("payload")
    is_object = F.ltrim(F.col("payload")).startswith("{") & variant.isNotNull()
    fields = [read_field(F.col("_v"), name, typ).alias(name) for name, typ in payload_fields.items()]
    with_v = raw.select(*INPUT_COLUMNS, variant.alias("_v"), is_object.alias("_is_object"))
    if timestamp_by is None:
        event_time = F.col("arrival_time")
        time_text = F.lit("")
    else:
        path = "$[" + _json_string(timestamp_by).replace("'", '"') + "]"
        time_text = F.try_variant_get(F.col("_v"), path, "string")
        event_time = parse_time(time_text, time_format)
    reason = (
        F.when(~F.col("_is_object"), F.lit(UNPARSEABLE_PAYLOAD))
        .when(time_text.isNull(), F.lit(MISSING_EVENT_TIME))
        .when(event_time.isNull(), F.lit(UNPARSEABLE_EVENT_TIME))
    )
    judged = with_v.select(
        *INPUT_COLUMNS, reason.alias("_reason"), event_time.alias("event_time"), *fields
    )
    good = judged.where(F.col("_reason").isNull()).drop("_reason", "payload")
    bad = judged.where(F.col("_reason").isNotNull()).select(*INPUT_COLUMNS, F.col("_reason").alias("reason"))
    return ParsedBatch(good=good, bad=bad)
