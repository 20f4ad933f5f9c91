"""The batch's folders and files: staged where no reader looks, fsynced, renamed into place
inside the fence — the promises :mod:`tidegate.spark.pipeline.sink` states. On an object
store (``store`` not local) the rows are written in place and committed by record instead
(:mod:`.objects`)."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePath

import pyarrow as pa
from pyspark import inheritable_thread_target
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from tidegate.errors import TidegateError
from tidegate.lineage.committed import compacted_through
from tidegate.lineage.fence import NO_FENCE
from tidegate.lineage.layout import BATCH_COLUMN, HOUR_US, batch_folder_name, hour_dir, is_staging, staging_dir
from tidegate.spark.pipeline.sink.objects import HOUR_KEY, publish_frame, publish_table
from tidegate.storage.store import LOCAL, Store

DRIVER_WRITE_ROWS = 50_000  # outputs up to this size are written by the driver (quarantine is usually tiny)
# a bad input row keeps its text, which may be as large as a record the log accepts: one comes to the
# driver with the batch's counts only when its key and payload fit this, so the driver receives at
# most DRIVER_WRITE_ROWS × this many bytes of such text (64 MiB)
DRIVER_ROW_TEXT_BYTES = (64 << 20) // DRIVER_WRITE_ROWS


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


def clear_partial_writes(folders: list[PurePath], store: Store = LOCAL, *, state: PurePath | None = None,
                         ) -> list[PurePath]:  # fmt: skip
    """Remove staging left in ``folders`` by a crashed or stopped driver; what was removed.
    Only the lineage's driver calls it, after claiming the lineage's fence.

    On an object store: the files of attempts that lost to a batch's commit record, and
    state versions' attempts that lost to its ``_committed.json`` (``state``: the state
    folder among ``folders``); a batch not yet decided keeps all its files."""
    if not store.is_local:
        from tidegate.lineage.commits import clear_state_attempts, clear_uncommitted

        return [
            p
            for folder in folders
            for p in (clear_state_attempts(store, folder) if folder == state else clear_uncommitted(store, folder))
        ]
    removed: list[PurePath] = []
    local = [Path(folder) for folder in folders]  # a local store's folders are local paths
    days = [day for folder in local if folder.is_dir() for day in folder.glob("date=*")]  # metrics stage there
    for folder in local + days:
        if not folder.is_dir():
            continue
        for p in folder.iterdir():
            if is_staging(p.name):
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
                removed.append(p)
    return removed


def write_batch(
    df: DataFrame,
    base: PurePath,
    batch_id: int,
    *,
    time_column: Column,
    rows: int | None = None,
    probe: bool = False,
    fence=NO_FENCE,
    store: Store = LOCAL,
) -> list[PurePath]:
    """Write one batch's rows into the hour folders of ``time_column`` (``date=D/hour=H/batch-N``),
    each row with its ``batch_id``; the folders the batch has. Each folder becomes visible
    whole (a rename), all of them inside one fence commit, in time order.

    With ``rows`` known and at most ``DRIVER_WRITE_ROWS``, they come to the driver as Arrow
    and are written from there (one light collect instead of a write job and its commit
    protocol); otherwise Spark writes them. ``probe`` (rows not known, usually few — a
    batch's window rows): up to ``DRIVER_WRITE_ROWS + 1`` come to the driver, and if that is
    all of them, that collect was the write; else Spark writes them all. A batch already merged by compaction writes
    nothing: its rows are in the compacted files.

    On an object store: the files of the batch (each hour's, in place), committed by record."""
    through = compacted_through(base) if store.is_local else None
    if rows == 0 or (through is not None and batch_id <= through):
        return []  # known empty (no Spark job to find that out), or merged by compaction
    hours = df.withColumns(hour_columns(time_column))
    if rows is not None and rows <= DRIVER_WRITE_ROWS:
        head = with_batch_id(hours.toArrow(), batch_id)
    elif (
        probe and rows is None and (head := hours.limit(DRIVER_WRITE_ROWS + 1).toArrow()).num_rows <= DRIVER_WRITE_ROWS
    ):
        head = with_batch_id(head, batch_id)  # not known, and few: the one collect that found out is the write
    else:
        head = None
    tagged = df.withColumns(batch_columns(batch_id, time_column)) if head is None else None  # Spark writes them
    if not store.is_local:
        if tagged is not None:
            return publish_frame(tagged, base, batch_id, store, fence=fence)
        return publish_table(head, base, batch_id, store, fence=fence) if head.num_rows else []
    local = Path(base)  # a local store's paths are local paths
    tmp = staging_dir(local, batch_folder_name(batch_id))
    if tagged is not None:
        tagged.write.mode("overwrite").partitionBy(HOUR_KEY).parquet(str(tmp))
    else:
        write_hours(head, tmp)
    return publish_hours(tmp, local, batch_id, fence=fence)


def write_batch_table(table, base: PurePath, batch_id: int, *, fence=NO_FENCE, store: Store = LOCAL) -> list[PurePath]:
    """:func:`write_batch` for rows the driver already holds as Arrow, with the columns
    ``write_batch`` adds (``BATCH_COLUMN``, then ``HOUR_KEY``) already computed — by Spark,
    from the same expressions, so the files are the ones ``write_batch`` writes."""
    through = compacted_through(base) if store.is_local else None
    if table.num_rows == 0 or (through is not None and batch_id <= through):
        return []
    if not store.is_local:
        return publish_table(table, base, batch_id, store, fence=fence)
    local = Path(base)  # a local store's paths are local paths
    tmp = staging_dir(local, batch_folder_name(batch_id))
    write_hours(table, tmp)
    return publish_hours(tmp, local, batch_id, fence=fence)


def batch_columns(batch_id: int, time_column: Column) -> dict[str, Column]:
    """The columns :func:`write_batch` adds to every row of batch ``batch_id``, when Spark
    writes them; rows that come to the driver get :func:`hour_columns` from Spark and the
    batch id from :func:`with_batch_id` instead."""
    return {BATCH_COLUMN: F.lit(batch_id).cast("long"), **hour_columns(time_column)}


def hour_columns(time_column: Column) -> dict[str, Column]:
    """The hour key of :func:`batch_columns`: the same every batch, so a collect that adds it
    reuses the last batch's generated code (a batch id literal in the plan compiles anew each batch)."""
    return {HOUR_KEY: F.floor(F.unix_micros(time_column) / F.lit(HOUR_US)).cast("long")}


def with_batch_id(table: pa.Table, batch_id: int, *, name: str = BATCH_COLUMN, before: str = HOUR_KEY) -> pa.Table:
    """``table`` (collected with :func:`hour_columns`) with the batch id column :func:`batch_columns`
    would have given it — same place (just before ``before``), type and nullability."""
    column = pa.array([batch_id] * table.num_rows, pa.int64())
    return table.add_column(table.schema.get_field_index(before), pa.field(name, pa.int64(), nullable=False), column)


def write_hours(table, directory: Path) -> None:
    """The driver's Arrow rows as Spark's ``partitionBy(HOUR_KEY)`` would lay them out."""
    import pyarrow.compute as pc

    directory.mkdir(parents=True, exist_ok=True)
    hours = table.column(HOUR_KEY)
    for hour in pc.unique(hours).to_pylist():
        part = table.filter(pc.equal(hours, hour)) if hour is not None else table.filter(pc.is_null(hours))
        write_table(part.drop_columns([HOUR_KEY]), directory / f"{HOUR_KEY}={hour}")


def publish_hours(staged: Path, base: Path, batch_id: int, *, fence=NO_FENCE) -> list[PurePath]:
    """Move each staged ``_hour=H`` folder to ``hour_dir(H)/batch-N``: fsynced first, renamed
    inside one fence commit; an hour already visible (an earlier attempt of the same batch
    wrote the same rows) is left as it is."""
    try:
        sync_tree(staged)
        listed = list(staged.iterdir())
    except FileNotFoundError:
        # cleared by the lineage's next driver (clear_partial_writes) while this one was paused
        # between staging and publishing: the fence says why, and a stale driver stops there
        with fence.commit(f"{base.name}/{batch_folder_name(batch_id)}"):
            raise
    parts = []
    for p in listed:
        if not p.name.startswith(f"{HOUR_KEY}="):
            continue  # Spark's _SUCCESS and checksums
        value = p.name.split("=", 1)[1]
        if not value.lstrip("-").isdigit():
            raise TidegateError(
                f"batch {batch_id} of {base} has rows without a time to file them under ({p.name})",
                "every row of an output needs its time column (window end, system or arrival "
                "time) set; this is a bug of the engine, report it with the batch's input",
            )
        parts.append((int(value), p))
    parts.sort()
    finals: list[PurePath] = []
    with fence.commit(f"{base.name}/{batch_folder_name(batch_id)}"):
        for hour, part in parts:
            final = hour_dir(base, hour) / batch_folder_name(batch_id)
            finals.append(final)
            if final.exists():
                continue
            try:
                created = _make_parents(final.parent, base)
                os.replace(part, final)
            except FileNotFoundError:  # retention removed that old hour meanwhile: file it again
                created = _make_parents(final.parent, base)
                os.replace(part, final)
            for folder in [final.parent, *created]:
                sync_dir(folder)
    shutil.rmtree(staged, ignore_errors=True)
    return finals


def _make_parents(folder: Path, base: Path) -> list[Path]:
    """Create ``folder`` and its missing parents below ``base``; the parents whose entry
    lists changed, to fsync."""
    changed = []
    for parent in reversed([folder, *folder.parents]):
        if parent == base or base not in parent.parents or parent.exists():
            continue
        parent.mkdir()
        changed.append(parent.parent)
    return changed


def write_table(table, directory: PurePath, store: Store = LOCAL) -> None:
    """Write a small Arrow table the driver holds as one Parquet file of ``directory``, as
    Spark would (INT96 timestamps) — without a Spark job and its commit protocol."""
    store.write_parquet(table, directory / "part-00000.parquet", use_deprecated_int96_timestamps=True)


def write_document(doc: dict, path: PurePath, *, fence=NO_FENCE, store: Store = LOCAL) -> None:
    """A small JSON file, replaced whole (the batch's metrics); on an object store one PUT,
    after the fence's checks."""
    if not store.is_local:
        with fence.commit(f"{path.parent.name}/{path.name}"):
            store.write_json(path, doc)
        return
    local = Path(path)  # a local store's paths are local paths
    local.parent.mkdir(parents=True, exist_ok=True)
    tmp = staging_dir(local.parent, local.name)
    tmp.write_text(json.dumps(doc, sort_keys=True))
    publish(tmp, local, fence=fence, replace=True)


def run_together(lanes: list[list[tuple[str, Callable[[], object]]]]) -> dict[str, float]:
    """Run lanes of Spark writes concurrently, each lane's writes in order; the wall
    seconds of each write.

    Every input is cached or small, so on a few cores the jobs' fixed costs (planning,
    scheduling, committing files) overlap instead of adding up; a lane orders writes
    where the first fills a cache the next reads. Threads inherit the batch's Spark job
    group, so stopping the query cancels them too. Raises the first failure after all
    lanes have ended (a half-written batch is re-run whole; nothing is visible until its
    rename)."""
    seconds: dict[str, float] = {}

    def run(lane: list[tuple[str, Callable[[], object]]]) -> None:
        for name, write in lane:
            started = time.monotonic()
            write()
            seconds[name] = round(time.monotonic() - started, 3)

    with ThreadPoolExecutor(max_workers=max(1, len(lanes)), thread_name_prefix="tidegate-write") as pool:
        futures = [pool.submit(inheritable_thread_target(run), lane) for lane in lanes]
        errors = [e for e in (f.exception() for f in futures) if e is not None]
    if errors:
        raise errors[0]
    return seconds
