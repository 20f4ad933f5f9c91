"""The consumer view in DuckDB: the SQL over a region's lineages, written to ``views/`` by
:func:`tidegate.runtime.outputs.reader.publish_view` and run by
:func:`tidegate.runtime.outputs.duckdb_session.connect`.

Each lineage is read over its span (``window_end`` or ``system_time`` in ``(after, through]``,
per-event rows before their successor's first positions), and each batch once — the same
rule on both kinds of root, reached differently:

* a **local** lineage by glob: a batch's folder appears by rename, so whatever the glob finds
  is committed; the batch condition splits batch folders from compacted files at the
  compaction boundary (:func:`view_parts`);
* a lineage on **S3** by file list: on an object store a batch's files sit in the layout
  before its commit record exists, and a losing attempt's files may sit beside them, so the
  view lists the files the commit and compaction records name
  (:func:`tidegate.lineage.committed.committed_files`) as ``s3://bucket/key`` — fixed when the
  SQL is made. A batch committed later is in the next SQL, which ``connect`` makes afresh.

No key is ever in the SQL: DuckDB reads ``s3://`` through ``httpfs`` with a secret per bucket,
which the file's header names with every option but the keys, and which ``connect`` creates in
its session only. The span's bounds are UTC timestamps: a session's time zone must be UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from tidegate.jobspec.model import PRIMARY_OUTPUT
from tidegate.lineage.committed import committed_files, compacted_through, handover_column
from tidegate.lineage.layout import BATCH_COLUMN, BATCH_FOLDER_PREFIX, COMPACTED_PREFIX, LAYOUT_COLUMNS
from tidegate.storage.s3 import S3Settings

EMPTY_VIEW = "SELECT NULL AS nothing WHERE false"


@dataclass
class ViewParts:
    """What a view of one region reads: a ``SELECT`` per part, the manifest's entry per
    lineage, the S3 stores it reaches (bucket → settings; no key), and the lineages it had
    to leave out (a store that did not answer), with why."""

    selects: list[str] = field(default_factory=list)
    lineages: list[dict] = field(default_factory=list)
    buckets: dict[str, S3Settings] = field(default_factory=dict)
    left_out: list[dict] = field(default_factory=list)


def view_parts_of(spans) -> ViewParts:
    """The parts of a view over ``spans`` (:func:`tidegate.runtime.outputs.reader.region_spans`),
    lineages whose output is not there yet left out. A lineage whose store cannot be listed now
    is left out too and named (the view is rewritten on the next start, switch or compaction):
    the view is written by the controller's commands, which a store's outage must not fail."""
    from tidegate.errors import TidegateError
    from tidegate.eventtime.durations import format_time_us

    parts = ViewParts()
    for span in spans:
        if span.store.is_local:
            if not Path(span.output).is_dir():
                continue
            selects, files, through = _local_selects(span)
        else:
            try:
                selects, files = _s3_selects(span)
            except (OSError, TidegateError) as failed:
                output = span.store.uri(span.output)
                parts.left_out.append({"lineage": span.lineage, "output": output, "why": f"not listed: {failed}"})
                continue
            through = None
            if not files:
                continue
            bucket = PurePath(span.output).parts[0]
            parts.buckets[bucket] = span.store.settings
        parts.selects.extend(selects)
        parts.lineages.append(
            {
                "lineage": span.lineage,
                "files": files,
                "compacted_through": through,
                "after": format_time_us(span.from_us) or None,
                "through": format_time_us(span.until_us) or None,
            }
        )
    return parts


def view_sql(name: str, heading: str, parts: ViewParts) -> str:
    """The view file's text: ``heading``, what a session needs for the S3 lineages (names only),
    and ``CREATE OR REPLACE VIEW "name"`` over the parts."""
    body = "\n  UNION ALL BY NAME\n  ".join(parts.selects) if parts.selects else EMPTY_VIEW
    lines = [f"-- {heading}"]
    if parts.buckets:
        lines += [
            "-- Lineages on S3: run this in a session with httpfs loaded, TimeZone 'UTC', and a secret per bucket",
            "-- (tidegate output view JOB, or tidegate.runtime.outputs.duckdb_session.connect, makes them from the",
            "-- region's settings and the AWS credential chain; keys are never written here):",
        ]
        for bucket, settings in sorted(parts.buckets.items()):
            lines.append(f"--   {secret_name(bucket)}: {_secret_shape(bucket, settings)}")
    lines.append(f'CREATE OR REPLACE VIEW "{name}" AS\n  {body};')
    return "\n".join(lines) + "\n"


def secret_name(bucket: str) -> str:
    """The name of the DuckDB secret a view's SQL expects for ``bucket``."""
    return "tidegate_" + "".join(c if c.isalnum() else "_" for c in bucket)


def view_name(job: str, output: str = PRIMARY_OUTPUT) -> str:
    """The view's name in DuckDB: ``<job>``, or ``<job>.<name>`` for a named output."""
    return (job if output == PRIMARY_OUTPUT else f"{job}.{output}").replace('"', "")


def view_parts(output: Path, through: int | None, *, open_: bool = True) -> list[tuple[str, str]]:
    """(file pattern, batch condition) pairs a DuckDB view reads one lineage's output through:
    batch folders after the compaction boundary ``through``, compacted files through it. The
    view is rewritten after each compaction; until then it keeps reading the batch folders
    the compaction merged, which stay on disk for the grace time. DuckDB refuses a pattern
    that matches no file, so a part is left out while it has none — batch folders only
    while the lineage is closed (``open_`` False): an open one writes more."""
    folders = f"{output}/date=*/hour=*/{BATCH_FOLDER_PREFIX}*/*.parquet"
    merged = f"{output}/date=*/hour=*/{COMPACTED_PREFIX}*.parquet"
    parts = []
    if open_ or any(output.glob(folders[len(str(output)) + 1 :])):
        parts.append((folders, "batch_id >= 0" if through is None else f"batch_id > {through}"))
    if through is not None and any(output.glob(merged[len(str(output)) + 1 :])):
        parts.append((merged, f"batch_id <= {through}"))
    return parts


def _local_selects(span) -> tuple[list[str], list[str], int | None]:
    output = Path(span.output)
    through = compacted_through(output)
    where = _span_conditions(span, handover_column(output) if span.windowed else "")
    selects, files = [], []
    for pattern, batches in view_parts(output, through, open_=span.until_us is None):
        # date and hour stay: a consumer's condition on them prunes the folders DuckDB opens
        selects.append(
            f"SELECT * EXCLUDE ({BATCH_COLUMN}) FROM read_parquet({sql_quote(pattern)}, "
            f"hive_partitioning = true, union_by_name = true) WHERE " + " AND ".join([batches, *where])
        )
        files.append(pattern)
    return selects, files, through


def _s3_selects(span) -> tuple[list[str], list[str]]:
    """One ``SELECT`` over the files the records name for the span's hours: each batch once,
    no file of an attempt that did not commit. The files are in no hive folder of their own
    (Spark's attempt folders), so ``date`` and ``hour`` come from the handover time, which the
    layout files them by."""
    column = handover_column(span.output, span.store)
    low, high = (span.from_us, span.until_us) if span.windowed else (None, None)  # per-event rows: by position
    files = [f"s3://{path}" for path in committed_files(span.output, low, high, span.store)]
    if not files:
        return [], []
    listed = ", ".join(sql_quote(f) for f in files)
    dropped = ", ".join(sql_quote(c) for c in LAYOUT_COLUMNS)
    select = (
        f"SELECT COLUMNS(c -> c NOT IN ({dropped})), CAST(strftime({column}, '%Y-%m-%d') AS DATE) AS date, "
        f"strftime({column}, '%H') AS hour FROM read_parquet([{listed}], hive_partitioning = false, "
        "union_by_name = true)"
    )
    where = _span_conditions(span, column if span.windowed else "")
    return [select + (" WHERE " + " AND ".join(where) if where else "")], files


def _span_conditions(span, column: str) -> list[str]:
    """The span's conditions: handover time in ``(from, until]`` for window rows, positions
    before the successor's first for per-event rows."""
    where = []
    if span.windowed and span.from_us is not None:
        where.append(f"{column} > TIMESTAMP '{_sql_time(span.from_us)}'")
    if span.windowed and span.until_us is not None:
        where.append(f"{column} <= TIMESTAMP '{_sql_time(span.until_us)}'")
    if span.before_offsets:
        earlier = " OR ".join(
            f'("partition" = {int(p)} AND "offset" < {int(o)})' for p, o in sorted(span.before_offsets.items())
        )
        others = ", ".join(str(int(p)) for p in sorted(span.before_offsets))
        where.append(f'({earlier} OR "partition" NOT IN ({others}))')
    return where


def secret_options(bucket: str, settings: S3Settings) -> dict[str, Any]:
    """Every option of a bucket's secret but the keys: where and how the store is reached."""
    from urllib.parse import urlsplit

    options: dict[str, Any] = {
        "TYPE": "s3",
        "REGION": settings.region,
        "URL_STYLE": "path" if settings.uses_path_style else "vhost",
        "USE_SSL": settings.secure,
        "SCOPE": f"s3://{bucket}",
    }
    if settings.endpoint is not None:
        options["ENDPOINT"] = urlsplit(settings.endpoint).netloc
    return options


def _secret_shape(bucket: str, settings: S3Settings) -> str:
    shown = ", ".join(f"{k} {sql_literal(v)}" for k, v in secret_options(bucket, settings).items())
    return f"CREATE TEMPORARY SECRET {secret_name(bucket)} ({shown}, KEY_ID …, SECRET …[, SESSION_TOKEN …])"


def sql_literal(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else sql_quote(str(value))


def sql_quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _sql_time(us: int) -> str:
    from tidegate.eventtime.durations import format_time_us

    return format_time_us(us).replace("T", " ").rstrip("Z")
