"""A job's output as consumers see it: every lineage of a region, each over its own span.

A region's output is written lineage by lineage: a start that resumes a checkpoint
continues its lineage; any other start opens a new one whose output begins at its first
output time ``T`` and ends the previous lineages' spans there. Reading a region is the
union of each lineage's rows with ``window_end`` in ``(output_from, output_until]`` —
no gap where one lineage hands over to the next, no duplicate. Per-event jobs (no
window) hand over by input position instead, so their lineages are read whole.

The **consumer view** reads the job's *active* region, resolved once per read from the
control database, so a consumer never sees a half-switched mix of two regions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tidegate.control.db import ControlDB
from tidegate.errors import TidegateError
from tidegate.lineage.layout import BATCH_FILES_GLOB, JobPaths


@dataclass(frozen=True)
class LineageSpan:
    lineage: str
    output: Path
    from_us: int | None  # exclusive
    until_us: int | None  # inclusive
    windowed: bool


def region_spans(db: ControlDB, job: str, region: str) -> list[LineageSpan]:
    spans = []
    for row in db.lineages(job, region):
        spans.append(LineageSpan(row.id, JobPaths(Path(row.root)).output, row.output_from_us, row.output_until_us,
                                 bool(row.windowed)))
    return spans


def active_region(db: ControlDB, job: str) -> str:
    row = db.active_region(job)
    if row is None:
        raise TidegateError(f"job {job} has no active region yet", f"start it: tidegate job start {job} --region east")
    return row.region


def read_region(spark, db: ControlDB, job: str, region: str, *, from_us: int | None = None,
                to_us: int | None = None):
    """The region's output as one Spark DataFrame (window rows with ``window_end`` in
    ``(from_us, to_us]`` when given). Raises when the region has written nothing."""
    from functools import reduce

    from pyspark.sql import functions as F

    frames = []
    for span in region_spans(db, job, region):
        if not _has_rows(span.output):
            continue
        df = spark.read.parquet(str(span.output)).drop("batch_id")
        if span.windowed:  # handed over by time: a window's end, or an analytic row's system time
            end = F.unix_micros(handover_column(span.output))
            if span.from_us is not None:
                df = df.where(end > F.lit(span.from_us))
            if span.until_us is not None:
                df = df.where(end <= F.lit(span.until_us))
            if from_us is not None:
                df = df.where(end > F.lit(from_us))
            if to_us is not None:
                df = df.where(end <= F.lit(to_us))
        frames.append(df)
    if not frames:
        raise TidegateError(f"job {job} has no output in region {region} yet",
                            "wait for its first window to close (tidegate job status shows the watermark)")
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


def read_consumer_view(spark, db: ControlDB, job: str, *, from_us: int | None = None, to_us: int | None = None):
    """(region, rows): the active region's output, the region resolved once for the read."""
    region = active_region(db, job)
    return region, read_region(spark, db, job, region, from_us=from_us, to_us=to_us)


def handover_column(output: Path) -> str:
    """The time a lineage's rows are handed over by: ``window_end`` for window rows,
    ``system_time`` for analytic rows (one per event, final once the watermark passes it)."""
    import pyarrow.parquet as pq

    first = next(output.glob(BATCH_FILES_GLOB), None)
    if first is None or "window_end" in pq.read_schema(first).names:
        return "window_end"
    return "system_time"


def _has_rows(output: Path) -> bool:
    return output.is_dir() and any(output.glob(BATCH_FILES_GLOB))


def view_paths(home: Path, job: str) -> tuple[Path, Path]:
    return home / "views" / f"{job}.sql", home / "views" / f"{job}.json"


def publish_view(controller, job: str) -> Path | None:
    """Write the consumer view for tools outside Spark: ``<home>/views/<job>.sql`` (a DuckDB
    ``CREATE VIEW`` over the active region's lineages, each over its span) and a JSON
    manifest beside it. Rewritten atomically whenever the active region or its lineages
    change, so a reader opening it sees one region, never a mix."""
    import json
    import os

    from tidegate.eventtime.durations import format_time_us

    db = controller.db
    active = db.active_region(job)
    if active is None:
        return None
    spans = region_spans(db, job, active.region)
    selects, manifest = [], []
    for span in spans:
        files = f"{span.output}/{BATCH_FILES_GLOB}"
        where = []
        column = handover_column(span.output) if span.windowed else ""
        if span.windowed and span.from_us is not None:
            where.append(f"{column} > TIMESTAMP '{_sql_time(span.from_us)}'")
        if span.windowed and span.until_us is not None:
            where.append(f"{column} <= TIMESTAMP '{_sql_time(span.until_us)}'")
        select = f"SELECT * EXCLUDE (batch_id) FROM read_parquet('{files}', hive_partitioning = true)"
        selects.append(select + (" WHERE " + " AND ".join(where) if where else ""))
        manifest.append({"lineage": span.lineage, "files": files, "after": format_time_us(span.from_us) or None,
                         "through": format_time_us(span.until_us) or None})
    sql_path, json_path = view_paths(controller.config.home, job)
    sql_path.parent.mkdir(parents=True, exist_ok=True)
    name = job.replace('"', "")
    body = "\n  UNION ALL BY NAME\n  ".join(selects) if selects else "SELECT NULL AS nothing WHERE false"
    sql = (f"-- consumer view of job {job}: region {active.region} (active since {active.since:.0f}, {active.reason})\n"
           f'CREATE OR REPLACE VIEW "{name}" AS\n  {body};\n')
    doc = {"job": job, "region": active.region, "reason": active.reason, "lineages": manifest}
    for path, text in ((sql_path, sql), (json_path, json.dumps(doc, indent=2))):
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return sql_path


def _sql_time(us: int) -> str:
    from tidegate.eventtime.durations import format_time_us

    return format_time_us(us).replace("T", " ").rstrip("Z")
