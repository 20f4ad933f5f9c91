"""A job's output as consumers see it: every lineage of a region, each over its own span.

A region's output is written lineage by lineage: a start that resumes a checkpoint
continues its lineage; any other start opens a new one whose output begins at its first
output time ``T`` and ends the previous lineages' spans there. Reading a region is the
union of each lineage's rows with ``window_end`` in ``(output_from, output_until]`` —
no gap where one lineage hands over to the next, no duplicate. Per-event jobs (no
window) hand over by input position instead: a lineage's rows are those of the events
before its successor's first position in each partition (semantics §6: a start at ``T``
reads from the first event arriving at or after ``T``), so a successor started at a time
before its predecessor's end takes those events over instead of doubling them.

The **consumer view** reads the job's *active* region, resolved once per read from the
control database, so a consumer never sees a half-switched mix of two regions; its DuckDB
form (:func:`publish_view`, :mod:`tidegate.runtime.outputs.duckdb_view`) reads lineages on a
local root and on S3 alike.

A job with named outputs (``sinks.outputs``) has each of them in every lineage beside its own
output (``outputs/<name>/``), handed over at the same times: every read takes the output's
name (default ``output``, the job's own), and the consumer view has one view per output.

Every read lists only the hour folders of its span (:func:`tidegate.lineage.committed.committed_files`):
it costs what the span costs, however long the lineages have run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePath

from tidegate.control.db import ControlDB, loads
from tidegate.errors import ConfigError, TidegateError
from tidegate.jobspec.model import PRIMARY_OUTPUT
from tidegate.jobspec.parse_steps import is_output_name
from tidegate.lineage.layout import BATCH_COLUMN, JobPaths
from tidegate.spark.output import by_position, read_output
from tidegate.storage.store import LOCAL, Store


@dataclass(frozen=True)
class LineageSpan:
    lineage: str
    output: PurePath
    from_us: int | None  # exclusive
    until_us: int | None  # inclusive
    windowed: bool
    store: Store = field(default=LOCAL, compare=False)  # where the lineage lives
    # per-event rows: those of events before these positions (its successor's first), per partition
    before_offsets: dict[int, int] | None = None

    @property
    def written(self) -> bool:
        """True once the lineage has an output (a local folder, or records on an object store)."""
        return self.store.exists(self.output)


def region_spans(db: ControlDB, job: str, region: str, output: str = PRIMARY_OUTPUT) -> list[LineageSpan]:
    """Each lineage of the region with its span, for output ``output`` (a name, or ``output``)."""
    if not is_output_name(output):  # a name from the command line becomes a folder: checked first
        raise ConfigError(
            f"{output!r} is not an output name", "name the job's own output (output) or one of its sinks.outputs"
        )
    spans = []
    rows = db.lineages(job, region)
    # no rows: [None] is one longer, and nothing is to be paired
    for row, successor in zip(rows, [*rows[1:], None], strict=False):
        paths = JobPaths.at(row.root, region=region)
        before = None if row.windowed or successor is None else first_positions(db, successor)
        spans.append(
            LineageSpan(
                row.id,
                paths.output_of(output),
                row.output_from_us,
                row.output_until_us,
                bool(row.windowed),
                paths.store,
                before,
            )
        )
    return spans


def first_positions(db: ControlDB, lineage) -> dict[int, int] | None:
    """Where ``lineage``'s per-event output begins, per partition: the first positions its
    creating run emitted (after the policy's stretch it read back), else where it began
    reading; None when not recorded."""
    run = db.run(lineage.created_by_run) if lineage.created_by_run is not None else None
    if run is None:
        return None
    offsets = (loads(run.context) or {}).get("emit_from_offsets") or loads(run.starting_offsets)
    return {int(p): int(o) for p, o in offsets.items()} if offsets else None


def named_outputs(db: ControlDB, job: str, region: str) -> list[str]:
    """The named outputs the region's lineages hold (their folders: the layout, not the spec);
    a lineage whose store cannot be listed now adds none."""
    names: set[str] = set()
    for row in db.lineages(job, region):
        paths = JobPaths.at(row.root, region=region)
        try:
            names.update(folder.name for folder in paths.named_outputs)
        except (OSError, TidegateError):  # its view is written without it, and says so
            continue
    return sorted(n for n in names if is_output_name(n) and n != PRIMARY_OUTPUT)


def active_region(db: ControlDB, job: str) -> str:
    row = db.active_region(job)
    if row is None:
        raise TidegateError(f"job {job} has no active region yet", f"start it: tidegate job start {job} --region east")
    return row.region


def read_region(
    spark,
    db: ControlDB,
    job: str,
    region: str,
    *,
    from_us: int | None = None,
    to_us: int | None = None,
    missing_ok: bool = False,
    output: str = PRIMARY_OUTPUT,
    since_lineage: str | None = None,
):
    """The region's output ``output`` as one Spark DataFrame (window rows with ``window_end``
    in ``(from_us, to_us]`` when given; ``since_lineage``: that lineage's rows and its
    successors' only). Raises when the region has written nothing there — or, ``missing_ok``,
    returns None."""
    from functools import reduce

    frames = []
    spans = region_spans(db, job, region, output)
    if since_lineage is not None:
        spans = spans[[span.lineage for span in spans].index(since_lineage) :]
    for span in spans:
        low, high = (
            (_tighter(span.from_us, from_us, max), _tighter(span.until_us, to_us, min))
            if span.windowed
            else (None, None)
        )
        if low is not None and high is not None and high <= low:
            continue
        df = read_output(spark, span.output, low, high, span.store)
        if df is not None and span.before_offsets:
            df = by_position(df, span.before_offsets, before=True)
        if df is not None:
            frames.append(df.drop(BATCH_COLUMN))
    if not frames:
        if missing_ok:
            return None
        which = "output" if output == PRIMARY_OUTPUT else f"output {output}"
        raise TidegateError(
            f"job {job} has no {which} in region {region} yet",
            "wait for its first window to close (tidegate job status shows the watermark)",
        )
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


def read_consumer_view(
    spark,
    db: ControlDB,
    job: str,
    *,
    from_us: int | None = None,
    to_us: int | None = None,
    missing_ok: bool = False,
    output: str = PRIMARY_OUTPUT,
):
    """(region, rows): the active region's output ``output``, the region resolved once for the read."""
    region = active_region(db, job)
    return region, read_region(
        spark, db, job, region, from_us=from_us, to_us=to_us, missing_ok=missing_ok, output=output
    )


def _tighter(a: int | None, b: int | None, pick) -> int | None:
    return b if a is None else a if b is None else pick(a, b)


def view_paths(home: Path, job: str, output: str = PRIMARY_OUTPUT) -> tuple[Path, Path]:
    """The consumer view of ``job``'s output ``output``: ``views/<job>.sql`` for the job's own,
    ``views/<job>.<name>.sql`` for a named one; each with its JSON manifest."""
    stem = job if output == PRIMARY_OUTPUT else f"{job}.{output}"
    return home / "views" / f"{stem}.sql", home / "views" / f"{stem}.json"


def publish_view(controller, job: str) -> Path | None:
    """Write the consumer view for tools outside Spark: ``<home>/views/<job>.sql`` (a DuckDB
    ``CREATE VIEW`` over the active region's lineages, each over its span; on S3 the files its
    records name, read with the secrets :func:`tidegate.runtime.outputs.duckdb_session.connect`
    makes — no key in the file) and a JSON manifest beside it; for each named output the region
    holds, ``<job>.<name>.sql`` (view ``"<job>.<name>"``) the same way. Rewritten atomically
    whenever the active region or its lineages change, so a reader opening it sees one region,
    never a mix. The job's own view."""
    db = controller.db
    active = db.active_region(job)
    if active is None:
        return None
    for output in named_outputs(db, job, active.region):
        _publish_output_view(controller, job, active, output)
    return _publish_output_view(controller, job, active, PRIMARY_OUTPUT)


def _publish_output_view(controller, job: str, active, output: str) -> Path:
    import json
    import os

    from tidegate.runtime.outputs.duckdb_view import view_name, view_parts_of, view_sql

    # local lineages by glob, lineages on S3 by the files their records name (duckdb_view says why)
    parts = view_parts_of(region_spans(controller.db, job, active.region, output))
    sql_path, json_path = view_paths(controller.config.home, job, output)
    sql_path.parent.mkdir(parents=True, exist_ok=True)
    which = "" if output == PRIMARY_OUTPUT else f", output {output}"
    since = f"active since {active.since:.0f}, {active.reason}"
    heading = f"consumer view of job {job}{which}: region {active.region} ({since})"
    sql = view_sql(view_name(job, output), heading, parts)
    doc = {
        "job": job,
        "output": output,
        "region": active.region,
        "reason": active.reason,
        "lineages": parts.lineages,
        "not_in_view": parts.left_out,
    }
    for path, text in ((sql_path, sql), (json_path, json.dumps(doc, indent=2))):
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return sql_path
