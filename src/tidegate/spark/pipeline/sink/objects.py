"""A batch's rows on an object store: written in place under the attempt's names, made
visible by the batch's commit record (:mod:`tidegate.lineage.commits`) — no staging, no
rename, which S3 does not have. Local roots never come here (:mod:`.files`)."""

from __future__ import annotations

import uuid
from pathlib import PurePath

from pyspark.sql import DataFrame

from tidegate.errors import TidegateError
from tidegate.lineage.commits import CommittedFile, attempt_folder, commit_batch, part_path, read_record
from tidegate.lineage.fence import NO_FENCE
from tidegate.lineage.layout import batch_folder_name
from tidegate.storage.store import Store

HOUR_KEY = "_hour"  # the partition column rows are split by: hours since the epoch (date=D/hour=H once filed)


def publish_table(table, base: PurePath, batch_id: int, store: Store, *, fence=NO_FENCE) -> list[PurePath]:
    """The driver's rows (with ``HOUR_KEY``), one file per hour in the layout's folders,
    committed by record; the batch's files (an earlier attempt's when it won)."""
    attempt = uuid.uuid4().hex
    files = []
    for hour, part in hour_parts(table, base, batch_id):
        path = part_path(base, hour, batch_id, attempt)
        store.write_parquet(part, path, use_deprecated_int96_timestamps=True)
        files.append(CommittedFile(hour, str(path.relative_to(base)), part.num_rows))
    return _commit(files, base, batch_id, attempt, store, fence)


def publish_frame(df: DataFrame, base: PurePath, batch_id: int, store: Store, *, fence=NO_FENCE) -> list[PurePath]:
    """Rows Spark writes (with ``HOUR_KEY``): into a hidden attempt folder of the output,
    where they stay; committed by record."""
    attempt = uuid.uuid4().hex
    folder = attempt_folder(base, batch_id, attempt)
    df.write.mode("overwrite").partitionBy(HOUR_KEY).parquet(store.uri(folder))
    files = []
    for entry in store.list(folder, recursive=True):
        if not entry.name.endswith(".parquet"):
            continue  # Spark's _SUCCESS
        hour = _hour_of(entry.path.parent.name, base, batch_id)
        files.append(CommittedFile(hour, str(entry.path.relative_to(base)), parquet_rows(store, entry.path)))
    return _commit(files, base, batch_id, attempt, store, fence)


def hour_parts(table, base, batch_id: int):
    """(hour, rows of that hour without ``HOUR_KEY``) of the driver's rows, in time order."""
    import pyarrow.compute as pc

    hours = table.column(HOUR_KEY)
    if hours.null_count:
        _hour_of(f"{HOUR_KEY}=__HIVE_DEFAULT_PARTITION__", base, batch_id)  # raises: rows without a time
    for hour in sorted(pc.unique(hours).to_pylist()):
        yield hour, table.filter(pc.equal(hours, hour)).drop_columns([HOUR_KEY])


def parquet_rows(store: Store, path: PurePath) -> int:
    import pyarrow.parquet as pq

    filesystem, where = store.parquet(path)
    return pq.read_metadata(where, filesystem=filesystem).num_rows


def _commit(
    files: list[CommittedFile], base: PurePath, batch_id: int, attempt: str, store: Store, fence
) -> list[PurePath]:
    with fence.commit(f"{base.name}/{batch_folder_name(batch_id)}"):
        won = commit_batch(store, base, batch_id, files, epoch=getattr(fence, "epoch", None), attempt=attempt)
    if not won:  # an earlier attempt committed the same rows: they are the batch's
        return [base / f["path"] for f in read_record(store, base, batch_id)["files"]]
    return [base / f.path for f in files]


def _hour_of(name: str, base, batch_id: int) -> int:
    value = name.split("=", 1)[1] if name.startswith(f"{HOUR_KEY}=") else ""
    if not value.lstrip("-").isdigit():
        raise TidegateError(
            f"batch {batch_id} of {base} has rows without a time to file them under ({name})",
            "every row of an output needs its time column (window end, system or arrival "
            "time) set; this is a bug of the engine, report it with the batch's input",
        )
    return int(value)
