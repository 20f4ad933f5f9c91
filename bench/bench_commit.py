"""Benchmark: what committing one batch costs on a local root and on an S3 store.

    .venv/bin/python bench/bench_commit.py [--batches 40] [--rows 3000] [--work DIR]

Writes ``--batches`` batches of ``--rows`` driver-held rows spread over three hours (the
sink's path for small outputs, :func:`tidegate.spark.pipeline.sink.files.write_batch_table`)
under a claimed :class:`~tidegate.lineage.fence.LineageFence` (its database check answers at
once: the database is not what is measured), once on a local folder and once on a local
SeaweedFS server (``scripts/seaweedfs.sh`` builds it). Per store it prints the median and
95th percentile of

* **batch**: the whole write — files written, fence checked, batch made visible;
* **commit**: the step that makes the batch visible — locally the fsync of the staged
  parts and their renames under the fence's lock; on S3 the fence's listing of epochs and
  the put-if-absent of the batch's commit record.

No Spark. Results: docs/benchmarks/bench_commit.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import pyarrow as pa

from scratch import scratch
from tidegate.lineage import commits
from tidegate.lineage.fence import LeaseClock, LineageFence
from tidegate.lineage.layout import BATCH_COLUMN, HOUR_US, JobPaths
from tidegate.spark.pipeline.sink import files, objects
from tidegate.storage.store import S3Store

H0 = 1_767_225_600_000_000 // HOUR_US


def rows(batch_id: int, n: int) -> pa.Table:
    ids = list(range(batch_id * n, (batch_id + 1) * n))
    return pa.table(
        {
            "id": ids,
            "value": [i * 0.5 for i in ids],
            BATCH_COLUMN: [batch_id] * n,
            files.HOUR_KEY: [H0 + i % 3 for i in range(n)],
        }
    )


def measure(paths: JobPaths, batches: int, n: int) -> dict[str, list[float]]:
    clock = LeaseClock(ttl_s=3600)
    clock.renewed(time.monotonic())
    fence = LineageFence(paths.root, 1, "bench", clock, lambda: True, store=paths.store)
    fence.claim()
    timed = {"batch": [], "commit": []}
    original = (files.publish_hours, objects._commit)

    def timing(step):
        def timed_step(*args, **kwargs):
            started = time.perf_counter()
            try:
                return step(*args, **kwargs)
            finally:
                timed["commit"].append(time.perf_counter() - started)

        return timed_step

    files.publish_hours, objects._commit = timing(original[0]), timing(original[1])
    try:
        if paths.store.is_local:
            Path(paths.output).mkdir(parents=True, exist_ok=True)
        for batch_id in range(batches):
            started = time.perf_counter()
            files.write_batch_table(rows(batch_id, n), paths.output, batch_id, fence=fence, store=paths.store)
            timed["batch"].append(time.perf_counter() - started)
    finally:
        files.publish_hours, objects._commit = original
    if not paths.store.is_local:
        assert commits.committed_batches(paths.store, paths.output) == list(range(batches))
    return timed


def summary(seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    return f"{statistics.median(ms):7.1f} ms  p95 {p95:7.1f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args(argv)
    from tidegate.storage.seaweedfs import LocalS3Server

    with scratch(args.work, "bench-commit") as work:
        results = {"local": measure(JobPaths(work / "local"), args.batches, args.rows)}
        server = LocalS3Server(work / "s3", name="bench").start()
        try:
            server.create_bucket("bench")
            store = S3Store(server.settings())
            results["s3 (SeaweedFS)"] = measure(
                JobPaths(store.path_of(_root("s3a://bench/lineage")), store), args.batches, args.rows
            )
        finally:
            server.stop()
    print(f"{args.batches} batches of {args.rows:,} rows over 3 hours each, one process, loopback")
    for name, timed in results.items():
        print(f"{name:<16} batch {summary(timed['batch'])}   commit {summary(timed['commit'])}")
    return 0


def _root(text: str):
    from tidegate.storage.uri import parse_root

    return parse_root(text)


if __name__ == "__main__":
    sys.exit(main())
