"""What a Spark session needs to open ``s3a://`` roots: the hadoop-aws jars and each store's settings.

pyspark ships Hadoop's client but not its S3A connector. ``maven/hadoop-aws/pom.xml`` pins
hadoop-aws at pyspark's own Hadoop version and the AWS SDK v2 bundle it was built against;
``scripts/jvm_deps.sh`` fetches them into ``var/jvm/hadoop-aws/`` (never at run time).

Spark's streaming checkpoint on such a session is written by Tidegate's own checkpoint file
manager (:data:`CHECKPOINT_FILE_MANAGER`, ``spark/pipeline/java/ObjectStoreCheckpointFileManager.java``): a
conditional put per file instead of Spark's write-and-rename, which S3A turns into a copy and a
delete that two writers of one batch can both pass. ``docs/decisions/0010-object-storage-commit.md``
says why and what it measured.

The jars go on the JVM's class path, not ``spark.jars``: the SDK bundle is about 650 MB, and
``spark.jars`` would copy it into every executor's working directory when the first task
runs. The driver's go after Spark's own jars (:data:`~tidegate.jvm.class_archive.APPENDED_CLASS_PATH`),
so it still maps Spark's class archive; a cluster's executors get them through
``spark.executor.extraClassPath``, and its workers need the same folder (``TIDEGATE_JVM_DEPS``)
installed on them.

A session that meets an ``s3a://`` path without them fails deep in the JVM; :func:`explain_s3_failure`
turns that into one paragraph saying what is missing and what fetches or sets it.

Pure: returns settings for :func:`tidegate.spark.session.build_session`, imports no pyspark.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tidegate.errors import ConfigError
from tidegate.jvm import deps as jvm_deps
from tidegate.jvm.class_archive import append_class_path
from tidegate.storage.s3 import ENV_PREFIX, S3Settings

HADOOP_AWS = "hadoop-aws"
CHECKPOINT_MANAGER_SETTING = "spark.sql.streaming.checkpointFileManagerClass"
CHECKPOINT_FILE_MANAGER = "tidegate.jvm.ObjectStoreCheckpointFileManager"
# what the JVM says when a session without the S3A connector meets an s3a:// path, or a store without credentials
_MISSING_CONNECTOR = ("org.apache.hadoop.fs.s3a.S3AFileSystem not found", 'No FileSystem for scheme "s3a"')
_MISSING_SDK = ("NoClassDefFoundError: software/amazon/awssdk", "ClassNotFoundException: software.amazon.awssdk")
_MISSING_CREDENTIALS = ("NoAuthWithAWSException", "No AWS Credentials provided", "Unable to load credentials")


def hadoop_aws_jars() -> list[Path]:
    """hadoop-aws and the AWS SDK bundle; a ConfigError saying how to fetch them when missing."""
    return jvm_deps.jars(HADOOP_AWS)


def session_conf(stores: Mapping[str, S3Settings], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Spark settings that reach each store in ``stores`` (bucket → settings), merged into ``base``.

    Each bucket gets its own ``fs.s3a.bucket.<bucket>.*`` settings, so two regions' stores
    (two endpoints, two key pairs) are reachable from one session. The jars are appended to
    any class path ``base`` already has; ``base``'s ``spark.driver.extraClassPath`` stays the
    operator's, in front of Spark's jars. Static settings: they apply to a new session only.
    Streaming checkpoints go through :data:`CHECKPOINT_FILE_MANAGER`; on a local path it
    keeps Spark's own behaviour, so one session may checkpoint on either.
    """
    conf = dict(base or {})
    # Spark's writers on S3 write into a hidden attempt folder that no reader looks at until
    # the batch's commit record names its files (tidegate.lineage.commits): the v2 algorithm
    # renames (on S3A: copies) each file once, at task commit, instead of twice
    conf.setdefault("spark.hadoop.mapreduce.fileoutputcommitter.algorithm.version", "2")
    for bucket, settings in stores.items():
        conf.update(settings.spark_conf(bucket))
    conf[CHECKPOINT_MANAGER_SETTING] = CHECKPOINT_FILE_MANAGER
    append_class_path(conf, [str(j) for j in hadoop_aws_jars()])
    return conf


def explain_s3_failure(failure: BaseException) -> ConfigError | None:
    """What a Spark failure on an ``s3a://`` path means to an operator — the S3A jars missing
    from the session, or a store's credentials — as one paragraph instead of the JVM's stack
    trace; None for any other failure (it is not this module's to explain)."""
    said = str(failure)
    if any(sign in said for sign in _MISSING_CONNECTOR + _MISSING_SDK):
        return ConfigError(
            "this Spark session cannot open s3a:// paths: Hadoop's S3A connector (hadoop-aws and the AWS SDK "
            f"bundle, maven/{HADOOP_AWS}/pom.xml) is not on its class path",
            f"fetch the jars with `bash scripts/jvm_deps.sh` (into var/jvm/{HADOOP_AWS}/, or point "
            f"{jvm_deps.JVM_DEPS_ENV} at a folder holding them); a session of your own gets them from "
            "tidegate.storage.spark.session_conf",
        )
    if any(sign in said for sign in _MISSING_CREDENTIALS):
        return ConfigError(
            "an S3 store refused this Spark session: no credentials were found for it",
            f"set the region's keys ({ENV_PREFIX}<REGION>_ACCESS_KEY_ID and {ENV_PREFIX}<REGION>_SECRET_ACCESS_KEY, "
            f"or {ENV_PREFIX}ACCESS_KEY_ID and {ENV_PREFIX}SECRET_ACCESS_KEY for every store) in the environment of "
            "this command, or run it where the instance role reaches the store",
        )
    return None
