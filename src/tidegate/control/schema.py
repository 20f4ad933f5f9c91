"""The control database's tables (SQLAlchemy Core; SQLite embedded, PostgreSQL supported).

Wall-clock moments (``*_at``) are float seconds since the epoch — portable across both
databases and easy to compare for lease expiry. Event-time values (``*_us``) are integer
microseconds since the epoch, the engine's unit. Documents that only people and the UI
read (per-partition counts, plan details, findings) are JSON text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    inspect,
    text,
)
from sqlalchemy.engine import Connection, CursorResult

SCHEMA_VERSION = 4


@dataclass(frozen=True)
class Renamed:
    """A column renamed: ``table.old`` is now ``table.new``."""

    table: str
    old: str
    new: str

    def apply(self, c: Connection) -> None:
        """Rename the column unless that was done already."""
        columns = _columns(c, self.table)
        if self.old in columns and self.new not in columns:
            quote = c.dialect.identifier_preparer.quote
            c.execute(text(f"ALTER TABLE {quote(self.table)} RENAME COLUMN {quote(self.old)} TO {quote(self.new)}"))


@dataclass(frozen=True)
class Added:
    """A column added to ``table``, as its definition below says (nullable: old rows hold NULL)."""

    table: str
    column: str

    def apply(self, c: Connection) -> None:
        """Add the column unless it is there already, typed for the database at hand."""
        if self.column not in _columns(c, self.table):
            quote = c.dialect.identifier_preparer.quote
            kind = metadata.tables[self.table].c[self.column].type.compile(dialect=c.dialect)
            c.execute(text(f"ALTER TABLE {quote(self.table)} ADD COLUMN {quote(self.column)} {kind}"))


def _columns(c: Connection, table: str) -> set[str]:
    return {column["name"] for column in inspect(c).get_columns(table)}


# What brings a database of the version before up to each version. :meth:`tidegate.control.db.ControlDB.create_schema`
# applies them on SQLite and PostgreSQL alike; a new database is made at SCHEMA_VERSION directly.
MIGRATIONS: dict[int, tuple[Renamed | Added, ...]] = {
    # a run reads an input of any kind (an event log, a Kafka topic, each input's log): the column hub, the
    # event log's old name, became input
    2: (Renamed("runs", "hub", "input"),),
    # a PID is known with the moment its process started (a reused PID is not the driver): rows written
    # before hold NULL, and their process is checked by its command line as before
    3: (Added("runs", "pid_started_at"), Added("leases", "pid_started_at")),
    # a version may be translated from a Stream Analytics query: where it came from (versions before hold NULL)
    4: (Added("job_versions", "origin"),),
}


def dumps(value: Any) -> str | None:
    """A JSON column's text (keys sorted; None stays NULL)."""
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


def inserted_id(result: CursorResult[Any]) -> int:
    """The integer primary key a single-row INSERT into a table with one just made."""
    key = result.inserted_primary_key
    if key is None:  # a single-row INSERT of an autoincrement key always reports it
        raise RuntimeError("the INSERT reported no primary key")
    return int(key[0])


def loads(text: str | None) -> Any:
    """A JSON column's value (NULL reads as None)."""
    return None if text is None else json.loads(text)


metadata = MetaData()

schema_info = Table(
    "tidegate_schema",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("created_at", Float, nullable=False),
)

# A registered job version: its spec as deployed, and the fingerprint of its logic.
job_versions = Table(
    "job_versions",
    metadata,
    Column("job", String(200), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("fingerprint", String(64), nullable=False),
    Column("spec_json", Text, nullable=False),  # JobSpec.to_dict(): what the driver runs
    Column("spec_text", Text, nullable=False),  # the file as written, for people
    Column("source_path", Text),
    Column("description", Text),
    Column("registered_at", Float, nullable=False),
    # JSON: the .asaql query it was translated from (path, sha256, text), its side file (path, sha256); NULL: a spec
    Column("origin", Text),
)

# What the operator wants for a job in a region; drivers and supervisors read it.
deployments = Table(
    "deployments",
    metadata,
    Column("job", String(200), primary_key=True),
    Column("region", String(64), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("desired", String(16), nullable=False),  # running | stopped
    Column("keep_running", Boolean, nullable=False, default=False),
    Column("current_run", Integer),
    Column("updated_at", Float, nullable=False),
)

# One start of a driver. A run continues or opens a lineage (a checkpoint and its outputs).
runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job", String(200), nullable=False),
    Column("region", String(64), nullable=False),
    Column("version", Integer, nullable=False),
    Column("fingerprint", String(64), nullable=False),
    Column("lineage", String(64), nullable=False),
    Column("kind", String(16), nullable=False, default="job"),  # job | rehearsal
    Column("input", Text, nullable=False),  # what it reads, for people: a log's path, kafka://…, or each input's
    Column("start_mode", String(16), nullable=False),  # now | custom | last-stopped
    Column("output_start_us", BigInteger),  # T: nothing at or before it is emitted
    Column("lookback_us", BigInteger),
    Column("input_from_us", BigInteger),  # T − L, the arrival the source starts at
    Column("starting_offsets", Text),  # JSON positions when the start is by offset
    Column("checkpoint", String(16), nullable=False),  # reused | fresh
    Column("checkpoint_reason", Text, nullable=False),
    Column("partial", Boolean, nullable=False, default=False),
    Column("partial_reason", Text),
    Column("status", String(16), nullable=False),  # starting|running|stopping|stopped|failed|lost|refused
    Column("status_detail", Text),
    Column("stop_requested_at", Float),
    Column("force_stop", Boolean, nullable=False, default=False),
    Column("host", String(255)),
    Column("pid", Integer),
    Column("pid_started_at", Float),  # when process pid started (psutil create_time): a PID alone is reused
    Column("log_path", Text),
    Column("requested_at", Float, nullable=False),
    Column("started_at", Float),  # the driver process began
    Column("heartbeat_at", Float),
    Column("first_batch_at", Float),
    Column("first_output_at", Float),
    Column("caught_up_at", Float),
    Column("ended_at", Float),
    Column("estimate_model_s", Float),
    Column("estimate_rehearsal_s", Float),
    Column("catch_up_s", Float),  # measured: process start → caught up
    Column("last_batch_id", BigInteger),
    Column("last_output_us", BigInteger),  # largest window end emitted
    Column("job_watermark_us", BigInteger),
    Column("input_events", BigInteger, nullable=False, default=0),
    Column("rows_emitted", BigInteger, nullable=False, default=0),
    Column("backlog_events", BigInteger),
    Column("context", Text),  # JSON: who asked (CLI, DAG run, drill) and why
)
Index("runs_job_region", runs.c.job, runs.c.region, runs.c.id)

# A checkpoint with its outputs. Consumers read each lineage over (output_from, output_until].
lineages = Table(
    "lineages",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("job", String(200), nullable=False),
    Column("region", String(64), nullable=False),
    Column("fingerprint", String(64), nullable=False),
    Column("version", Integer, nullable=False),
    Column("kind", String(16), nullable=False, default="job"),  # job | rehearsal (scratch, never read)
    Column("root", Text, nullable=False),
    Column("output_from_us", BigInteger),  # windows ending after it; None: from the input's start
    Column("output_until_us", BigInteger),  # cut by a later lineage; None: open
    Column("windowed", Boolean, nullable=False),
    Column("last_output_us", BigInteger),  # largest window end emitted
    Column("emitted_through_us", BigInteger),  # every window ending at or before it is out
    Column("last_offsets", Text),  # JSON: the end offsets of its last batch with visible output
    Column("created_at", Float, nullable=False),
    Column("created_by_run", Integer),
    Column("retired_at", Float),
)
Index("lineages_job_region", lineages.c.job, lineages.c.region)

# One job × region runs at most one driver: the holder renews expires_at while it lives.
leases = Table(
    "leases",
    metadata,
    Column("name", String(300), primary_key=True),  # "job:<job>:<region>" or "supervisor:<region>"
    Column("holder", String(100), nullable=False),
    Column("host", String(255)),
    Column("pid", Integer),
    Column("pid_started_at", Float),  # when process pid started: see runs.pid_started_at
    Column("acquired_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),  # on the database's clock
)

# The fencing token of each lease: ``epoch`` grows every time the lease passes to another
# holder and is never reset (a released lease's row above is deleted; this one stays).
# Every commit of a driver names the epoch it was granted; a stale one is refused.
fences = Table(
    "fences",
    metadata,
    Column("name", String(300), primary_key=True),
    Column("epoch", Integer, nullable=False),
    Column("holder", String(100), nullable=False),
    Column("granted_at", Float, nullable=False),
)

# Engine metrics per micro-batch (semantics §5), written by the driver.
batch_metrics = Table(
    "batch_metrics",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id"), primary_key=True),
    Column("batch_id", BigInteger, primary_key=True),
    Column("job", String(200), nullable=False),
    Column("region", String(64), nullable=False),
    Column("processed_at", Float, nullable=False),
    Column("batch_seconds", Float),
    Column("input_events", BigInteger, nullable=False),
    Column("quarantined", BigInteger, nullable=False),
    Column("rows_emitted", BigInteger, nullable=False),
    Column("out_of_order_adjusted", BigInteger, nullable=False, default=0),
    Column("out_of_order_dropped", BigInteger, nullable=False, default=0),
    Column("late_adjusted", BigInteger, nullable=False, default=0),
    Column("late_dropped", BigInteger, nullable=False, default=0),
    Column("early_dropped", BigInteger, nullable=False, default=0),
    Column("job_watermark_us", BigInteger),
    Column("watermark_delay_us", BigInteger),
    Column("processing_time_watermark_us", BigInteger),
    Column("processing_lag_us", BigInteger),
    Column("last_output_us", BigInteger),
    Column("backlog_events", BigInteger),
    Column("end_offsets", Text),  # JSON
    Column("partitions", Text),  # JSON: per partition counts and watermarks
    Column("stages", Text),  # JSON: per stage input/output watermark and event-time lag
)
Index("batch_metrics_job_region", batch_metrics.c.job, batch_metrics.c.region, batch_metrics.c.processed_at)

# Catch-up estimates (model and rehearsal) and what they were measured against.
estimates = Table(
    "estimates",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job", String(200), nullable=False),
    Column("region", String(64), nullable=False),
    Column("version", Integer),
    Column("kind", String(16), nullable=False),  # model | rehearsal
    Column("seconds", Float),
    Column("first_output_s", Float),
    Column("details", Text),  # JSON: the inputs of the model, or the rehearsal's figures
    Column("created_at", Float, nullable=False),
    Column("run_id", Integer),  # the run whose catch-up it estimated, once known
)

# Which region's output consumers read, per job.
active_regions = Table(
    "active_regions",
    metadata,
    Column("job", String(200), primary_key=True),
    Column("region", String(64), nullable=False),
    Column("since", Float, nullable=False),
    Column("reason", Text),
)

# Everything an operator or a DAG did, and every refusal, with the reason.
operations = Table(
    "operations",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),
    Column("job", String(200)),
    Column("region", String(64)),
    Column("action", String(64), nullable=False),
    Column("outcome", String(16), nullable=False),  # done | refused | failed
    Column("detail", Text),
    Column("actor", String(200)),
)
Index("operations_job", operations.c.job, operations.c.at)

# Great Expectations completeness checks (semantics §8).
checks = Table(
    "checks",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),
    Column("job", String(200), nullable=False),
    Column("target", String(64), nullable=False),  # a region name, or "consumer"
    Column("span_from_us", BigInteger),
    Column("span_to_us", BigInteger),
    Column("success", Boolean, nullable=False),
    Column("summary", Text),
    Column("findings", Text),  # JSON
    Column("data_docs", Text),
    Column("context", Text),  # JSON: restart, replay, failover, drill
)

# Planned stops and recovery drills: estimate vs actual, what was checked, pass or fail.
procedures = Table(
    "procedures",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(32), nullable=False),  # planned-stop | drill:node-failure | drill:upgrade | drill:region-loss
    Column("job", String(200), nullable=False),
    Column("region", String(64)),
    Column("started_at", Float, nullable=False),
    Column("ended_at", Float),
    Column("result", String(16), nullable=False),  # running | passed | failed | aborted
    Column("estimate_s", Float),
    Column("actual_s", Float),
    Column("checks", Text),  # JSON list of what was checked and its outcome
    Column("detail", Text),
    Column("data_docs", Text),
)

# One procedure per job at a time (semantics §7): deploy, restart, planned stop, failover and
# drills take this row before they act and delete it when they end. ``expires_at`` (the
# database's clock) frees a lock whose procedure died without ending.
procedure_locks = Table(
    "procedure_locks",
    metadata,
    Column("job", String(200), primary_key=True),
    Column("procedure_id", Integer, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("region", String(64)),
    Column("acquired_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
)
