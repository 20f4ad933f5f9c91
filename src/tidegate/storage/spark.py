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

Pure: returns settings for :func:`tidegate.spark.session.build_session`, imports no pyspark.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tidegate.jvm import deps as jvm_deps
from tidegate.jvm.class_archive import append_class_path
from tidegate.storage.s3 import S3Settings

HADOOP_AWS = "hadoop-aws"
CHECKPOINT_MANAGER_SETTING = "spark.sql.streaming.checkpointFileManagerClass"
CHECKPOINT_FILE_MANAGER = "tidegate.jvm.ObjectStoreCheckpointFileManager"


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
