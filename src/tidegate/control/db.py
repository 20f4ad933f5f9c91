"""The control database: one small repository over the tables of :mod:`tidegate.control.schema`.

Every process of the platform — the CLI, drivers, supervisors, Airflow tasks, the UI —
opens it by URL. SQLite (the embedded default) is opened in WAL mode with a busy timeout
so a driver writing metrics and a controller reading status do not trip over each other;
PostgreSQL goes through psycopg 3 — one server, or a primary and a synchronous standby in
the two regions reached by a multi-host URL that follows promotions
(:mod:`tidegate.control.ha`). Writes are short transactions; a lease changes hands in one
conditional UPDATE, which both databases make atomic.

This module holds the state the platform acts on (job versions, deployments, runs,
lineages, batch metrics, the active region); who may act is :mod:`tidegate.control.leases`,
what happened :mod:`tidegate.control.history` — both mixed into :class:`ControlDB`.

Opening a database made by an older Tidegate brings its schema up to this one's first
(:data:`tidegate.control.schema.MIGRATIONS`); one made by a newer Tidegate is refused.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import and_, create_engine, delete, event, func, insert, select, update
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import IntegrityError, OperationalError

from tidegate.control import schema as S
from tidegate.control.ha.reconnect import follow_primary
from tidegate.control.history import History
from tidegate.control.leases import Leases, ProcedureBusy  # noqa: F401 — ProcedureBusy is part of this API
from tidegate.control.schema import loads  # noqa: F401 — part of this API: how callers read JSON columns
from tidegate.errors import TidegateError

SQLITE_BUSY_TIMEOUT_S = 30
PG_CONNECT_TIMEOUT_S = 10
PG_STATEMENT_TIMEOUT_S = 30
MIGRATION_LOCK_KEY = 0x7469646567617465  # "tidegate": the advisory lock PostgreSQL migrators share
REFUSED = "refused"  # a run row whose start lost the race for the job's lease: never ran


class ControlDBError(TidegateError):
    """The control database cannot be reached or is not Tidegate's."""


class ControlDB(Leases, History):
    """``ControlDB(url)`` creates the tables if they are missing (idempotent)."""

    def __init__(self, url: str, *, now: Callable[[], float] | None = None, create: bool = True) -> None:
        self.url = url
        self.now = now or time.time  # timestamps of records
        self._test_clock = now  # leases: the database's own clock unless a test clock is given
        self.engine = _engine(url)
        if create:
            self.create_schema()

    # -- schema ------------------------------------------------------------------------
    def create_schema(self) -> None:
        try:
            S.metadata.create_all(self.engine)
        except OperationalError as exc:
            raise ControlDBError(
                f"cannot open the control database {_redact(self.url)}: {exc.orig}",
                "check TIDEGATE_CONTROL_DB (a SQLAlchemy URL) and that the server is up",
            ) from None
        with self.engine.begin() as c:
            versions = [r.version for r in c.execute(select(S.schema_info.c.version))]
            if not versions:
                try:
                    c.execute(insert(S.schema_info).values(version=S.SCHEMA_VERSION, created_at=self.now()))
                except IntegrityError:  # another process created it at the same moment
                    pass
            elif max(versions) > S.SCHEMA_VERSION:
                raise ControlDBError(
                    f"the control database {_redact(self.url)} has schema version {max(versions)}, "
                    f"newer than this Tidegate ({S.SCHEMA_VERSION})",
                    "upgrade Tidegate on this host to the version that wrote it",
                )
        for version in range(max(versions or [S.SCHEMA_VERSION]) + 1, S.SCHEMA_VERSION + 1):
            self._migrate(version)

    def schema_version(self) -> int:
        with self.engine.connect() as c:
            return _schema_version(c)

    def _migrate(self, version: int) -> None:
        """Bring the database from ``version - 1`` to ``version``
        (:data:`~tidegate.control.schema.MIGRATIONS`), then record it. The migrating process
        holds the database's migration lock from its first look to its commit, so of processes
        that open an old database at once one migrates and the others, once it is done, find
        it migrated. Each step also looks before it changes (a column already renamed or added
        is left alone), so a migration cut short is finished by the next process that opens
        the database."""
        with self.engine.connect() as c:
            _lock_for_migration(c)
            if _schema_version(c) >= version:
                return  # leaving the block rolls back, which releases the lock
            for step in S.MIGRATIONS[version]:
                step.apply(c)
            c.execute(insert(S.schema_info).values(version=version, created_at=self.now()))
            c.commit()

    def dispose(self) -> None:
        self.engine.dispose()

    # -- job versions --------------------------------------------------------------------
    def register_version(
        self,
        job: str,
        version: int,
        fingerprint: str,
        spec: Mapping,
        spec_text: str,
        source_path: str | None,
        description: str = "",
        origin: Mapping | None = None,
    ) -> bool:
        """Record a job version. True when new; False when the same logic was registered
        before (its first ``origin`` stays). A different fingerprint under an existing version
        number is refused. ``origin``: the query it was translated from, if any
        (:class:`~tidegate.runtime.jobs.query_origin.QueryOrigin`)."""
        existing = self.version(job, version)
        if existing is not None:
            if existing.fingerprint != fingerprint:
                raise TidegateError(
                    f"job {job} version {version} is already registered with other logic "
                    f"(fingerprint {existing.fingerprint[:12]}, this spec {fingerprint[:12]})",
                    "give the changed spec a new version number; a version's logic never changes",
                )
            return False
        with self.engine.begin() as c:
            c.execute(
                insert(S.job_versions).values(
                    # key order is meaning here (payload, aggregates): never sorted
                    job=job,
                    version=version,
                    fingerprint=fingerprint,
                    spec_json=json.dumps(dict(spec)),
                    spec_text=spec_text,
                    source_path=source_path,
                    description=description,
                    registered_at=self.now(),
                    origin=S.dumps(origin),
                )
            )
        return True

    def version(self, job: str, version: int | None = None) -> Row | None:
        """One version, or the highest registered when ``version`` is None."""
        q = select(S.job_versions).where(S.job_versions.c.job == job)
        if version is not None:
            q = q.where(S.job_versions.c.version == version)
        q = q.order_by(S.job_versions.c.version.desc()).limit(1)
        with self.engine.connect() as c:
            return c.execute(q).first()

    def versions(self, job: str | None = None) -> list[Row]:
        q = select(S.job_versions).order_by(S.job_versions.c.job, S.job_versions.c.version)
        if job is not None:
            q = q.where(S.job_versions.c.job == job)
        with self.engine.connect() as c:
            return list(c.execute(q))

    def jobs(self) -> list[str]:
        with self.engine.connect() as c:
            return [r[0] for r in c.execute(select(S.job_versions.c.job).distinct().order_by(S.job_versions.c.job))]

    # -- deployments ---------------------------------------------------------------------
    def deployment(self, job: str, region: str) -> Row | None:
        with self.engine.connect() as c:
            return c.execute(
                select(S.deployments).where(S.deployments.c.job == job, S.deployments.c.region == region)
            ).first()

    def deployments(self, job: str | None = None, region: str | None = None) -> list[Row]:
        q = select(S.deployments).order_by(S.deployments.c.job, S.deployments.c.region)
        if job is not None:
            q = q.where(S.deployments.c.job == job)
        if region is not None:
            q = q.where(S.deployments.c.region == region)
        with self.engine.connect() as c:
            return list(c.execute(q))

    def set_deployment(self, job: str, region: str, **fields: Any) -> None:
        fields["updated_at"] = self.now()
        with self.engine.begin() as c:
            done = c.execute(
                update(S.deployments)
                .where(S.deployments.c.job == job, S.deployments.c.region == region)
                .values(**fields)
            ).rowcount
            if not done:
                c.execute(insert(S.deployments).values(job=job, region=region, **fields))

    # -- runs ------------------------------------------------------------------------------
    def create_run(self, **fields: Any) -> int:
        fields.setdefault("requested_at", self.now())
        for name in ("starting_offsets", "context"):
            if name in fields and not isinstance(fields[name], (str, type(None))):
                fields[name] = S.dumps(fields[name])
        with self.engine.begin() as c:
            return S.inserted_id(c.execute(insert(S.runs).values(**fields)))

    def update_run(self, run_id: int, **fields: Any) -> None:
        with self.engine.begin() as c:
            c.execute(update(S.runs).where(S.runs.c.id == run_id).values(**fields))

    def claim_run(self, run_id: int, pid: int, host: str, *, pid_started_at: float | None = None) -> bool:
        """The one driver process of a run marks it started, recording itself (``pid``, started
        at ``pid_started_at``); a second launch of the same run finds it claimed and must exit."""
        with self.engine.begin() as c:
            return bool(
                c.execute(
                    update(S.runs)
                    .where(S.runs.c.id == run_id, S.runs.c.started_at.is_(None))
                    .values(
                        started_at=self.now(),
                        heartbeat_at=self.now(),
                        pid=pid,
                        pid_started_at=pid_started_at,
                        host=host,
                    )
                ).rowcount
            )

    def run(self, run_id: int) -> Row | None:
        with self.engine.connect() as c:
            return c.execute(select(S.runs).where(S.runs.c.id == run_id)).first()

    def runs(
        self, job: str | None = None, region: str | None = None, *, kind: str | None = "job", limit: int | None = None
    ) -> list[Row]:
        """Newest first."""
        q = select(S.runs).order_by(S.runs.c.id.desc())
        if job is not None:
            q = q.where(S.runs.c.job == job)
        if region is not None:
            q = q.where(S.runs.c.region == region)
        if kind is not None:
            q = q.where(S.runs.c.kind == kind)
        if limit is not None:
            q = q.limit(limit)
        with self.engine.connect() as c:
            return list(c.execute(q))

    def latest_run(self, job: str, region: str, kind: str = "job") -> Row | None:
        """The newest run that started or tried to, skipping attempts refused because another
        run held the job's lease at that moment (that other run is the job's latest)."""
        q = (
            select(S.runs)
            .where(S.runs.c.job == job, S.runs.c.region == region, S.runs.c.kind == kind, S.runs.c.status != REFUSED)
            .order_by(S.runs.c.id.desc())
            .limit(1)
        )
        with self.engine.connect() as c:
            return c.execute(q).first()

    # -- lineages ------------------------------------------------------------------------
    def create_lineage(self, **fields: Any) -> None:
        fields.setdefault("created_at", self.now())
        with self.engine.begin() as c:
            c.execute(insert(S.lineages).values(**fields))

    def lineage(self, lineage_id: str) -> Row | None:
        with self.engine.connect() as c:
            return c.execute(select(S.lineages).where(S.lineages.c.id == lineage_id)).first()

    def lineages(self, job: str, region: str, kind: str = "job") -> list[Row]:
        """Oldest first: the order their outputs follow each other."""
        q = (
            select(S.lineages)
            .where(S.lineages.c.job == job, S.lineages.c.region == region, S.lineages.c.kind == kind)
            .order_by(S.lineages.c.created_at, S.lineages.c.id)
        )
        with self.engine.connect() as c:
            return list(c.execute(q))

    def update_lineage(self, lineage_id: str, **fields: Any) -> None:
        if "last_offsets" in fields and not isinstance(fields["last_offsets"], (str, type(None))):
            fields["last_offsets"] = S.dumps(fields["last_offsets"])
        with self.engine.begin() as c:
            c.execute(update(S.lineages).where(S.lineages.c.id == lineage_id).values(**fields))

    # -- metrics ---------------------------------------------------------------------------
    def record_batch(self, **fields: Any) -> None:
        for name in ("end_offsets", "partitions", "stages"):
            if name in fields and not isinstance(fields[name], (str, type(None))):
                fields[name] = S.dumps(fields[name])
        key = and_(S.batch_metrics.c.run_id == fields["run_id"], S.batch_metrics.c.batch_id == fields["batch_id"])
        with self.engine.begin() as c:  # a re-run batch (after a crash) replaces its row
            c.execute(delete(S.batch_metrics).where(key))
            c.execute(insert(S.batch_metrics).values(**fields))

    def batch_metrics(
        self,
        job: str,
        region: str | None = None,
        *,
        run_id: int | None = None,
        since: float | None = None,
        limit: int | None = None,
        first: bool = False,
    ) -> list[Row]:
        """Oldest first: the last ``limit`` when given, or with ``first`` the first ``limit``."""
        q = select(S.batch_metrics).where(S.batch_metrics.c.job == job)
        if region is not None:
            q = q.where(S.batch_metrics.c.region == region)
        if run_id is not None:
            q = q.where(S.batch_metrics.c.run_id == run_id)
        if since is not None:
            q = q.where(S.batch_metrics.c.processed_at >= since)
        if first:
            q = q.order_by(S.batch_metrics.c.processed_at, S.batch_metrics.c.batch_id)
        else:
            q = q.order_by(S.batch_metrics.c.processed_at.desc(), S.batch_metrics.c.batch_id.desc())
        if limit is not None:
            q = q.limit(limit)
        with self.engine.connect() as c:
            rows = list(c.execute(q))
        return rows if first else list(reversed(rows))

    def run_totals(self, run_id: int) -> dict[str, int]:
        """semantics §5 counts summed over every batch of a run."""
        names = (
            "input_events",
            "quarantined",
            "rows_emitted",
            "out_of_order_adjusted",
            "out_of_order_dropped",
            "late_adjusted",
            "late_dropped",
            "early_dropped",
        )
        cols = [func.coalesce(func.sum(getattr(S.batch_metrics.c, n)), 0) for n in names]
        with self.engine.connect() as c:
            row = c.execute(select(*cols).where(S.batch_metrics.c.run_id == run_id)).one()
        return {n: int(v) for n, v in zip(names, row, strict=True)}

    # semantics §5 counts as lineage_totals sums them
    COUNTS = (
        "input_events",
        "quarantined",
        "rows_emitted",
        "out_of_order_adjusted",
        "out_of_order_dropped",
        "late_adjusted",
        "late_dropped",
        "early_dropped",
    )

    def lineage_totals(self, lineage_id: str) -> dict[str, int]:
        """semantics §5 counts of a lineage: over every run that continued its checkpoint, each
        batch once (see :meth:`lineage_totals_query`). All zero before its first batch."""
        with self.engine.connect() as c:
            row = c.execute(self.lineage_totals_query([lineage_id])).first()
        return {n: 0 if row is None else int(getattr(row, n)) for n in self.COUNTS}

    @staticmethod
    def lineage_totals_query(lineage_ids: Iterable[str]):
        """One row per lineage with batches: ``lineage`` and the sums of :attr:`COUNTS`.

        A batch a crashed run recorded and its successor re-ran on the same checkpoint (same
        batch id) counts once, as its latest run recorded it: the outcome of a batch's input
        does not depend on which run processed it (semantics §2)."""
        bm, runs = S.batch_metrics, S.runs
        latest = (
            select(runs.c.lineage, bm.c.batch_id, func.max(bm.c.run_id).label("run_id"))
            .join_from(bm, runs, runs.c.id == bm.c.run_id)
            .where(runs.c.lineage.in_(list(lineage_ids)))
            .group_by(runs.c.lineage, bm.c.batch_id)
            .subquery()
        )
        sums = [func.coalesce(func.sum(getattr(bm.c, n)), 0).label(n) for n in ControlDB.COUNTS]
        return (
            select(latest.c.lineage, *sums)
            .join_from(latest, bm, and_(bm.c.run_id == latest.c.run_id, bm.c.batch_id == latest.c.batch_id))
            .group_by(latest.c.lineage)
        )

    # -- active region ---------------------------------------------------------------------
    def active_region(self, job: str) -> Row | None:
        with self.engine.connect() as c:
            return c.execute(select(S.active_regions).where(S.active_regions.c.job == job)).first()

    def set_active_region(self, job: str, region: str, reason: str, *, expect: str | None = None) -> bool:
        """Point consumers at ``region``. With ``expect``, only if the active region is still
        ``expect`` (compare-and-set: two failovers at once cannot both switch)."""
        now = self.now()
        with self.engine.begin() as c:
            q = update(S.active_regions).where(S.active_regions.c.job == job)
            if expect is not None:
                q = q.where(S.active_regions.c.region == expect)
            if c.execute(q.values(region=region, since=now, reason=reason)).rowcount:
                return True
        if expect is not None:
            return False
        try:
            with self.engine.begin() as c:
                c.execute(insert(S.active_regions).values(job=job, region=region, since=now, reason=reason))
            return True
        except IntegrityError:
            return False

    def write_lock_free(self) -> bool:
        """True when nobody holds the database's write lock now. SQLite has one lock for the
        whole file: a process frozen inside a write transaction (SIGSTOP) stalls every other
        writer until it runs again or dies. PostgreSQL locks rows, never the database."""
        if self.engine.dialect.name != "sqlite":
            return True
        raw = self.engine.raw_connection()
        try:
            cur = raw.cursor()
            cur.execute("PRAGMA busy_timeout=0")
            try:
                cur.execute("BEGIN IMMEDIATE")
            except Exception:  # sqlite3.OperationalError: database is locked
                return False
            cur.execute("ROLLBACK")
            return True
        finally:
            raw.invalidate()  # its busy timeout is not the pool's: never hand it out again

    def count(self, table_name: str) -> int:
        table = S.metadata.tables[table_name]
        with self.engine.connect() as c:
            return int(c.execute(select(func.count()).select_from(table)).scalar_one())


def _engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection, _record) -> None:  # noqa: ANN001 — DB-API objects
            cur = dbapi_connection.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
            cur.close()

        return engine
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    # a server that hangs must fail a call in bounded time, not freeze a driver's heartbeat
    engine = create_engine(
        url,
        pool_pre_ping=True,  # a pooled connection to a primary that is gone is replaced at checkout
        connect_args={
            "connect_timeout": PG_CONNECT_TIMEOUT_S,
            "options": f"-c statement_timeout={PG_STATEMENT_TIMEOUT_S * 1000}",
        },
    )
    # with a multi-host URL (one host per region), new connections wait out a promotion
    follow_primary(engine)
    return engine


def _lock_for_migration(c: Connection) -> None:
    """Start ``c``'s transaction holding what keeps other migrators out until it ends. SQLite:
    the write lock of the whole file (BEGIN IMMEDIATE; the Python driver would otherwise run the
    look and the ALTER outside any transaction). PostgreSQL: a transaction-scoped advisory lock;
    its DDL is transactional, so a migration cut short leaves nothing behind."""
    if c.dialect.name == "sqlite":
        c.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        c.execute(select(func.pg_advisory_xact_lock(MIGRATION_LOCK_KEY)))


def _schema_version(c) -> int:
    return int(c.execute(select(func.max(S.schema_info.c.version))).scalar() or 0)


def _redact(url: str) -> str:
    """The URL without its password, for messages."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"
