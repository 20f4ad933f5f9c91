"""The JVM reader of the event log: its build, its choice, and what it says about a damaged log.

That it reads exactly what the Python source reads (rows, batches, recorded offsets and
clock, retention errors) is proved by tests/spark/pipeline/test_source.py, which runs every
streaming and batch-read test through both readers; for Kafka, by tests/inputs/kafka/test_jvm_reader.py.
"""

from __future__ import annotations

import json
import zipfile

import pytest
from pyspark.errors import PySparkException

from tidegate.errors import ConfigError
from tidegate.inputs.event_log import EventLog
from tidegate.spark.pipeline import java_source
from tidegate.spark.pipeline.read import read_log, read_log_stream

pytestmark = pytest.mark.spark


def test_the_jar_is_built_once_per_source_and_spark_version(tmp_path, monkeypatch):
    jar = java_source.build_jar()
    assert java_source.build_jar() == jar  # present: not rebuilt
    with zipfile.ZipFile(jar) as z:
        assert {"tidegate/jvm/LogSourceProvider.class", "tidegate/jvm/LogPlanner.class"} <= set(z.namelist())
    sources = tmp_path / "java"
    sources.mkdir()
    for f in java_source.SOURCES.glob("*.java"):
        (sources / f.name).write_text(f.read_text() + ("\n// changed\n" if f.name == "LogRange.java" else ""))
    monkeypatch.setattr(java_source, "SOURCES", sources)
    assert java_source.jar_path() != jar  # a changed source is a new jar, never a stale one


def test_kafkas_reader_is_in_the_jar_only_when_kafkas_client_jars_were_fetched(monkeypatch):
    with zipfile.ZipFile(java_source.build_jar()) as z:  # bootstrap fetched them here
        assert "tidegate/jvm/KafkaRangeReader.class" in z.namelist()
    with_kafka = java_source.jar_path()
    monkeypatch.setattr(java_source, "_kafka_client_jars", lambda: [])
    assert not any(f.parent.name == "kafka" for f in java_source._sources())
    assert java_source.jar_path() != with_kafka  # fetching the jars later builds a new jar, with the reader


def test_without_a_jdk_jobs_fall_back_to_the_python_source_unless_the_jvm_reader_is_required(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(java_source, "jar_path", lambda: tmp_path / "missing.jar")
    monkeypatch.setattr(java_source, "_javac", lambda: None)
    with pytest.raises(ConfigError, match=r"no Java compiler \(javac\).*apt-get install openjdk-17-jdk-headless"):
        java_source.build_jar()
    monkeypatch.delenv(java_source.READER_ENV, raising=False)
    assert java_source.session_jar() is None
    assert "slower Python source" in capsys.readouterr().err
    monkeypatch.setenv(java_source.READER_ENV, "jvm")
    with pytest.raises(ConfigError, match="javac"):
        java_source.session_jar()
    monkeypatch.setenv(java_source.READER_ENV, "python")
    assert java_source.session_jar() is None


def test_jobs_read_through_the_jvm_reader_and_a_bad_choice_is_refused(spark, tmp_path, monkeypatch):
    log = EventLog.create(tmp_path / "event-log", partitions=1, clock="manual")
    log.append(0, ["k"], ["{}"])
    monkeypatch.delenv(java_source.READER_ENV, raising=False)
    assert java_source.available(spark)
    plan = read_log_stream(spark, {"event_log": str(log.root)})._jdf.queryExecution().logical().toString()
    assert java_source.PROVIDER in plan  # the JVM source, not the Python data source
    with pytest.raises(ConfigError, match="use auto, jvm or python"):
        read_log_stream(spark, {"event_log": str(log.root)}, reader="scala")
    with pytest.raises(ConfigError, match="do not apply to a stream read"):
        read_log_stream(spark, {"event_log": str(log.root), "endingOffsets": "latest"}, reader="jvm")


def test_a_batch_read_reads_the_span_of_when_it_was_made_on_the_jvm(spark, tmp_path, monkeypatch):
    log = EventLog.create(tmp_path / "event-log", partitions=2, clock="manual")
    for p in range(2):
        log.append(p, ["k"] * 3, [json.dumps({"p": p, "i": i}) for i in range(3)])
    monkeypatch.delenv(java_source.READER_ENV, raising=False)
    df = read_log(spark, {"event_log": str(log.root), "startingOffsets": '{"0": 1, "1": 0}'})
    assert java_source.PROVIDER in df._jdf.queryExecution().logical().toString()
    first = sorted((r.partition, r.offset, r.payload) for r in df.collect())
    assert first == [
        (0, 1, '{"p": 0, "i": 1}'),
        (0, 2, '{"p": 0, "i": 2}'),
        (1, 0, '{"p": 1, "i": 0}'),
        (1, 1, '{"p": 1, "i": 1}'),
        (1, 2, '{"p": 1, "i": 2}'),
    ]
    log.append(0, ["k"], ["{}"])  # arrives after the read was made: a second action reads the same span
    assert sorted((r.partition, r.offset, r.payload) for r in df.collect()) == first
    assert df.where("partition = 0").count() == 2
    empty = read_log(spark, {"event_log": str(log.root), "startingOffsets": "latest"})
    assert empty.count() == 0


def test_a_batch_reads_planner_lives_with_its_plan_not_in_a_registry(spark, tmp_path, monkeypatch):
    import gc

    log = EventLog.create(tmp_path / "event-log", partitions=1, clock="manual")
    log.append(0, ["k", "k"], ["{}", "{}"])
    monkeypatch.delenv(java_source.READER_ENV, raising=False)
    registered = []
    register = java_source._register
    monkeypatch.setattr(java_source, "_register", lambda *a: registered.append(register(*a)) or registered[-1])
    derived = read_log(spark, {"event_log": str(log.root)}).where("offset = 1")  # the read itself is dropped at once
    gc.collect()
    assert derived.count() == 1 and derived.count() == 1  # planned twice, after Python let go of the read
    with pytest.raises(Exception, match="no planner registered"):  # nothing left behind by name
        spark.read.format(java_source.PROVIDER).option("planner", registered[0]).load()


def _failed_read(spark, tmp_path, monkeypatch, spoil) -> str:
    """Run the JVM reader once over a small log with each planned frame passed through ``spoil``."""
    log = EventLog.create(tmp_path / "event-log", partitions=1, clock="manual")
    for i in range(3):
        log.append(0, [f"k{i}"] * 5, [json.dumps({"i": i})] * 5)
    plan = java_source.Planner.planRanges

    def spoiled(self, stream, start, end):
        reply = json.loads(plan(self, stream, start, end))
        for r in reply["ok"]:
            r["frames"] = [spoil(f) for f in r["frames"]]
        return json.dumps(reply)

    monkeypatch.setattr(java_source.Planner, "planRanges", spoiled)
    query = (
        read_log_stream(spark, {"event_log": str(log.root)}, reader="jvm").writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    )  # fmt: skip
    with pytest.raises(PySparkException) as info:
        query.awaitTermination(120)
    return str(info.value)


def test_a_frame_that_fails_its_crc_fails_the_batch_naming_the_frame(spark, tmp_path, monkeypatch):
    message = _failed_read(spark, tmp_path, monkeypatch, lambda f: [*f[:3], f[3] ^ 1, *f[4:]])
    assert "the frame of offsets 0–4 in partition 0" in message
    assert "does not match the CRC in its header" in message and "restore the segment" in message


def test_a_segment_deleted_after_planning_says_to_restart(spark, tmp_path, monkeypatch):
    message = _failed_read(spark, tmp_path, monkeypatch, lambda f: [f[0] + ".gone", *f[1:]])
    assert "was deleted (by retention) after this micro-batch was planned" in message
    assert "restart the job" in message
