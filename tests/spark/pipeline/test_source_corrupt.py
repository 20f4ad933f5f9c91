"""A damaged frame under real Spark, through both readers: ``fail`` names it, ``quarantine`` skips and records it.

partition 0:  [0–4] [5–9] [10–14] [15–19]    5–9: a payload byte flipped (found by the executor)
                                             10–14: a header byte flipped (found by the planner's index)
partition 1:  [0–4] [5–9] [10–14] [15–19]    healthy
"""

from __future__ import annotations

import json

import pytest
from pyspark.errors import PySparkException

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import parse_time_us
from tidegate.inputs.event_log import EventLog
from tidegate.inputs.event_log.segments import PartitionIndex, partition_dir_name
from tidegate.inputs.event_log.verify import repair
from tidegate.jobspec import parse_spec
from tidegate.spark.pipeline.java_source import READER_ENV
from tidegate.spark.pipeline.read import read_log_stream
from tidegate.spark.pipeline.runner import _source_options

pytestmark = pytest.mark.spark
T0 = parse_time_us("2026-03-01T12:00:00Z")


@pytest.fixture(params=["jvm", "python"])
def reader(request, monkeypatch):
    monkeypatch.setenv(READER_ENV, request.param)
    return request.param


@pytest.fixture
def damaged(tmp_path):
    log = EventLog.create(tmp_path / "event-log", partitions=2, clock="manual")
    for i in range(4):
        for p in range(2):
            offsets = range(5 * i, 5 * i + 5)
            log.append(p, [f"k{o}" for o in offsets], [json.dumps({"p": p, "o": o}) for o in offsets],
                       arrival_times=[T0 + o for o in offsets])  # fmt: skip
    log.advance_clock(T0 + 60_000_000)
    index = PartitionIndex(log.root / partition_dir_name(0), 0)
    index.refresh()
    frames = {f.first_offset: (path, f) for path, f in index.frames()}
    for offset, at in ((5, frames[5][1].payload_position + 30), (10, frames[10][1].position + 12)):
        path = frames[offset][0]
        data = bytearray(path.read_bytes())
        data[at] ^= 0xFF
        path.write_bytes(bytes(data))
    return log, frames


def stream(spark, log: EventLog, checkpoint, **options) -> list[tuple[int, int]]:
    """Every (partition, offset) the stream delivers, reading the whole log once."""
    seen: list[tuple[int, int]] = []
    query = (
        read_log_stream(spark, {"event_log": str(log.root), **options}).writeStream
        .foreachBatch(lambda df, _: seen.extend(tuple(r) for r in df.select("partition", "offset").collect()))
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination(180)
    if query.exception() is not None:
        raise query.exception()
    return sorted(seen)


GOOD = sorted([(0, o) for o in [*range(5), *range(15, 20)]] + [(1, o) for o in range(20)])


def test_a_damaged_frame_fails_the_batch_naming_it_until_it_is_repaired(spark, tmp_path, reader, damaged):
    log, _ = damaged
    with pytest.raises(PySparkException) as info:
        stream(spark, log, tmp_path / "ck-fail")
    message = str(info.value)
    assert "partition 0: offsets " in message and "cannot be read" in message
    assert "tidegate event-log repair" in message and "on_corrupt_frame: quarantine" in message

    repair(log)  # the operator moves the damage aside: its offsets become holes every reader skips
    assert stream(spark, log, tmp_path / "ck-repaired") == GOOD


def test_quarantine_skips_damaged_frames_records_them_and_reads_on(spark, tmp_path, reader, damaged):
    log, frames = damaged
    records = tmp_path / "corrupt_frames"
    got = stream(spark, log, tmp_path / "ck", onCorruptFrame="quarantine", corruptFramePath=str(records))
    assert got == GOOD

    found = sorted((json.loads(p.read_text()) for p in records.glob("*.json")), key=lambda r: r["offset"])
    assert [(r["reason"], r["partition"], r["offset"], r["end_offset"]) for r in found] == [
        ("corrupt frame", 0, 5, 10), ("corrupt frame", 0, 10, 15),
    ]  # fmt: skip
    for r in found:
        path, frame = frames[r["offset"]]
        assert (r["segment"], r["byte_position"]) == (str(path), frame.position)
    assert "CRC" in found[0]["problem"] and "header fails its CRC check" in found[1]["problem"]


def test_a_job_spec_chooses_what_its_source_does_at_a_damaged_frame(tmp_path):
    base = {"name": "j", "version": 1, "payload": {"a": "int"}}
    assert _source_options(parse_spec(base), tmp_path / "event-log", tmp_path / "run") == {
        "event_log": str(tmp_path / "event-log")
    }
    spec = parse_spec(base | {"source": {"on_corrupt_frame": "quarantine"}})
    assert _source_options(spec, tmp_path / "event-log", tmp_path / "run") == {
        "event_log": str(tmp_path / "event-log"), "onCorruptFrame": "quarantine",
        "corruptFramePath": str(tmp_path / "run" / "corrupt_frames"),
    }  # fmt: skip
    assert parse_spec(spec.to_dict()) == spec and "on_corrupt_frame" not in parse_spec(base).to_dict()["source"]
    assert spec.fingerprint == parse_spec(base).fingerprint  # where input comes from, not the query's logic
    with pytest.raises(
        ConfigError, match=r"source.on_corrupt_frame is 'skip' — use fail \(the default\) or quarantine"
    ):
        parse_spec(base | {"source": {"on_corrupt_frame": "skip"}})
    with pytest.raises(ConfigError, match="applies to the event log, not Kafka"):
        parse_spec(
            base
            | {"source": {"kafka": {"bootstrap_servers": "b:9092", "topic": "t"}, "on_corrupt_frame": "quarantine"}}
        )


def test_a_lineage_on_an_object_store_refuses_to_quarantine_damaged_frames_on_executors_disks(tmp_path):
    # the records are plain files written by the executor that finds the damage: on S3 they
    # would land on that executor's disk, where no reader looks
    from tidegate.storage.s3 import S3Credentials, S3Settings
    from tidegate.storage.store import open_store
    from tidegate.storage.uri import parse_root

    root = parse_root("s3a://tidegate-east/platform/jobs/j/lineages/l1")
    store = open_store(root, S3Settings(endpoint="http://127.0.0.1:9", credentials=S3Credentials("k", "s")))
    base = {"name": "j", "version": 1, "payload": {"a": "int"}}
    assert _source_options(parse_spec(base), tmp_path / "event-log", store.path_of(root), store) == {
        "event_log": str(tmp_path / "event-log")
    }
    spec = parse_spec(base | {"source": {"on_corrupt_frame": "quarantine"}})
    with pytest.raises(
        ConfigError,
        match=r"job j: source.on_corrupt_frame: quarantine .* s3a://tidegate-east/platform/"
        r"jobs/j/lineages/l1 cannot hold — on an s3a:// root use on_corrupt_frame: fail",
    ):
        _source_options(spec, tmp_path / "event-log", store.path_of(root), store)
