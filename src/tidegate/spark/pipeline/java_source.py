"""The event log read on the JVM: the source every Tidegate job and batch path uses when it can.

PySpark's Python Data Source API starts a fresh Python process for every streaming query
(the stream reader's planner) and hands each event from Python workers to the JVM as Arrow;
together about 0.6 s per query start plus a copy of every event. This source plans in the
driver's own Python, through Py4J, with the very code the Python source plans with
(:class:`~tidegate.spark.pipeline.source.TidegateStreamReader`: offsets, limits, the recorded clock,
retention errors), and reads the log's frames on the executors in Java (``java/*.java``:
CRC-checked Arrow IPC turned into Spark column vectors without a row-by-row copy).

A Kafka topic is planned the same way (the planner over :class:`~tidegate.inputs.kafka.log.KafkaLog`
records each batch's offsets and broker clock), and its planned ranges are read on the
executors in Java (``java/kafka/KafkaRangeReader.java``): over Kafka's wire protocol, each
record decoded where it lies in the fetched bytes, on a plaintext listener; with Kafka's Java
consumer over TLS or SASL. Pyspark cannot do either from Python workers at anything like that speed. Kafka's reader is
compiled into the jar only when Kafka's client jars were fetched (``var/jvm/kafka-connector``);
without them, Kafka jobs read through the Python source.

A batch read (the batch path's input: ``spark.read``) is planned by the Python source's
batch reader (:class:`~tidegate.spark.pipeline.source.TidegateBatchReader`), its span resolved
once when the DataFrame is made, and read by the same Java readers.

Offsets are the same JSON on both paths, so a checkpoint written by one resumes on the
other. The Java classes are compiled once per Spark version into a jar under the virtual
environment (``python -m tidegate.spark.pipeline.java_source``; ``scripts/bootstrap.sh`` does it), and
:func:`~tidegate.spark.session.build_session` puts that jar on the session. Without a JDK
(``javac``) there is no jar, and jobs read through the Python source instead.

The same jar carries ``ObjectStoreCheckpointFileManager``, which writes Spark's streaming
checkpoint on an S3 store by conditional puts (:mod:`tidegate.storage.spark`); a session with
an S3 root needs it, so there a missing JDK is an error, not a fall-back.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from tidegate.errors import ConfigError, TidegateError
from tidegate.inputs.event_log import CorruptFrameError, EventLog
from tidegate.inputs.event_log.frames import Damage
from tidegate.inputs.event_log.verify import record_skipped
from tidegate.inputs.kafka.client import READ_STALL_S, KafkaTopic, jvm_reader
from tidegate.inputs.log import PartitionedLog, open_log
from tidegate.inputs.log_set import CompositeLog
from tidegate.spark.gateway import jvm_class
from tidegate.spark.pipeline.release_gate import ReleaseGate
from tidegate.spark.pipeline.source import TidegateBatchReader, TidegateStreamReader, batch_options, stream_options
from tidegate.spark.pipeline.source_options import SourceOptions

PROVIDER = "tidegate.jvm.LogSourceProvider"
KAFKA_READER = "tidegate.jvm.KafkaRangeReader"
LOG_PLANNERS = "tidegate.jvm.LogPlanners"  # the planners the JVM source asks for offset ranges
SOURCES = Path(__file__).with_name("java")
READER_ENV = "TIDEGATE_SOURCE_READER"  # auto (default) | jvm | python


def _spark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _kafka_client_jars() -> list[Path]:
    """Kafka's client jars (fetched with Spark's connector), or none: the jar then reads the embedded log only."""
    from tidegate.jvm.deps import connector_jars_or_none

    return connector_jars_or_none() or []


def _sources() -> list[Path]:
    """The Java sources of the jar: the log reader, and Kafka's reader when Kafka's client jars are there."""
    kafka = sorted((SOURCES / "kafka").glob("*.java")) if _kafka_client_jars() else []
    return sorted(SOURCES.glob("*.java")) + kafka


def jar_path() -> Path:
    """Where the jar for these sources and this Spark lives (it may not be built yet)."""
    import pyspark

    digest = hashlib.sha256(pyspark.__version__.encode())
    for source in _sources():
        digest.update(source.name.encode() + source.read_bytes())
    return Path(sys.prefix) / "share" / "tidegate" / f"tidegate-jvm-{digest.hexdigest()[:16]}.jar"


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").is_file():
        return str(Path(home) / "bin" / "javac")
    return shutil.which("javac")


def build_jar() -> Path:
    """Compile the Java sources against this Spark's jars (once; a no-op when the jar exists)."""
    jar = jar_path()
    if jar.is_file():
        return jar
    javac = _javac()
    if javac is None:
        raise ConfigError(
            "no Java compiler (javac) found to build the JVM reader of the event log",
            "install a JDK (apt-get install openjdk-17-jdk-headless) or set JAVA_HOME to one; "
            "without it jobs read the log through the slower Python source",
        )
    with tempfile.TemporaryDirectory(prefix="tidegate-jvm-") as tmp:
        classes = Path(tmp) / "classes"
        classpath = os.pathsep.join([str(_spark_jars() / "*"), *map(str, _kafka_client_jars())])
        command = [javac, "--release", "17", "-nowarn", "-cp", classpath, "-d", str(classes),
                   *map(str, _sources())]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise ConfigError(
                f"compiling the JVM reader of the event log failed:\n{done.stderr.strip()[-2000:]}",
                "the sources under tidegate/spark/pipeline/java must match this Spark's API; "
                f"set {READER_ENV}=python to read through the Python source meanwhile",
            )
        jar.parent.mkdir(parents=True, exist_ok=True)
        partial = jar.with_name(f".{jar.name}.{os.getpid()}")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: tidegate\n\n")
            for f in sorted(classes.rglob("*.class")):
                z.write(f, f.relative_to(classes).as_posix())
        partial.replace(jar)  # atomic: a concurrent build or session never sees half a jar
    return jar


def session_jar() -> Path | None:
    """The jar a new session should load: built now if it can be, None to use the Python source."""
    if os.environ.get(READER_ENV, "auto").strip().lower() == "python":
        return None
    try:
        return build_jar()
    except ConfigError as exc:
        if os.environ.get(READER_ENV, "auto").strip().lower() == "jvm":
            raise
        print(f"tidegate: {exc}", file=sys.stderr)
        return None


def available(spark: SparkSession, *, kafka: bool = False) -> bool:
    """True when this session's JVM can load the JVM source (its jar was on the session) —
    with ``kafka``, its Kafka reader and Kafka's client jars too."""
    kafka_classes = [KAFKA_READER, "org.apache.kafka.clients.consumer.KafkaConsumer"] if kafka else []
    return loadable(spark, PROVIDER, *kafka_classes)


def loadable(spark: SparkSession, *classes: str) -> bool:
    """True when this session's JVM can load every one of ``classes``."""
    jvm = spark.sparkContext._jvm
    if jvm is None:  # no JVM to load them in
        return False
    try:
        loader = jvm_class(spark, "java.lang.Thread").currentThread().getContextClassLoader()
        for name in classes:
            jvm_class(spark, "java.lang.Class").forName(name, False, loader)
        return True
    except Exception:  # py4j wraps ClassNotFoundException
        return False


def _reply(compute: Callable[[], object]) -> str:
    """A planner reply for the Java side: {"ok": value}, or {"error": message} for errors
    Tidegate raises on purpose (their text says what to do); anything else propagates."""
    try:
        return json.dumps({"ok": compute()})
    except TidegateError as exc:
        return json.dumps({"error": str(exc)})


class Planner:
    """Answers the JVM source's planning calls: a streaming read's with :class:`TidegateStreamReader`,
    one per stream; a batch read's with the ``batch`` reader it was made for."""

    class Java:
        implements = ["tidegate.jvm.LogPlanner"]

    def __init__(
        self, options: SourceOptions, batch: TidegateBatchReader | None = None, gate: ReleaseGate | None = None
    ) -> None:
        self.options = options
        self.batch = batch
        self.gate = gate  # a stream's release gate: while it holds, the latest offset is the start
        self._readers: dict[str, TidegateStreamReader] = {}
        self._lock = threading.Lock()

    def _reader(self, stream: str) -> TidegateStreamReader:
        with self._lock:
            if stream not in self._readers:
                self._readers[stream] = TidegateStreamReader(self.options)
            return self._readers[stream]

    def initialOffset(self, stream: str) -> str:
        return _reply(lambda: json.dumps(self._reader(stream).initialOffset()))

    def latestOffset(self, stream: str, start: str, max_rows: int) -> str:
        if self.gate is not None and not self.gate.admits():
            return json.dumps({"ok": start})  # no new data: the query runs no batch this trigger
        limit = ReadAllAvailable() if max_rows < 0 else ReadMaxRows(max_rows)
        return _reply(lambda: json.dumps(self._reader(stream).latestOffset(json.loads(start), limit)))

    def reportLatestOffset(self, stream: str) -> str:
        return _reply(lambda: json.dumps(self._reader(stream).reportLatestOffset()))

    def prepareForTriggerAvailableNow(self, stream: str) -> str:
        return _reply(lambda: self._reader(stream).prepareForTriggerAvailableNow())

    def defaultReadLimit(self, stream: str) -> str:
        def limit() -> str:
            chosen = self._reader(stream).getDefaultReadLimit()
            return str(chosen.max_rows) if isinstance(chosen, ReadMaxRows) else "all"

        return _reply(limit)

    def planRanges(self, stream: str, start: str, end: str) -> str:
        def ranges() -> list[dict]:
            reader = self._reader(stream)
            return self._frames(reader.log, reader.partitions(json.loads(start), json.loads(end)))

        return _reply(ranges)

    def planBatch(self, stream: str) -> str:
        batch = self.batch
        if batch is None:
            return json.dumps({"error": "tidegate log source: this planner serves a stream, not a batch read"})
        return _reply(lambda: self._frames(open_log(self.options.location), batch.partitions()))

    def _frames(self, log: PartitionedLog, ranges) -> list[dict]:
        """Per range, the frames that hold it (or the Kafka range as the Java client reads it);
        each range of a log set is read from its input's log, under the job's partition number."""
        out = []
        for r in ranges:
            where, local = (r.location, r.partition)
            if isinstance(where, KafkaTopic):
                out.append(_kafka_range(where, local, r.start, r.end)
                           | {"outputPartition": r.job_partition, "headers": r.headers})  # fmt: skip
                continue
            event_log = log.log_at(r.job_partition)[0] if isinstance(log, CompositeLog) else log
            assert isinstance(event_log, EventLog)  # a range that is not a Kafka topic's is an embedded log's
            frames = []
            for path, f in event_log.frames(local, r.start, r.end):
                if isinstance(f, Damage):  # known to the index: skipped (and recorded) or failed here
                    _skip_damage(r.job_partition, path, f, r.corrupt_path)
                    continue
                frames.append([str(path), f.payload_position, f.payload_len, f.payload_crc, f.first_offset, f.count])
            # with a corrupt-frame directory, executors skip and record frames that fail their CRC
            out.append({"partition": r.job_partition, "start": r.start, "end": r.end, "frames": frames,
                        "corruptFrames": r.corrupt_path, "headers": r.headers})  # fmt: skip
        return out

    def close(self, stream: str) -> None:
        with self._lock:
            self._readers.pop(stream, None)


def _kafka_range(topic: KafkaTopic, partition: int, start: int, end: int) -> dict:
    """A Kafka range for the JVM reader: the Java client's settings as Spark's connector takes them
    (credentials from this driver's environment; they travel with the tasks, never to the offset log)."""
    client = {k[len("kafka.") :]: v for k, v in topic.spark_options().items()}
    kafka = {"topic": topic.topic, "timeoutMs": int(READ_STALL_S * 1000), "client": client}
    # the spec's reader, or the wire where it can read (refused where it cannot), by the protocol just resolved
    kafka["reader"] = jvm_reader(topic.reader, client["security.protocol"], topic.settings, f"Kafka {topic}")
    return {"partition": partition, "start": start, "end": end, "kafka": kafka}


def _skip_damage(partition: int, path: Path, span: Damage, corrupt_path: str | None) -> None:
    error = CorruptFrameError.of(partition, path, span, span.what)
    if corrupt_path is not None:
        record_skipped(Path(corrupt_path), error)
    elif not span.hole:  # a repaired hole is skipped by every reader
        raise error


_PLANNERS: dict[str, Planner] = {}  # the Python side of every registered stream planner stays referenced


def _register(spark: SparkSession, planner: Planner) -> str:
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(spark.sparkContext._gateway)
    planner_id = uuid.uuid4().hex
    jvm_class(spark, LOG_PLANNERS).register(planner_id, planner)
    return planner_id


def _provider_options(planner_id: str, options: SourceOptions) -> dict[str, str]:
    """What the JVM source is told: its planner, and whether its rows carry ``headers``."""
    return {"planner": planner_id, "includeHeaders": str(options.include_headers).lower()}


def read_stream(spark: SparkSession, options: dict[str, str], gate: ReleaseGate | None = None) -> DataFrame:
    """``spark.readStream`` over the log through the JVM source (see the module docstring),
    its triggers held by ``gate`` when there is one."""
    planner = Planner(stream_options(options), gate=gate)  # the Python source's validation, same messages
    planner_id = _register(spark, planner)
    _PLANNERS[planner_id] = planner
    return spark.readStream.format(PROVIDER).options(**_provider_options(planner_id, planner.options)).load()


def read_batch(spark: SparkSession, options: dict[str, str]) -> DataFrame:
    """``spark.read`` over the log through the JVM source: the span is resolved here, once,
    as the Python source resolves it (same options, same errors). The read's table holds its
    planner, which lives as long as the JVM keeps a plan made of it (Py4J keeps a Python
    object passed to the JVM until the JVM drops it): nothing is kept per read here."""
    parsed = batch_options(options)
    planner_id = _register(spark, Planner(parsed, batch=TidegateBatchReader(parsed)))
    try:
        return spark.read.format(PROVIDER).options(**_provider_options(planner_id, parsed)).load()
    finally:
        jvm_class(spark, LOG_PLANNERS).forget(planner_id)


def main() -> int:
    try:
        print(build_jar())
    except ConfigError as exc:
        print(f"tidegate: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
