"""Builds Spark's class archive (:mod:`tidegate.jvm.class_archive`): a Spark job whose JVM writes it.

Setup runs it (``scripts/bootstrap.sh``; the Docker image too): a child process runs the main
job over a small generated log on the streaming and the batch path in a JVM that writes the
archive when it exits; a second JVM must map it (``-Xshare:on``) before it is renamed into
place — a half-written archive crashes the JVM that maps it, so no JVM ever sees one.

    python -m tidegate.spark.class_archive     # build it (a no-op when it exists); prints its path
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from tidegate.errors import ConfigError
from tidegate.jvm.class_archive import ARCHIVE_ENV, PREFIX, archive_path

SPEC_ENV = "TIDEGATE_CLASS_ARCHIVE_SPEC"  # the job the workload runs (set by build for its children)


def build(env: Mapping[str, str] | None = None, timeout_s: float = 600) -> Path:
    """The archive for this JVM and these jars: built now unless it exists."""
    env = dict(os.environ if env is None else env)
    path = archive_path(env)
    if path is None:
        raise ConfigError(
            "no java or no pyspark to build Spark's class archive for",
            "install Java 17 and Tidegate (scripts/bootstrap.sh), then run this again",
        )
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    child = env | {ARCHIVE_ENV: "off"}  # the workload's JVM writes the archive; it maps none
    # the children run in a scratch directory: name the job spec found from here (an installed,
    # not editable, Tidegate finds jobs/ only relative to the working directory, e.g. an image's)
    from tidegate.jobspec import default_spec

    child.setdefault(SPEC_ENV, str(default_spec().resolve()))
    try:
        _run(["--dump", str(partial)], child, timeout_s, "running the job that loads Spark's classes")
        if not partial.is_file():
            raise ConfigError(
                f"the JVM wrote no class archive to {partial}",
                "check that java is a HotSpot JDK 17 or later with CDS (java -Xshare:dump)",
            )
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
        done = subprocess.run(
            [sys.executable, "-m", "tidegate.spark.class_archive", *args],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    if done.returncode != 0:
        raise ConfigError(
            f"{doing} failed:\n{(done.stdout + done.stderr).strip()[-3000:]}",
            f"JVMs start without the archive meanwhile; set {ARCHIVE_ENV}=off to stop trying",
        )


def _dump(partial: Path) -> None:
    """In a child: the main job over a small log, both paths, in a JVM that writes the archive
    of every class it loaded when it exits — and it must exit before this process does."""
    from tidegate.jvm.options import java_options
    from tidegate.spark.session import build_session

    spark = build_session(
        "tidegate-class-archive",
        conf={"spark.driver.extraJavaOptions": f"{java_options()} -XX:ArchiveClassesAtExit={partial}"},
    )
    with tempfile.TemporaryDirectory(prefix="tidegate-class-archive-") as tmp:
        _workload(spark, Path(tmp))
    _exit_jvm(spark)


def _workload(spark, root: Path) -> None:
    from tidegate.inputs.event_log import EventLog
    from tidegate.inputs.event_log.generator import GeneratorConfig, generate
    from tidegate.jobspec import default_spec, load_spec
    from tidegate.spark.pipeline.runner import run_batch, run_stream
    from tidegate.spark.tools.compare import compare

    log = EventLog.create(root / "event-log", partitions=3, clock="manual")
    generate(
        log,
        GeneratorConfig(
            devices=8,
            partitions=3,
            events=3_000,
            seed=1,
            mode="backfill",
            rate_per_s=5.0,
            late_fraction=0.03,
            early_fraction=0.01,
            malformed_fraction=0.01,
        ),
    )
    # the workload reads the log it just generated, never the one the spec names: wherever the
    # platform's event-log folders are (an image's $TIDEGATE_HOME is absolute), it may lie anywhere
    spec = load_spec(Path(os.environ[SPEC_ENV]) if os.environ.get(SPEC_ENV) else default_spec(), log_dirs=[Path("/")])
    stream = run_stream(spark, spec, root / "event-log", root / "stream", extra_options={"maxEventsPerBatch": "1000"})
    batch = run_batch(spark, spec, root / "event-log", root / "batch")
    diff = compare(spark.read.parquet(str(batch.paths.output)), spark.read.parquet(str(stream.paths.output)))
    if not diff.equal:
        raise SystemExit(f"the stream and the batch path differ ({diff.missing} missing, {diff.extra} extra)")


def _exit_jvm(spark) -> None:
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    assert gateway is not None  # the session's SparkContext launched it
    spark.stop()
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    if proc is not None:  # the JVM exits when its stdin closes, after writing the archive
        proc.stdin.close()
        proc.wait(timeout=300)


def _map(partial: Path) -> None:
    """In a child: a session whose JVM must map the archive, or fail to start."""
    from tidegate.jvm.options import java_options
    from tidegate.spark.session import build_session

    spark = build_session(
        "tidegate-class-archive-check",
        conf={"spark.driver.extraJavaOptions": f"{java_options()} -Xshare:on -XX:SharedArchiveFile={partial}"},
    )
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
