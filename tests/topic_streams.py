"""A topic streamed through the ``tidegate`` source into memory, batch by batch, or a read of it
that must fail: what the Kafka reader tests compare and assert (tests/inputs/kafka)."""

from __future__ import annotations

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from tidegate.lineage.offsets import batch_offsets
from tidegate.spark.pipeline.read import read_log_stream


def stream(spark, topic, checkpoint, reader: str, headers: bool = False, **options) -> list[dict]:
    """Run the source over ``topic`` with Trigger.AvailableNow; per batch: its rows and recorded offsets.
    With ``headers``, read with ``includeHeaders``: each row ends with its headers' (name, value) pairs, in
    the map's order."""
    seen = []
    if headers:
        options["includeHeaders"] = "true"

    def each(df, batch_id):
        rows = df.select("partition", "offset", F.unix_micros("arrival_time"), "key", "payload",
                         *([F.map_entries("headers")] if headers else [])).collect()  # fmt: skip
        if headers:
            rows = [(*r[:5], None if r[5] is None else tuple((e[0], e[1]) for e in r[5])) for r in rows]
        start, end = batch_offsets(checkpoint, batch_id)
        seen.append({"rows": sorted(tuple(r) for r in rows), "start": start, "end": end})

    df = read_log_stream(spark, topic.source_options() | options, reader=reader)
    query = (
        df.writeStream.foreachBatch(each)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    return seen


def failed_read(spark, topic, checkpoint) -> str:
    """Read ``topic`` on the JVM reader into the noop sink, which must fail: the error's text."""
    query = (
        read_log_stream(spark, topic.source_options(), reader="jvm").writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    )  # fmt: skip
    with pytest.raises(PySparkException) as info:
        query.awaitTermination(120)
    return str(info.value)
