"""One class-data-sharing archive of the classes a Spark JVM loads, mapped by every JVM Tidegate starts.

A Spark JVM spends most of its own share of a start reading, parsing and verifying the
classes of Spark's jars. A dynamic CDS archive (``-XX:ArchiveClassesAtExit``) holds them
already parsed and verified; a JVM started with ``-XX:SharedArchiveFile`` maps it, and all
JVMs on the machine share the mapped pages. Measured on 2 cores (quiet): a session's start
4.0–4.3 s without it, 2.1–2.7 s with it; its first query 2.4–2.6 s, 1.2 s. Every restart,
failover, rehearsal and check starts a JVM, so this is recovery time.

Setup builds it (``scripts/bootstrap.sh`` runs ``python -m tidegate.spark.class_archive``):
a child process runs the main job over a small generated log on the streaming and the
batch path in a JVM that writes the archive when it exits; a second JVM must map it
(``-Xshare:on``) before it is renamed into place — a half-written archive crashes the JVM
that maps it, so no JVM ever sees one.

An archive is valid for the JVM build and Spark's jars it was made with. Its name carries a
digest of both: after a JDK or pyspark upgrade no archive matches, JVMs start as they did
without one, and setup builds a new one. A JVM whose class path differs (a standalone
cluster's executors) cannot use it and starts without it, silently. Free of pyspark, as
:mod:`tidegate.spark.jvm_options` (its one reader) is.

    python -m tidegate.spark.class_archive     # build it (a no-op when it exists); prints its path
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from tidegate.errors import ConfigError

ARCHIVE_ENV = "TIDEGATE_CLASS_ARCHIVE"  # auto (default): use it when built; off: never
DIR_ENV = "TIDEGATE_CLASS_ARCHIVE_DIR"  # where it lives (default: the environment's share/tidegate)
SPEC_ENV = "TIDEGATE_CLASS_ARCHIVE_SPEC"  # the job the workload runs (set by build for its children)
# an archive the JVM cannot use (another class path) is a warning on its stdout: not news
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
PREFIX = "spark-classes-"


def java_binary(env: Mapping[str, str] | None = None) -> Path | None:
    """The java Spark's launcher starts: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    env = os.environ if env is None else env
    home = env.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home and (Path(home) / "bin" / "java").is_file() else \
        shutil.which("java", path=env.get("PATH"))
    return Path(found).resolve() if found else None


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
        raise ConfigError(f"{ARCHIVE_ENV}={env[ARCHIVE_ENV]!r} is not a setting",
                          f"set {ARCHIVE_ENV} to auto (the default) or off")
    path = archive_path(env)
    if path is None or not path.is_file() or any(c.isspace() for c in str(path)):
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def build(env: Mapping[str, str] | None = None, timeout_s: float = 600) -> Path:
    """The archive for this JVM and these jars: built now unless it exists."""
    env = dict(os.environ if env is None else env)
    path = archive_path(env)
    if path is None:
        raise ConfigError("no java or no pyspark to build Spark's class archive for",
                          "install Java 17 and Tidegate (scripts/bootstrap.sh), then run this again")
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    child = env | {ARCHIVE_ENV: "off"}  # the workload's JVM writes the archive; it maps none
    # the children run in a scratch directory: name the job spec found from here (an installed,
    # not editable, Tidegate finds jobs/ only relative to the working directory, e.g. an image's)
    from tidegate.cli.demo import default_spec

    child.setdefault(SPEC_ENV, str(default_spec().resolve()))
    try:
        _run(["--dump", str(partial)], child, timeout_s, "running the job that loads Spark's classes")
        if not partial.is_file():
            raise ConfigError(f"the JVM wrote no class archive to {partial}",
                              "check that java is a HotSpot JDK 17 or later with CDS (java -Xshare:dump)")
        _run(["--map", str(partial)], child, timeout_s, "mapping the class archive just written")
        partial.replace(path)  # atomic: a JVM never maps half an archive
    finally:
        partial.unlink(missing_ok=True)
    for stale in path.parent.glob(f"{PREFIX}*.jsa"):  # another JDK's or pyspark's: ~150 MB each
        if stale != path:
            stale.unlink(missing_ok=True)
    return path


def _run(args: list[str], env: dict[str, str], timeout_s: float, doing: str) -> None:
    with tempfile.TemporaryDirectory(prefix="tidegate-class-archive-") as cwd:  # a JVM's crash report lands here
        done = subprocess.run([sys.executable, "-m", "tidegate.spark.class_archive", *args], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise ConfigError(f"{doing} failed:\n{(done.stdout + done.stderr).strip()[-3000:]}",
                          f"JVMs start without the archive meanwhile; set {ARCHIVE_ENV}=off to stop trying")


def _dump(partial: Path) -> None:
    """In a child: the main job over a small log, both paths, in a JVM that writes the archive
    of every class it loaded when it exits — and it must exit before this process does."""
    from tidegate.spark.jvm_options import java_options
    from tidegate.spark.session import build_session

    spark = build_session("tidegate-class-archive", conf={
        "spark.driver.extraJavaOptions": f"{java_options()} -XX:ArchiveClassesAtExit={partial}"})
    with tempfile.TemporaryDirectory(prefix="tidegate-class-archive-") as tmp:
        _workload(spark, Path(tmp))
    _exit_jvm(spark)


def _workload(spark, root: Path) -> None:
    from tidegate.cli.demo import default_spec
    from tidegate.hub import EventLog
    from tidegate.hub.generator import GeneratorConfig, generate
    from tidegate.jobspec import load_spec
    from tidegate.spark.pipeline.runner import run_batch, run_stream
    from tidegate.spark.tools.compare import compare

    log = EventLog.create(root / "hub", partitions=3, clock="manual")
    generate(log, GeneratorConfig(devices=8, partitions=3, events=3_000, seed=1, mode="backfill", rate_per_s=5.0,
                                  late_fraction=0.03, early_fraction=0.01, malformed_fraction=0.01))
    spec = load_spec(Path(os.environ[SPEC_ENV]) if os.environ.get(SPEC_ENV) else default_spec())
    stream = run_stream(spark, spec, root / "hub", root / "stream", extra_options={"maxEventsPerBatch": "1000"})
    batch = run_batch(spark, spec, root / "hub", root / "batch")
    diff = compare(spark.read.parquet(str(batch.paths.output)), spark.read.parquet(str(stream.paths.output)))
    if not diff.equal:
        raise SystemExit(f"the stream and the batch path differ ({diff.missing} missing, {diff.extra} extra)")


def _exit_jvm(spark) -> None:
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    spark.stop()
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    if proc is not None:  # the JVM exits when its stdin closes, after writing the archive
        proc.stdin.close()
        proc.wait(timeout=300)


def _map(partial: Path) -> None:
    """In a child: a session whose JVM must map the archive, or fail to start."""
    from tidegate.spark.jvm_options import java_options
    from tidegate.spark.session import build_session

    spark = build_session("tidegate-class-archive-check", conf={
        "spark.driver.extraJavaOptions": f"{java_options()} -Xshare:on -XX:SharedArchiveFile={partial}"})
    if spark.range(100).selectExpr("id % 7 AS k").groupBy("k").count().count() != 7:
        raise SystemExit("a session mapping the class archive computed a wrong answer")
    _exit_jvm(spark)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] in ("--dump", "--map"):
        (_dump if args[0] == "--dump" else _map)(Path(args[1]))
        return 0
    try:
        print(build())
    except (ConfigError, subprocess.TimeoutExpired) as exc:
        print(f"tidegate: Spark's class archive was not built: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
