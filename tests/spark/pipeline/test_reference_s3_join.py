"""The reference join with its snapshots on S3 (a real S3-compatible server): the example job as
a stream across a restart — a snapshot published between the runs, and one being written that
no run may see — equals the batch path, as with snapshots in a local folder."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from s3 import BUCKETS, region_env
from tidegate.eventtime.durations import parse_time_us
from tidegate.eventtime.reference import snapshot_folder_name
from tidegate.inputs.reference_s3 import PUBLISHED
from tidegate.jobspec import load_spec, parse_spec
from tidegate.storage import aws

pytestmark = [pytest.mark.spark, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[3]


def test_a_reference_join_on_s3_snapshots_as_a_stream_across_a_restart_equals_the_batch_path(
    spark, s3_stores, tmp_path, monkeypatch
):
    from platform_support import fill
    from tidegate.spark.pipeline.runner import run_batch, run_stream
    from tidegate.spark.tools.compare import compare

    store = s3_stores["east"]
    for name, value in region_env("reference", store).items():
        monkeypatch.setenv(name, value)
    top = f"s3a://{BUCKETS['east']}/reference-{time.time_ns()}"
    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", f"{REPO / 'jobs'}:{top}")
    client, bucket, prefix = aws.client(store.settings()), BUCKETS["east"], top.split("/", 3)[3] + "/devices"
    start, s = parse_time_us("2026-03-01T12:00:00Z"), 1_000_000
    tables = {
        0: [(f"dev-{i:04d}", f"a{i}", 21.0) for i in range(6)],
        40 * s: [(f"dev-{i:04d}", f"b{i}", 20.0) for i in range(2, 8)] + [("dev-0003", "b3-annex", 22.0)],
        220 * s: [(f"dev-{i:04d}", f"c{i}", 23.0) for i in range(8)],
    }

    def put(offset_us: int, name: str, body: bytes) -> None:
        key = f"{prefix}/{snapshot_folder_name(start + offset_us)}/{name}"
        client.put_object(Bucket=bucket, Key=key, Body=body)

    def publish(offset_us: int) -> None:
        rows = "".join(f"{d},{site},{t}\n" for d, site, t in tables[offset_us])
        put(offset_us, "devices.csv", f"deviceId,site,max_temperature\n{rows}".encode())
        put(offset_us, PUBLISHED, b"")  # last: the snapshot is there

    job = load_spec(REPO / "jobs" / "device_over_limit.yaml").to_dict()
    spec = parse_spec(job | {"reference": job["reference"] | {"path": f"{top}/devices"}, "filter": None})
    publish(0)
    publish(40 * s)
    put(100 * s, "devices.csv", b"deviceId,site,max_temperature\ndev-0001,never,1.0\n")  # never published
    event_log = tmp_path / "event-log"
    fill(event_log, 150, seed=5, start_us=start)
    first = run_stream(spark, spec, event_log, tmp_path / "run", extra_options={"maxEventsPerBatch": "60"})
    publish(220 * s)  # a refresh, before the readings of its time arrive
    fill(event_log, 150, seed=6, start_us=start + 200 * s)
    second = run_stream(spark, spec, event_log, tmp_path / "run", extra_options={"maxEventsPerBatch": "90"})
    assert first.batches + second.batches >= 3
    reference = spark.read.parquet(str(run_batch(spark, spec, event_log, tmp_path / "batch").paths.output))
    diff = compare(reference, spark.read.parquet(str(tmp_path / "run" / "output")))
    assert diff.equal, diff
    snapshots = {r.snap for r in reference.select(F.unix_micros("reference_snapshot").alias("snap")).collect()}
    assert snapshots - {None} == {start + t for t in tables}  # each published snapshot joined; the unpublished none
    assert reference.where("site = 'b3-annex'").count() > 0 and reference.where("site = 'never'").count() == 0
