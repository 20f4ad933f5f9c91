"""Benchmark: Tidegate's commit record against Delta Lake and Apache Iceberg, batch by batch.

    .venv/bin/python bench/bench_table_formats.py [--batches 40] [--rows 3000] [--work DIR] [--write]

The same ``--batches`` batches of ``--rows`` rows over three hours (bench_commit's rows),
appended, each on a local folder and on a local SeaweedFS server:

* **tidegate**: bench_commit's own measurement (the driver-held path,
  :func:`tidegate.spark.pipeline.sink.files.write_batch_table`, under a claimed fence); the
  commit is the fsync-and-rename locally, the put-if-absent of ``_commits/N.json`` on S3. No
  Spark: the rows are written by the driver with Arrow.
* **delta**: ``df.write.format("delta").option("txnAppId", …).option("txnVersion", n)
  .mode("append")``, partitioned by hour — Delta's idempotent append per batch.
* **iceberg**: a table partitioned by hour in a JDBC catalog kept in a SQLite file, through
  Iceberg's Java API (its Spark runtime, built for Spark 4.1, does not load in Spark 4.2):
  the driver writes each hour's Parquet file, a fast append commits them (HadoopFileIO, so
  the metadata goes through S3A). Not yet seen to run end to end.

For Delta, **batch** is the whole ``write`` call and **commit** the part of it after the
write's first Spark job ended (tasks done, files written): the log entry and whatever Delta
does after it (its checkpoint every ten versions); for Iceberg, the fast append's
``commit()``. Job end times come from Spark's own status API. S3 requests per batch are
S3A's counters (Delta, Iceberg) and the driver's calls on the store (Tidegate, as
bench_storage counts them). Then each writer is given batch 0 again: whether the rows are
still those of the 40 batches says whether a re-run of a batch is a no-op.

The jars (Delta for Spark 4.2, Iceberg's runtime for Spark 4.1 — the newest published — and
SQLite's JDBC driver) are pinned in bench/maven/table-formats/pom.xml and fetched once with
Maven into ``$TIDEGATE_JVM_DEPS/table-formats`` (git-ignored); not part of the runtime.
Results: docs/benchmarks/bench_table_formats.md.
"""

from __future__ import annotations

import argparse
import calendar
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds

import bench_commit
import results_page
from bench_storage import S3A_REQUESTS, StoreCounter
from scratch import scratch
from tidegate.lineage import commits
from tidegate.lineage.fence import LeaseClock, LineageFence
from tidegate.lineage.layout import JobPaths
from tidegate.spark.pipeline.sink import files
from tidegate.storage.store import LOCAL, S3Store

BUCKET = "bench"
HERE = Path(__file__).resolve().parent
POM = HERE / "maven" / "table-formats" / "pom.xml"
KINDS = tuple(S3A_REQUESTS)


def jars() -> list[Path]:
    """The bench's jars, fetched with Maven the first time (or when the pom changed)."""
    deps = Path(os.environ.get("TIDEGATE_JVM_DEPS", HERE.parent / "var" / "jvm")) / "table-formats"
    want = hashlib.sha256(POM.read_bytes()).hexdigest()
    stamp = deps / ".fetched"
    if not (stamp.is_file() and stamp.read_text().strip() == want):
        partial = deps.with_name(deps.name + ".partial")
        subprocess.run(["rm", "-rf", str(partial)], check=True)
        cache = Path(os.environ.get("TIDEGATE_CACHE", Path.home() / ".cache" / "tidegate")) / "m2"
        print(f"fetching the table-format jars with Maven into {deps}", file=sys.stderr)
        subprocess.run(
            [
                "mvn",
                "-q",
                "-B",
                "-Dstyle.color=never",
                f"-Dmaven.repo.local={cache}",
                "-f",
                str(POM),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={partial}",
            ],
            check=True,
        )
        (partial / ".fetched").write_text(want + "\n")
        subprocess.run(["rm", "-rf", str(deps)], check=True)
        partial.rename(deps)
    return sorted(deps.glob("*.jar"))


class Run:
    def __init__(self, name: str) -> None:
        self.name = name
        self.batch: list[float] = []
        self.commit: list[float] = []
        self.requests: dict[str, int] | None = None
        self.rerun = ""


# ---- Tidegate: bench_commit's path ---------------------------------------------------------


def tidegate(paths: JobPaths, batches: int, n: int, name: str) -> Run:
    run = Run(name)
    with StoreCounter(S3Store) as counter:
        timed = bench_commit.measure(paths, batches, n)
    run.batch, run.commit = timed["batch"], timed["commit"]
    if not paths.store.is_local:
        run.requests = {k: counter.calls.get(k, 0) for k in KINDS}
    before = _tidegate_rows(paths)
    clock = LeaseClock(ttl_s=3600)
    clock.renewed(time.monotonic())
    fence = LineageFence(paths.root, 1, "bench", clock, lambda: True, store=paths.store)
    fence.claim()
    try:
        files.write_batch_table(bench_commit.rows(0, n), paths.output, 0, fence=fence, store=paths.store)
        outcome = "returned"
    except Exception as failed:  # noqa: BLE001 - what a re-run does is the finding
        outcome = f"raised {type(failed).__name__}"
    after = _tidegate_rows(paths)
    run.rerun = f"{outcome}; rows {before:,} → {after:,}"
    return run


def _tidegate_rows(paths: JobPaths) -> int:
    if paths.store.is_local:  # the published files (staging and hidden folders are skipped)
        return ds.dataset(str(paths.output), format="parquet", partitioning="hive").count_rows()
    commits._cached_json.cache_clear()
    return sum(
        f["rows"]
        for b in commits.committed_batches(paths.store, paths.output)
        for f in commits.read_record(paths.store, paths.output, b)["files"]
    )


# ---- Delta and Iceberg ---------------------------------------------------------------------


def session(work: Path, settings):
    from tidegate.spark.session import build_session
    from tidegate.storage.spark import session_conf

    conf = session_conf(
        {BUCKET: settings},
        {
            "spark.jars": ",".join(str(j) for j in jars()),
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            "spark.ui.enabled": "true",
            "spark.ui.port": "0",
            "spark.ui.retainedJobs": "100000",
        },
    )
    return build_session("bench-table-formats", master="local[2]", conf=conf)


def s3a_counters(spark) -> dict[str, int]:
    jvm = spark._jvm
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI(f"s3a://{BUCKET}/"), spark._jsc.hadoopConfiguration())
    counters = dict(fs.getIOStatistics().counters())
    return {kind: sum(int(counters.get(n, 0)) for n in names) for kind, names in S3A_REQUESTS.items()}


def job_ends(spark) -> dict[str, float]:
    """Each job group's first job's end (epoch seconds), from Spark's status API."""
    app = spark.sparkContext.applicationId
    with urllib.request.urlopen(f"{spark.sparkContext.uiWebUrl}/api/v1/applications/{app}/jobs", timeout=60) as r:
        jobs = json.load(r)
    first: dict[str, tuple[int, float]] = {}
    for job in jobs:
        group, done = job.get("jobGroup"), job.get("completionTime")
        if not group or not done:
            continue
        ended = calendar.timegm(time.strptime(done[:19], "%Y-%m-%dT%H:%M:%S")) + int(done[20:23]) / 1000
        if group not in first or job["jobId"] < first[group][0]:
            first[group] = (job["jobId"], ended)
    return {group: ended for group, (_, ended) in first.items()}


def spark_run(spark, name: str, frames: list, write, count, s3: bool) -> Run:
    run = Run(name)
    before = s3a_counters(spark) if s3 else None
    returned: dict[str, float] = {}
    for batch_id, df in enumerate(frames):
        group = f"{name}#{batch_id}"
        spark.sparkContext.setJobGroup(group, group)
        started = time.perf_counter()
        write(df, batch_id)
        run.batch.append(time.perf_counter() - started)
        returned[group] = time.time()
    spark.sparkContext.setJobGroup(f"{name}#count", "count")
    if s3:
        after = s3a_counters(spark)
        run.requests = {k: after[k] - before[k] for k in KINDS}
    ends = job_ends(spark)
    run.commit = [returned[g] - ends[g] for g in returned if g in ends]
    rows_before = count()
    try:
        write(frames[0], 0)
        outcome = "returned"
    except Exception as failed:  # noqa: BLE001 - what a re-run does is the finding
        outcome = f"raised {type(failed).__name__}"
    run.rerun = f"{outcome}; rows {rows_before:,} → {count():,}"
    return run


def delta(spark, path: str, frames: list, name: str, s3: bool) -> Run:
    def write(df, batch_id):
        (
            df.write.format("delta")
            .option("txnAppId", "bench")
            .option("txnVersion", batch_id)
            .partitionBy(files.HOUR_KEY)
            .mode("append")
            .save(path)
        )

    return spark_run(spark, name, frames, write, lambda: spark.read.format("delta").load(path).count(), s3)


def iceberg(spark, warehouse: str, store, tables: list, name: str, s3: bool, catalog_db: Path) -> Run:
    """Iceberg through its Java API: Iceberg's Spark runtime (built for Spark 4.1) does not
    load in Spark 4.2 (its SparkView implements a View that 4.2 made a class), so the rows are
    written as Parquet by the driver (as Tidegate writes them) and appended to a table of a
    JdbcCatalog (SQLite) with a fast append: what is timed as commit is that append's commit."""
    import pyarrow.parquet as pq

    jvm = spark._jvm
    ice, types = jvm.org.apache.iceberg, jvm.org.apache.iceberg.types.Types
    catalog = ice.jdbc.JdbcCatalog()
    catalog.setConf(spark._jsc.hadoopConfiguration())
    props = jvm.java.util.HashMap()
    for k, v in {"uri": f"jdbc:sqlite:{catalog_db}", "warehouse": warehouse, "jdbc.schema-version": "V1"}.items():
        props.put(k, v)
    catalog.initialize(name.replace(" ", "_"), props)
    fields = jvm.java.util.ArrayList()
    for i, f in enumerate(tables[0].schema, start=1):
        kind = types.DoubleType.get() if pa.types.is_floating(f.type) else types.LongType.get()
        fields.add(types.NestedField.optional(i, f.name, kind))
    schema = ice.Schema(fields)
    spec = ice.PartitionSpec.builderFor(schema).identity(files.HOUR_KEY).build()
    levels = spark.sparkContext._gateway.new_array(jvm.java.lang.String, 1)
    levels[0] = "bench"
    namespace = ice.catalog.Namespace.of(levels)
    if not catalog.namespaceExists(namespace):
        catalog.createNamespace(namespace)
    table = catalog.createTable(ice.catalog.TableIdentifier.of(namespace, "t"), schema, spec)
    location = table.location()
    base = store.path_of(_parse_root(location)) if s3 else Path(location.removeprefix("file:"))
    counter = StoreCounter(S3Store)

    def write(batch: pa.Table, batch_id: int, attempt: list[int]):
        attempt[0] += 1
        append = table.newFastAppend()
        for hour in sorted(set(batch.column(files.HOUR_KEY).to_pylist())):
            part = batch.filter(pa.compute.equal(batch[files.HOUR_KEY], hour))
            sink = pa.BufferOutputStream()
            pq.write_table(part, sink)
            data = sink.getvalue().to_pybytes()
            path = base / "data" / f"{files.HOUR_KEY}={hour}" / f"{batch_id}-{attempt[0]}.parquet"
            store.write_bytes(path, data)
            append.appendFile(
                ice.DataFiles.builder(spec)
                .withPath(store.uri(path))
                .withFileSizeInBytes(len(data))
                .withRecordCount(part.num_rows)
                .withPartitionPath(f"{files.HOUR_KEY}={hour}")
                .withFormat("PARQUET")
                .build()
            )
        started = time.perf_counter()
        append.commit()
        return time.perf_counter() - started

    run, attempt = Run(name), [0]
    before = s3a_counters(spark) if s3 else None
    with counter:
        for batch_id, batch in enumerate(tables):
            started = time.perf_counter()
            run.commit.append(write(batch, batch_id, attempt))
            run.batch.append(time.perf_counter() - started)
    if s3:
        after = s3a_counters(spark)
        run.requests = {k: after[k] - before[k] + counter.calls.get(k, 0) for k in KINDS}

    def count() -> int:
        table.refresh()
        return int(table.currentSnapshot().summary().get("total-records"))

    rows_before = count()
    write(tables[0], 0, attempt)
    run.rerun = f"returned; rows {rows_before:,} → {count():,}"
    return run


def _parse_root(text: str):
    from tidegate.storage.uri import parse_root

    return parse_root(text)


# ---- the report ----------------------------------------------------------------------------


def summary(seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    return f"{statistics.median(ms):7.1f} {p95:7.1f}"


def report(runs: list[Run], batches: int, n: int) -> None:
    load = os.getloadavg()
    print(
        f"{batches} batches of {n:,} rows over 3 hours each, appended; one process, loopback; "
        f"load {load[0]:.0f}/{load[1]:.0f}/{load[2]:.0f} (1/5/15 min) at the end, on {os.cpu_count()} cores"
    )
    print(f"{'':<18} {'batch ms':>15}   {'commit ms':>15}   S3 requests per batch")
    print(f"{'':<18} {'median     p95':>15}   {'median     p95':>15}")
    for run in runs:
        requests = (
            "—"
            if run.requests is None
            else ", ".join(f"{k} {v / batches:.1f}" for k, v in run.requests.items() if v)
            + f" (total {sum(run.requests.values()) / batches:.1f})"
        )
        print(f"{run.name:<18} {summary(run.batch)}   {summary(run.commit)}   {requests}")
    print("re-run of batch 0:")
    for run in runs:
        print(f"  {run.name:<16} {run.rerun}")
    by = {r.name: r for r in runs}
    for store in ("local", "s3"):
        base = by.get(f"tidegate {store}")
        if base:
            ratios = ", ".join(
                f"{r.name.split()[0]} {statistics.median(r.batch) / statistics.median(base.batch):.1f}×"
                for r in runs
                if r.name.endswith(store) and r is not base
            )
            print(f"median batch against tidegate, {store}: {ratios}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--work", type=Path, default=None)
    args = results_page.parse_args(parser, argv)
    from tidegate.storage.seaweedfs import LocalS3Server
    from tidegate.storage.uri import parse_root

    runs: list[Run] = []
    with scratch(args.work, "bench-table-formats") as work:
        server = LocalS3Server(work / "s3", name="bench").start()
        try:
            server.create_bucket(BUCKET)
            settings = server.settings()
            store = S3Store(settings)
            runs.append(tidegate(JobPaths(work / "local"), args.batches, args.rows, "tidegate local"))
            runs.append(
                tidegate(
                    JobPaths(store.path_of(parse_root(f"s3a://{BUCKET}/lineage")), store),
                    args.batches,
                    args.rows,
                    "tidegate s3",
                )
            )
            spark = session(work, settings)
            try:
                tables = [bench_commit.rows(b, args.rows) for b in range(args.batches)]
                frames = [spark.createDataFrame(t) for t in tables]
                print(f"Spark {spark.version}; " + ", ".join(j.name for j in jars()), file=sys.stderr)
                for target, s3 in (((work / "delta").as_uri(), False), (f"s3a://{BUCKET}/delta", True)):
                    runs.append(delta(spark, target, frames, f"delta {'s3' if s3 else 'local'}", s3))
                for warehouse, target, s3 in (
                    ((work / "iceberg").as_uri(), LOCAL, False),
                    (f"s3a://{BUCKET}/iceberg", store, True),
                ):
                    try:
                        runs.append(
                            iceberg(
                                spark,
                                warehouse,
                                target,
                                tables,
                                f"iceberg {'s3' if s3 else 'local'}",
                                s3,
                                work / "iceberg-catalog.db",
                            )
                        )
                    except Exception as failed:  # noqa: BLE001 - reported, the other figures stand
                        print(f"iceberg {'s3' if s3 else 'local'}: failed: {str(failed)[:300]}")
            finally:
                spark.stop()
        finally:
            server.stop()
    order = [f"{f} {s}" for s in ("local", "s3") for f in ("tidegate", "delta", "iceberg")]
    report(sorted(runs, key=lambda r: order.index(r.name)), args.batches, args.rows)
    return 0


if __name__ == "__main__":
    sys.exit(results_page.run(main, __file__))
