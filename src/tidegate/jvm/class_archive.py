"""One class-data-sharing archive of the classes a Spark JVM loads, mapped by every JVM Tidegate starts.

A Spark JVM spends most of its own share of a start reading, parsing and verifying the
classes of Spark's jars. A dynamic CDS archive (``-XX:ArchiveClassesAtExit``) holds them
already parsed and verified; a JVM started with ``-XX:SharedArchiveFile`` maps it, and all
JVMs on the machine share the mapped pages, and a session's start and its first query take
about half as long (docs/benchmarks/bench_jvm_start.md). Every restart, failover, rehearsal
and check starts a JVM, so this is recovery time.

This module says where the archive is and the options that map it; setup builds it
(``scripts/bootstrap.sh`` runs ``python -m tidegate.spark.class_archive``, which runs a
Spark job: :mod:`tidegate.spark.class_archive`).

An archive is valid for the JVM build and Spark's jars it was made with. Its name carries a
digest of both: after a JDK or pyspark upgrade no archive matches, JVMs start as they did
without one, and setup builds a new one. A JVM whose class path differs (a standalone
cluster's executors) cannot use it and starts without it, silently. Free of pyspark, as
:mod:`tidegate.jvm.options` (its one reader) is.

A JVM may add jars *after* the archive's (the archive's class path a prefix of its own), not
before. Spark puts ``spark.driver.extraClassPath`` before its own jars, so the jars Tidegate
adds to a driver — hadoop-aws and the AWS SDK, its checkpoint file manager — go under
:data:`APPENDED_CLASS_PATH` instead, which a new session's launcher appends
(:data:`LAUNCHER_CLASS_PATH_ENV`, set by :func:`tidegate.spark.session.build_session`), so a
session on an S3 root keeps the archive too (``bench_jvm_start.py --s3``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from tidegate.errors import ConfigError
from tidegate.jvm.java import java_binary

ARCHIVE_ENV = "TIDEGATE_CLASS_ARCHIVE"  # auto (default): use it when built; off: never
DIR_ENV = "TIDEGATE_CLASS_ARCHIVE_DIR"  # where it lives (default: the environment's share/tidegate)
# an archive the JVM cannot use (another class path) is a warning on its stdout: not news
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
PREFIX = "spark-classes-"
# a session setting, never handed to Spark: class path entries for the driver's JVM, after Spark's jars
APPENDED_CLASS_PATH = "tidegate.driver.appendedClassPath"
LAUNCHER_CLASS_PATH_ENV = "SPARK_DIST_CLASSPATH"  # what Spark's launcher appends to a JVM's class path


def spark_jars() -> Path | None:
    """pyspark's ``jars/`` (found, not imported)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    jars = Path(spec.origin).parent / "jars"
    return jars if jars.is_dir() else None


def archive_path(env: Mapping[str, str] | None = None) -> Path | None:
    """Where the archive for this JVM build and these Spark jars lives (built or not); None
    when there is no java or no pyspark to make one for."""
    env = os.environ if env is None else env
    java, jars = java_binary(env), spark_jars()
    if java is None or jars is None:
        return None
    digest = hashlib.sha256(str(java).encode())
    for part in [java, *sorted(java.parent.parent.glob("lib/server/libjvm.so")), *sorted(jars.iterdir())]:
        stat = part.stat()
        digest.update(f"{part.name}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    directory = Path(env.get(DIR_ENV) or Path(sys.prefix) / "share" / "tidegate")
    return directory / f"{PREFIX}{digest.hexdigest()[:16]}.jsa"


def options(env: Mapping[str, str] | None = None) -> str:
    """The Java options that map the archive, or "" when it is off, not built, or at a path
    Spark's option string cannot carry (whitespace)."""
    env = os.environ if env is None else env
    setting = env.get(ARCHIVE_ENV, "auto").strip().lower()
    if setting == "off":
        return ""
    if setting not in ("", "auto"):
        raise ConfigError(
            f"{ARCHIVE_ENV}={env[ARCHIVE_ENV]!r} is not a setting", f"set {ARCHIVE_ENV} to auto (the default) or off"
        )
    path = archive_path(env)
    if path is None or not path.is_file() or any(c.isspace() for c in str(path)):
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def append_class_path(settings: dict[str, str], entries: list[str]) -> None:
    """Add ``entries`` to the driver's :data:`APPENDED_CLASS_PATH` and to the executors' class
    path (``spark.executor.extraClassPath``: a cluster's executors are other JVMs, which start
    without the archive either way), each once."""
    for key in (APPENDED_CLASS_PATH, "spark.executor.extraClassPath"):
        have = [p for p in settings.get(key, "").split(os.pathsep) if p]
        settings[key] = os.pathsep.join(have + [e for e in entries if e not in have])
