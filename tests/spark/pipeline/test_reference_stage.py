"""The reference join through the engine: the golden transcript in one batch, in its
micro-batches with a new driver half way and in random cuts — each with the last snapshot
published only just before the first event of its time is processed (a refresh) — on CSV
and Parquet snapshots, inner and left; and a snapshot changed after it was joined."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from pyspark.sql import functions as F
from support import TRANSCRIPTS

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.eventtime.reference import snapshot_folder_name
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.engine import Engine

pytestmark = pytest.mark.spark
GOLDEN = yaml.safe_load((TRANSCRIPTS / "reference_golden.yaml").read_text())
RAW = "partition INT, offset BIGINT, arrival_us BIGINT, key STRING, payload STRING"
DAY = 86_400_000_000


def at(hhmm: str) -> int:
    return parse_time_us(f"{GOLDEN['date']}T{hhmm}:00Z")


def golden_spec(folder, fmt: str = "csv", kind: str = "left"):
    return parse_spec({
        "name": "reference-golden", "version": 1,
        "payload": {"id": "string", "device": "string", "eventTime": "string"},
        "timestamp_by": "eventTime",
        "reference": {"name": "devices", "path": str(folder), "format": fmt, "type": kind,
                      "columns": {"device": "string", "site": "string"}, "keys": ["device = devices.device"]},
        "select": {"id": "id", "site": "devices.site"},
    })  # fmt: skip


def publish(folder, valid_from: str, fmt: str = "csv") -> None:
    """One snapshot, written under a hidden name and renamed into place whole."""
    rows = GOLDEN["snapshots"][valid_from]
    hidden = folder / f".{valid_from}"
    hidden.mkdir(parents=True)
    if fmt == "csv":
        (hidden / "devices.csv").write_text("device,site\n" + "".join(f"{d},{s}\n" for d, s in rows))
    else:
        pq.write_table(pa.table({"device": [d for d, _ in rows], "site": [s for _, s in rows]}),
                       hidden / "devices.parquet")
    hidden.rename(folder / snapshot_folder_name(at(valid_from)))


def golden_rows() -> dict[str, tuple]:
    """event id → (partition, offset, arrival µs, key, payload), offsets per partition in order."""
    out, offsets = {}, {}
    for event_id, device, time, partition in GOLDEN["events"]:
        offset = offsets[partition] = offsets.get(partition, -1) + 1
        stamp = f"{GOLDEN['date']}T{time}:00Z"
        payload = {"id": event_id, "device": device, "eventTime": stamp}
        out[event_id] = (partition, offset, parse_time_us(stamp), None, json.dumps(payload))
    return out


def cuts() -> dict[str, list[list[str]]]:
    """Event ids per micro-batch: one batch; the transcript's; the arrival order cut at random."""
    ordered = [e[0] for e in sorted(GOLDEN["events"], key=lambda e: (at(e[2]), e[3]))]
    cut = sorted(np.random.default_rng(7).choice(np.arange(1, len(ordered)), 3, replace=False))
    return {"whole": [ordered], "transcript": GOLDEN["batches"],
            "random": [ordered[a:b] for a, b in zip([0, *cut], [*cut, len(ordered)])]}


def run(spark, tmp_path, name: str, batches: list[list[str]], fmt: str = "csv", kind: str = "left") -> list[list]:
    """The engine over ``batches``, a new driver half way when there are more than two; the
    late snapshot published just before the first batch holding an event of its time."""
    folder = tmp_path / f"ref-{name}"
    for valid_from in GOLDEN["snapshots"]:
        if valid_from != GOLDEN["published_late"]:
            publish(folder, valid_from, fmt)
    rows, late = golden_rows(), at(GOLDEN["published_late"])
    make = lambda: Engine(spark, golden_spec(folder, fmt, kind), JobPaths(tmp_path / name), [0, 1])  # noqa: E731
    engine = make()
    for batch_id, ids in enumerate(batches):
        if batch_id == len(batches) // 2 and len(batches) > 2:
            engine = make()  # a new driver
        if not (folder / snapshot_folder_name(late)).exists() and max(rows[i][2] for i in ids) >= late:
            publish(folder, GOLDEN["published_late"], fmt)
        batch = [rows[i] for i in ids]
        raw = spark.createDataFrame(batch, RAW).select(
            "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload")
        engine.process_batch(raw, batch_id, max(r[2] for r in batch))
    out = spark.read.parquet(str(engine.paths.output)).orderBy("partition", "offset", "site")
    return [[r.id, r.site, format_time_us(r.snap)[11:16] if r.snap is not None else None]
            for r in out.select("id", "site", F.unix_micros("reference_snapshot").alias("snap")).collect()]


def test_every_cut_of_the_stream_and_a_restart_join_the_golden_transcripts_snapshots(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", str(tmp_path))
    for name, batches in cuts().items():
        assert run(spark, tmp_path, name, batches) == GOLDEN["left"], name


def test_an_inner_join_on_parquet_snapshots_drops_the_events_nothing_matched(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", str(tmp_path))
    expected = [row for row in GOLDEN["left"] if row[1] is not None]
    assert run(spark, tmp_path, "inner", cuts()["whole"], fmt="parquet", kind="inner") == expected


def test_a_snapshot_changed_after_the_job_joined_it_stops_the_next_batch(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", str(tmp_path))
    folder = tmp_path / "ref"
    publish(folder, "12:00")
    rows = golden_rows()
    engine = Engine(spark, golden_spec(folder), JobPaths(tmp_path / "run"), [0, 1])
    raw = spark.createDataFrame([rows["e2"]], RAW).select(
        "partition", "offset", F.timestamp_micros("arrival_us").alias("arrival_time"), "key", "payload")
    engine.process_batch(raw, 0, rows["e2"][2])
    record = tmp_path / "run" / "reference" / "devices" / f"{snapshot_folder_name(at('12:00'))}.json"
    assert json.loads(record.read_text())["files"][0][0] == "devices.csv"
    (folder / snapshot_folder_name(at("12:00")) / "devices.csv").write_text("device,site\nd1,elsewhere\n")
    with pytest.raises(ConfigError, match="changed after the job joined it"):
        engine.process_batch(raw, 1, rows["e2"][2])
