"""The JVM side of S3 storage: hadoop-aws pinned at pyspark's Hadoop, fetched by bootstrap, put on the class path."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyspark
import pytest

from platform_support import REPO
from tidegate.jvm.class_archive import APPENDED_CLASS_PATH
from tidegate.storage import spark as s3_spark
from tidegate.storage.s3 import S3Settings


def pyspark_hadoop_version() -> str:
    jars = Path(pyspark.__file__).parent / "jars"
    (api,) = jars.glob("hadoop-client-api-*.jar")
    return re.fullmatch(r"hadoop-client-api-(.+)\.jar", api.name).group(1)


def test_hadoop_aws_is_pinned_at_the_hadoop_version_pyspark_ships():
    pom = (REPO / "maven" / "hadoop-aws" / "pom.xml").read_text()
    assert f"<hadoop.version>{pyspark_hadoop_version()}</hadoop.version>" in pom
    assert re.search(r"<awssdk.version>2\.\d+\.\d+</awssdk.version>", pom)


def test_bootstrap_fetched_hadoop_aws_and_the_sdk_bundle():
    names = {j.name for j in s3_spark.hadoop_aws_jars()}
    assert f"hadoop-aws-{pyspark_hadoop_version()}.jar" in names
    assert any(re.fullmatch(r"bundle-2\.\d+\.\d+\.jar", n) for n in names)
    assert not any(n.startswith("hadoop-client") or n.startswith("hadoop-common") for n in names)  # pyspark's


def test_the_session_conf_reaches_each_bucket_s_store_and_puts_the_jars_on_the_class_path():
    conf = s3_spark.session_conf(
        {"east": S3Settings(endpoint="http://127.0.0.1:1"), "west": S3Settings(endpoint="http://127.0.0.1:2")},
        base={"spark.driver.extraClassPath": "/opt/other.jar"},
    )
    assert conf["spark.hadoop.fs.s3a.bucket.east.endpoint"] == "http://127.0.0.1:1"
    assert conf["spark.hadoop.fs.s3a.bucket.west.endpoint"] == "http://127.0.0.1:2"
    # the operator's own class path stays in front of Spark's jars; the driver's S3 jars go after them
    assert conf["spark.driver.extraClassPath"] == "/opt/other.jar"
    appended = conf[APPENDED_CLASS_PATH].split(os.pathsep)
    assert any(p.endswith(".jar") and "hadoop-aws" in p for p in appended)
    assert conf["spark.executor.extraClassPath"].split(os.pathsep) == appended  # a cluster's executors


def test_the_session_conf_checkpoints_through_tidegate_s_manager_for_object_stores():
    """Spark's write-and-rename commits a checkpoint file by copy and delete on S3A; the
    manager puts it conditionally (docs/decisions/0010-object-storage-commit.md)."""
    conf = s3_spark.session_conf({"east": S3Settings(endpoint="http://127.0.0.1:1")})
    assert conf[s3_spark.CHECKPOINT_MANAGER_SETTING] == "tidegate.jvm.ObjectStoreCheckpointFileManager"
    assert s3_spark.CHECKPOINT_MANAGER_SETTING == "spark.sql.streaming.checkpointFileManagerClass"


# what Spark 4 raises when a session without the S3A jars meets an s3a:// path (its first lines)
NO_S3A = (
    "An error occurred while calling o45.parquet.\n: java.lang.RuntimeException: java.lang.ClassNotFoundException: "
    "Class org.apache.hadoop.fs.s3a.S3AFileSystem not found\n\tat org.apache.hadoop.conf.Configuration.getClass"
)


@pytest.mark.parametrize(
    "said, names",
    [
        (NO_S3A, ["bash scripts/jvm_deps.sh", "hadoop-aws", "TIDEGATE_JVM_DEPS"]),
        ('org.apache.hadoop.fs.UnsupportedFileSystemException: No FileSystem for scheme "s3a"', ["jvm_deps.sh"]),
        (
            "java.nio.file.AccessDeniedException: s3a://tidegate-east/x: org.apache.hadoop.fs.s3a.auth."
            "NoAuthWithAWSException: No AWS Credentials provided by TemporaryAWSCredentialsProvider",
            ["TIDEGATE_S3_<REGION>_ACCESS_KEY_ID", "instance role"],
        ),
    ],
)
def test_a_jvm_failure_on_an_s3a_path_is_explained_in_one_paragraph(said, names):
    explained = s3_spark.explain_s3_failure(RuntimeError(said))
    assert explained is not None and "\n" not in str(explained) and "at org.apache" not in str(explained)
    assert all(name in str(explained) for name in names), str(explained)


def test_the_command_line_says_it_without_the_stack_trace_and_leaves_other_failures_alone(capsys):
    import argparse

    from tidegate.cli import dispatch

    parser = argparse.ArgumentParser()
    parser.set_defaults(func=lambda args: (_ for _ in ()).throw(RuntimeError(NO_S3A)))
    assert dispatch.run(parser, []) == 2
    said = capsys.readouterr().err
    assert said.startswith("tidegate: error: this Spark session cannot open s3a:// paths") and said.count("\n") == 1
    parser.set_defaults(func=lambda args: (_ for _ in ()).throw(RuntimeError("something else")))
    with pytest.raises(RuntimeError, match="something else"):
        dispatch.run(parser, [])
