"""Spark on two regions' S3 stores through Hadoop's S3A: Parquet written and read back on each,
a conditional create refused the second time, and a lost store failing within bounds.

The session runs in a child process (tests/s3.py): hadoop-aws must be on its JVM's class
path from the start, which the test process's shared session may have started without.
"""

from __future__ import annotations

import dataclasses
import os
import time

import pyarrow.parquet as pq
import pytest

from s3 import BUCKETS, ChildError, SparkChild, spark_child
from tidegate.storage.aws import arrow_filesystem
from tidegate.storage.uri import parse_root

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def s3_spark(_s3_servers, tmp_path_factory):
    child = spark_child(_s3_servers, tmp_path_factory.mktemp("s3-spark"))
    yield child
    child.close()


WRITE_READ = """
rows = [(i, f"row-{i}") for i in range(100)]
spark.createDataFrame(rows, "id long, name string").repartition(3).write.mode("overwrite").parquet(uri)
result = sorted(tuple(r) for r in spark.read.parquet(uri).collect()) == rows
"""


def test_spark_writes_parquet_to_each_region_s_store_and_reads_it_back(s3_stores, s3_spark):
    for region, store in s3_stores.items():
        root = parse_root(f"s3a://{BUCKETS[region]}/spark/{time.time_ns()}")
        assert s3_spark.run(WRITE_READ, uri=root.uri) is True
        # the Python side reads what the JVM side wrote
        table = pq.read_table(root.arrow_path, filesystem=arrow_filesystem(store.settings()))
        assert table.num_rows == 100 and sorted(table.column("id").to_pylist()) == list(range(100))


def test_without_keys_s3a_finds_them_through_the_aws_sdk_s_default_chain(s3_stores, tmp_path, monkeypatch):
    from tidegate.storage.s3 import DEFAULT_CHAIN_PROVIDER
    from tidegate.storage.spark import session_conf

    east = s3_stores["east"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", east.credentials.access_key_id)  # the child inherits them
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", east.credentials.secret_access_key)
    conf = session_conf({BUCKETS["east"]: dataclasses.replace(east.settings(), credentials=None)})
    assert conf[f"spark.hadoop.fs.s3a.bucket.{BUCKETS['east']}.aws.credentials.provider"] == DEFAULT_CHAIN_PROVIDER
    child = SparkChild(conf, cwd=tmp_path)
    try:
        assert child.run(WRITE_READ, uri=f"s3a://{BUCKETS['east']}/spark-chain/{time.time_ns()}") is True
    finally:
        child.close()


CLASS_PATH = """
from pathlib import Path
jvm = spark._jvm
maps = Path(f"/proc/{jvm.java.lang.ProcessHandle.current().pid()}/maps").read_text()
path = [Path(p).name for p in jvm.java.lang.System.getProperty("java.class.path").split(":")]
result = {"mapped": [line.split()[-1] for line in maps.splitlines() if line.endswith(".jsa")],
          "first": path[0], "last": path[-4:], "s3a": jvm.org.apache.hadoop.fs.s3a.S3AFileSystem().getScheme()}
"""


def test_an_s3_session_s_jvm_maps_spark_s_class_archive_with_hadoop_aws_after_spark_s_jars(s3_spark):
    """The jars an S3 session needs go after Spark's own, so the driver's class path still starts
    with the one the archive was built for; put before them (spark.driver.extraClassPath), the
    JVM starts without it — six seconds more for every driver, check and rehearsal on S3."""
    from tidegate.jvm.class_archive import archive_path

    archive = archive_path()
    if archive is None or not archive.is_file():
        missing = f"Spark's class archive is not built ({archive}): run python -m tidegate.spark.class_archive"
        if os.environ.get("CI"):  # setup builds it: under CI its absence is a failure
            pytest.fail(missing)
        pytest.skip(missing)
    seen = s3_spark.run(CLASS_PATH)
    assert str(archive) in seen["mapped"]
    assert seen["first"] == "conf" and seen["s3a"] == "s3a"  # Spark's conf folder, then its jars
    assert any(name.startswith("hadoop-aws-") for name in seen["last"])
    assert any(name.startswith("tidegate-jvm-") for name in seen["last"])  # the checkpoint file manager


CONDITIONAL_CREATE = """
path = spark._jvm.org.apache.hadoop.fs.Path(uri)
fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
option = "fs.option.create.conditional.overwrite"

def put(data):
    out = fs.createFile(path).must(option, True).build()
    out.write(bytearray(data))
    out.close()  # the object appears here, if nothing is there yet

put(b"first")
try:
    put(b"second")
    second = "accepted"
except Exception as refused:
    second = str(refused)
stream = fs.open(path)
kept = bytes(spark._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
stream.close()
result = {"capability": fs.hasPathCapability(path, option), "second": second, "kept": kept.decode()}
"""


def test_s3a_creates_a_file_only_where_none_is_with_a_conditional_put(s3_stores, s3_spark):
    uri = f"s3a://{BUCKETS['east']}/commits/{time.time_ns()}.json"
    found = s3_spark.run(CONDITIONAL_CREATE, uri=uri)
    assert found["capability"] is True
    assert found["second"] != "accepted" and ("412" in found["second"] or "Precondition" in found["second"]), found
    assert found["kept"] == "first"


READ = "result = spark.read.parquet(uri).count()"


def test_a_lost_store_fails_a_spark_read_within_bounds_and_serves_again_once_back(s3_stores, s3_spark):
    uri = f"s3a://{BUCKETS['west']}/spark/{time.time_ns()}"
    assert s3_spark.run(WRITE_READ, uri=uri) is True
    s3_stores["west"].stop()
    started = time.monotonic()
    with pytest.raises(ChildError) as failed:
        s3_spark.run(READ, uri=uri)
    took = time.monotonic() - started
    message = str(failed.value)
    assert took < 90, f"a lost store took {took:.0f} s to fail"
    assert "127.0.0.1" in message or "refused" in message.lower() or "unable to execute" in message.lower(), message[
        :2000
    ]
    # the other region's store still serves the same session
    assert s3_spark.run(WRITE_READ, uri=f"s3a://{BUCKETS['east']}/spark/{time.time_ns()}") is True
    s3_stores["west"].start()
    assert s3_spark.run(READ, uri=uri) == 100
