"""Spark's streaming checkpoint on an S3 store, through ``ObjectStoreCheckpointFileManager``:
a conditional put per checkpoint file, no rename.

A query whose checkpoint is on ``s3a://tidegate-east/…`` stops and resumes where it was; two
writers of one offset-log file cannot both succeed; and a driver killed with SIGKILL while a
checkpoint file is on its way to the store resumes to the same output, row for row, as a run
that was never interrupted.

The query is small and deterministic: Spark's ``rate-micro-batch`` source (ten rows a batch,
its offsets a function of the batch id alone), a running count per key (so the state store
writes through the manager too), and a ``foreachBatch`` sink writing one JSON file per batch id.
Spark's file source would not do here: killed between its own log (``sources/0/N``) and the
offset log, it plans batch N again with one more file (measured), whatever the manager. Spark
runs in child processes (tests/s3.py): hadoop-aws must be on the JVM's class path from its start.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from s3 import BUCKETS, spark_child
from tidegate.storage.aws import arrow_filesystem
from tidegate.storage.spark import session_conf

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BUCKET = BUCKETS["east"]
BATCHES = 6  # compared, in every run

# The query, run by a SparkChild snippet and by a driver process of its own (to be killed).
QUERY = """
import json, os

def run_query(spark, checkpoint, output, until):
    counts = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 10).option("numPartitions", 2)
              .option("startTimestamp", 0).option("advanceMillisPerBatch", 1000).load()
              .selectExpr("concat('k', cast(value * value % 3 as string)) AS key").groupBy("key").count())

    def write_batch(frame, batch_id):
        rows = sorted([r["key"], r["count"]] for r in frame.collect())
        path = os.path.join(output, f"{batch_id:05d}.json")
        with open(path + ".part", "w") as f:
            json.dump(rows, f)
        os.replace(path + ".part", path)

    query = (counts.writeStream.outputMode("update").foreachBatch(write_batch)
             .option("checkpointLocation", checkpoint).trigger(processingTime="0 seconds").start())
    while not os.path.exists(os.path.join(output, f"{until - 1:05d}.json")):
        query.awaitTermination(0.2)  # raises if the query failed
    query.stop()
"""

DRIVER = (
    QUERY
    + """
import sys
from tidegate.spark.session import build_session

args = json.loads(sys.argv[1])
spark = build_session("tidegate-checkpoint-driver", master="local[2]", conf=args["conf"])
run_query(spark, args["checkpoint"], args["output"], args["until"])
spark.stop()
"""
)
RUN = QUERY + "run_query(spark, checkpoint, output, until)"


def batches(output: Path) -> dict[str, list]:
    """The sink's batches 0..BATCHES - 1 (a run may start one more before it stops)."""
    return {p.name: json.loads(p.read_text()) for p in sorted(output.glob("*.json")) if int(p.stem) < BATCHES}


def store_fs(store) -> pafs.S3FileSystem:
    return arrow_filesystem(store.settings())


def checkpoint_uri(name: str) -> str:
    return f"s3a://{BUCKET}/checkpoints/{name}-{time.time_ns()}"


def key_of(uri: str) -> str:
    return uri.removeprefix("s3a://")


@pytest.fixture(scope="module")
def s3_spark(_s3_servers, tmp_path_factory):
    child = spark_child(_s3_servers, tmp_path_factory.mktemp("s3-checkpoint"))
    yield child
    child.close()


@pytest.fixture(scope="module")
def uninterrupted(s3_spark, tmp_path_factory):
    """The output of one run, never stopped: what every other run must equal."""
    output = tmp_path_factory.mktemp("uninterrupted")
    s3_spark.run(RUN, checkpoint=checkpoint_uri("uninterrupted"), output=str(output), until=BATCHES)
    found = batches(output)
    assert list(found) == [f"{b:05d}.json" for b in range(BATCHES)], found
    return found


def test_the_session_names_tidegate_s_manager_and_it_writes_with_conditional_puts(s3_stores, s3_spark):
    found = s3_spark.run(
        """
conf = spark._jsparkSession.sessionState().newHadoopConf()
path = spark._jvm.org.apache.hadoop.fs.Path(uri)
manager = spark._jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.create(path, conf)
result = [manager.getClass().getName(), manager.conditionalPuts()]
""",
        uri=checkpoint_uri("manager"),
    )
    assert found == ["tidegate.jvm.ObjectStoreCheckpointFileManager", True]


def test_a_query_stopped_and_restarted_on_its_s3_checkpoint_continues_where_it_was(
    s3_stores, s3_spark, uninterrupted, tmp_path
):
    """A run to batch 2, stopped; a second run on the same checkpoint to batch 5: the batches
    already planned are not planned again, and the output equals one uninterrupted run's."""
    output, checkpoint = tmp_path / "out", checkpoint_uri("restart")
    output.mkdir()
    s3_spark.run(RUN, checkpoint=checkpoint, output=str(output), until=BATCHES // 2)
    fs = store_fs(s3_stores["east"])
    planned = {b: fs.open_input_file(f"{key_of(checkpoint)}/offsets/{b}").readall() for b in range(BATCHES // 2)}

    s3_spark.run(RUN, checkpoint=checkpoint, output=str(output), until=BATCHES)
    assert batches(output) == uninterrupted
    assert {b: fs.open_input_file(f"{key_of(checkpoint)}/offsets/{b}").readall() for b in planned} == planned
    names = {info.base_name for info in fs.get_file_info(pafs.FileSelector(key_of(checkpoint), recursive=True))}
    assert not any(n.endswith(".tmp") for n in names), "no temporary file is written, so none is left behind"


ELSEWHERE = """
jvm = spark._jvm
Path = jvm.org.apache.hadoop.fs.Path
Manager = jvm.tidegate.jvm.ObjectStoreCheckpointFileManager
conf = spark._jsparkSession.sessionState().newHadoopConf()
local = Manager(Path(folder), conf)
local.mkdirs(Path(folder + "/offsets"))  # as Spark's logs do before writing
out = local.createAtomic(Path(folder + "/offsets/0"), False)
out.write(bytearray(b"v1"))
out.close()
again = local.createAtomic(Path(folder + "/offsets/0"), False)
again.write(bytearray(b"v1 again"))
try:
    again.close()
    local_refused = None
except Exception as failed:
    local_refused = str(failed)
without = jvm.org.apache.hadoop.conf.Configuration(conf)
without.set("fs.s3a.impl.disable.cache", "true")  # a filesystem of its own, with the switch below
without.set("fs.s3a.bucket.%s.create.conditional.enabled" % bucket, "false")
try:
    Manager(Path(uri), without)
    s3_refused = None
except Exception as failed:
    s3_refused = str(failed)
result = {"local_conditional": local.conditionalPuts(), "local_refused": local_refused, "s3_refused": s3_refused}
"""


def test_a_local_checkpoint_keeps_spark_s_way_and_a_store_without_conditional_puts_is_refused(
    s3_stores, s3_spark, tmp_path
):
    """One session may checkpoint on a local disk too: there Spark's write-and-rename (atomic on
    a local disk) is kept. An s3a store without put-if-absent is refused, not written by rename."""
    found = s3_spark.run(
        ELSEWHERE, folder=(tmp_path / "checkpoint").as_uri(), uri=checkpoint_uri("unconditional"), bucket=BUCKET
    )
    assert found["local_conditional"] is False
    assert "FileAlreadyExistsException" in (found["local_refused"] or "")
    assert "takes no conditional puts" in (found["s3_refused"] or ""), found["s3_refused"]


TWO_WRITERS = """
jvm = spark._jvm
conf = spark._jsparkSession.sessionState().newHadoopConf()
Path = jvm.org.apache.hadoop.fs.Path
first = jvm.tidegate.jvm.ObjectStoreCheckpointFileManager(Path(uri), conf)
second = jvm.tidegate.jvm.ObjectStoreCheckpointFileManager(Path(uri), conf)
batch = Path(uri + "/offsets/7")
a, b = first.createAtomic(batch, False), second.createAtomic(batch, False)
a.write(bytearray(b"v1 written by the first"))
b.write(bytearray(b"v1 written by the second"))
visible_before_close = first.exists(batch)
a.close()
try:
    b.close()
    refused = None
except Exception as failed:
    refused = str(failed)
b.cancel()  # what Spark does after a refused close
stream = first.open(batch)
kept = bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream)).decode()
stream.close()
result = {"visible_before_close": visible_before_close, "refused": refused, "kept": kept}
"""


def test_of_two_writers_of_one_offset_log_file_the_second_is_refused(s3_stores, s3_spark):
    """Both open batch 7 before either closes (both passed Spark's "is it there yet?" check):
    the first close publishes, the second is refused as Spark expects, the first's bytes stay."""
    found = s3_spark.run(TWO_WRITERS, uri=checkpoint_uri("two-writers"))
    assert found["visible_before_close"] is False
    assert found["refused"] is not None and "org.apache.hadoop.fs.FileAlreadyExistsException" in found["refused"]
    assert found["kept"] == "v1 written by the first"


CANCEL = """
conf = spark._jsparkSession.sessionState().newHadoopConf()
Path = spark._jvm.org.apache.hadoop.fs.Path
manager = spark._jvm.tidegate.jvm.ObjectStoreCheckpointFileManager(Path(uri), conf)
out = manager.createAtomic(Path(uri + "/commits/3"), False)
out.write(bytearray(b"half a commit"))
out.cancel()
result = manager.exists(Path(uri + "/commits/3"))
"""


def test_a_cancelled_checkpoint_write_publishes_nothing(s3_stores, s3_spark):
    assert s3_spark.run(CANCEL, uri=checkpoint_uri("cancel")) is False


# -- kill -9 while a checkpoint file is being written ---------------------------------------------


class HoldingProxy:
    """A TCP relay in front of the store that lets every request through until one whose request
    line matches ``pattern``: that request is held (never reaches the store) and ``held`` is set,
    so the writer is inside ``close()``, its upload started, when the test kills it."""

    def __init__(self, upstream_port: int, pattern: bytes) -> None:
        self.upstream_port, self.pattern = upstream_port, re.compile(pattern)
        self.held = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self.sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, requests: bool) -> None:
        seen = b""
        try:
            while chunk := source.recv(65536):
                if requests:
                    seen = seen[-512:] + chunk
                    if self.held.is_set() or self.pattern.search(seen):
                        self.held.set()
                        return  # this request, and any after it, stay here
                target.sendall(chunk)
        except OSError:
            return

    def close(self) -> None:
        self.listener.close()
        for s in self.sockets:
            s.close()


def start_driver(conf: dict[str, str], checkpoint: str, output: Path) -> subprocess.Popen:
    """A driver process of its own (with its JVM in its process group, to be killed together)."""
    args = json.dumps({"conf": conf, "checkpoint": checkpoint, "output": str(output), "until": BATCHES})
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, args], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


@pytest.mark.parametrize(
    "held_file",
    [
        "offsets/2",  # the offset log: batch 2 planned, its plan not yet recorded
        "commits/3",  # the commit log: batch 3's output written, its commit not recorded
        "state/0/1/5.delta",  # the state store's delta of batch 4 (an overwriting write)
    ],
)
def test_a_driver_killed_while_writing_a_checkpoint_file_resumes_to_the_uninterrupted_output(
    s3_stores, s3_spark, uninterrupted, tmp_path, held_file
):
    store = s3_stores["east"]
    output, checkpoint = tmp_path / "out", checkpoint_uri("kill")
    output.mkdir()
    held_key = f"{key_of(checkpoint)}/{held_file}"
    proxy = HoldingProxy(int(store.endpoint.rsplit(":", 1)[1]), rb"PUT /" + re.escape(held_key.encode()) + rb"[ ?]")
    through_proxy = dataclasses.replace(store.settings(), endpoint=f"http://127.0.0.1:{proxy.port}")
    driver = start_driver(session_conf({BUCKET: through_proxy}), checkpoint, output)
    try:
        held = proxy.held.wait(timeout=120)
        os.killpg(driver.pid, signal.SIGKILL)  # the driver and its JVM, mid-write
        driver.wait(30)
        assert held, f"the driver never wrote {held_file}: {driver.stderr.read().decode()[-3000:]}"
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        proxy.close()
    fs = store_fs(store)
    assert fs.get_file_info(held_key).type == pafs.FileType.NotFound, "a write killed before close leaves nothing"
    before = batches(output)
    assert len(before) < BATCHES

    # the query restarts from that checkpoint, in another driver
    s3_spark.run(RUN, checkpoint=checkpoint, output=str(output), until=BATCHES)
    assert batches(output) == uninterrupted
