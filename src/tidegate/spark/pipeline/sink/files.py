"""The batch's folders and files: staged where no reader looks, fsynced, renamed into place
inside the fence — the promises :mod:`tidegate.spark.pipeline.sink` states."""

from __future__ import annotations

import json
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from pyspark import inheritable_thread_target
from pyspark.sql import DataFrame

from tidegate.lineage.layout import batch_name, is_staging, staging_dir
from tidegate.runtime.fencing import NO_FENCE

DRIVER_WRITE_ROWS = 50_000  # outputs up to this size are written by the driver (quarantine is usually tiny)


def publish(staged: Path, final: Path, *, fence=NO_FENCE, replace: bool = False) -> bool:
    """Make ``staged`` visible as ``final``: fsync it, then rename it inside the fence.
    False (and ``staged`` removed) when ``final`` is already visible and not ``replace``."""
    sync_tree(staged)
    with fence.commit(f"{final.parent.name}/{final.name}"):
        if final.exists():
            if not replace:
                shutil.rmtree(staged, ignore_errors=True)
                return False
            if final.is_dir():  # a file is replaced by the rename itself, atomically
                shutil.rmtree(final)
        os.replace(staged, final)
    sync_dir(final.parent)
    return True


def sync_tree(path: Path) -> None:
    """fsync every file under ``path`` (or the file itself) and every folder in it."""
    if path.is_file():
        _fsync(path, os.O_RDONLY)
        return
    for folder, _dirs, files in os.walk(path):
        for name in files:
            _fsync(Path(folder) / name, os.O_RDONLY)
        sync_dir(Path(folder))


def sync_dir(path: Path) -> None:
    _fsync(path, os.O_RDONLY | os.O_DIRECTORY)


def _fsync(path: Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def clear_partial_writes(folders: list[Path]) -> list[Path]:
    """Remove staging left in ``folders`` by a crashed or stopped driver; what was removed.
    Only the lineage's driver calls it, after claiming the lineage's fence."""
    removed = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for p in folder.iterdir():
            if is_staging(p.name):
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
                removed.append(p)
    return removed


def write_batch(df: DataFrame, base: Path, batch_id: int, *, rows: int | None = None, fence=NO_FENCE) -> None:
    """Write one batch's rows so readers see all of them or none (rename of a directory).

    With ``rows`` known and at most ``DRIVER_WRITE_ROWS``, they come to the driver as Arrow
    and are written from there (one light collect instead of a write job and its commit
    protocol); otherwise Spark writes them."""
    final = base / batch_name(batch_id)
    if final.exists():  # written by an earlier attempt of the same batch: identical
        return
    tmp = staging_dir(base, final.name)
    if rows is not None and rows <= DRIVER_WRITE_ROWS:
        write_table(df.toArrow(), tmp)
    else:
        df.write.mode("overwrite").parquet(str(tmp))
    publish(tmp, final, fence=fence)


def write_table(table, directory: Path) -> None:
    """Write a small Arrow table the driver holds as one Parquet file of ``directory``, as
    Spark would (INT96 timestamps) — without a Spark job and its commit protocol."""
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, directory / "part-00000.parquet", use_deprecated_int96_timestamps=True)


def write_document(doc: dict, path: Path, *, fence=NO_FENCE) -> None:
    """A small JSON file, replaced whole (the batch's metrics)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = staging_dir(path.parent, path.name)
    tmp.write_text(json.dumps(doc, sort_keys=True))
    publish(tmp, path, fence=fence, replace=True)


def run_together(lanes: list[list[tuple[str, Callable[[], None]]]]) -> dict[str, float]:
    """Run lanes of Spark writes concurrently, each lane's writes in order; the wall
    seconds of each write.

    Every input is cached or small, so on a few cores the jobs' fixed costs (planning,
    scheduling, committing files) overlap instead of adding up; a lane orders writes
    where the first fills a cache the next reads. Threads inherit the batch's Spark job
    group, so stopping the query cancels them too. Raises the first failure after all
    lanes have ended (a half-written batch is re-run whole; nothing is visible until its
    rename)."""
    seconds: dict[str, float] = {}

    def run(lane: list[tuple[str, Callable[[], None]]]) -> None:
        for name, write in lane:
            started = time.monotonic()
            write()
            seconds[name] = round(time.monotonic() - started, 3)

    with ThreadPoolExecutor(max_workers=max(1, len(lanes)), thread_name_prefix="tidegate-write") as pool:
        futures = [pool.submit(inheritable_thread_target(run), lane) for lane in lanes]
        errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        raise errors[0]
    return seconds
