"""Who may act: leases with fencing epochs, and the one-procedure-per-job lock.

Part of :class:`tidegate.control.db.ControlDB` (a mixin over its engine and clocks). Expiry
is judged on the database server's clock — one clock for every host — unless a test clock
was given; each change of a lease's holder grows its fencing epoch (``fences``), which every
commit of a driver proves (:mod:`tidegate.lineage.fence`).

With the database replicated across the regions (:mod:`tidegate.control.ha`) both survive a
promotion: epochs are rows, committed on the synchronous standby before they are granted,
so the new primary continues them and never grants one twice; the lease clock becomes the
new primary's clock, so a difference δ between the two servers' clocks shortens (or
lengthens) every lease running at the promotion by δ, once. Keep the servers on NTP (δ in
milliseconds): a driver's own monotonic lease clock, which commits prove first, keeps a
margin of a second. Calls that only read, and those a second run leaves as the first did
(acquire and renew for the same holder), ride out the promotion window
(:func:`tidegate.control.ha.reconnect.idempotent`); a renewal waits at most its time to live.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Float, delete, insert, literal, literal_column, or_, select, update
from sqlalchemy.engine import Engine, Row
from sqlalchemy.exc import IntegrityError

from tidegate.control import schema as S
from tidegate.control.ha.reconnect import deadline, idempotent
from tidegate.errors import TidegateError


class ProcedureBusy(TidegateError):
    """Another procedure on the same job is running; ``running`` is its lock row."""

    def __init__(self, message: str, hint: str = "", *, running: Row | None = None) -> None:
        super().__init__(message, hint)
        self.running = running


class Leases:
    """Leases and procedure locks over ``self.engine`` (see the module docstring)."""

    # provided by ControlDB (its __init__ sets the attributes; History defines procedure)
    engine: Engine
    now: Callable[[], float]
    _test_clock: Callable[[], float] | None
    procedure: Callable[[int], Row | None]

    # -- leases ----------------------------------------------------------------------------
    @idempotent
    def clock(self) -> float:
        """Now on the clock leases are judged by: the database server's (epoch seconds)."""
        if self._test_clock is not None:
            return self._test_clock()
        with self.engine.connect() as c:
            return float(c.execute(select(self._db_now())).scalar_one())

    def _db_now(self):
        if self._test_clock is not None:
            return literal(self._test_clock(), Float)
        if self.engine.dialect.name == "sqlite":
            return literal_column("((julianday('now') - 2440587.5) * 86400.0)", Float)
        return literal_column("CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)", Float)

    @idempotent
    def acquire_lease(
        self,
        name: str,
        holder: str,
        ttl_s: float,
        *,
        host: str | None = None,
        pid: int | None = None,
        pid_started_at: float | None = None,
    ) -> int:
        """Take ``name`` if it is free, expired, or already ``holder``'s. Atomic: of two
        concurrent callers exactly one gets it. Returns the fencing epoch granted (≥ 1), or
        0 when someone else holds the lease. ``pid`` and ``pid_started_at``: the holder's
        process, as :class:`tidegate.processes.Recorded` finds it again."""
        now = self._db_now()
        values = dict(
            holder=holder, host=host, pid=pid, pid_started_at=pid_started_at, acquired_at=now, expires_at=now + ttl_s
        )
        taken = False
        with self.engine.begin() as c:
            if c.execute(
                update(S.leases)
                .where(S.leases.c.name == name, or_(S.leases.c.expires_at < now, S.leases.c.holder == holder))
                .values(**values)
            ).rowcount:
                taken = True
                epoch = self._grant(c, name, holder)
        if taken:
            return epoch
        try:
            with self.engine.begin() as c:
                c.execute(insert(S.leases).values(name=name, **values))
                return self._grant(c, name, holder)
        except IntegrityError:  # someone holds it (or took it between our two statements)
            return 0

    def _grant(self, c, name: str, holder: str) -> int:
        """Inside the transaction that took the lease: the epoch of ``holder`` — the current
        one when it already held it, the next one otherwise."""
        row = c.execute(select(S.fences).where(S.fences.c.name == name)).first()
        if row is not None and row.holder == holder:
            return int(row.epoch)
        epoch = 1 if row is None else int(row.epoch) + 1
        if row is None:
            c.execute(insert(S.fences).values(name=name, epoch=epoch, holder=holder, granted_at=self.now()))
        else:
            c.execute(
                update(S.fences)
                .where(S.fences.c.name == name, S.fences.c.epoch == row.epoch)
                .values(epoch=epoch, holder=holder, granted_at=self.now())
            )
        return epoch

    def renew_lease(
        self, name: str, holder: str, ttl_s: float, *, pid: int | None = None, pid_started_at: float | None = None
    ) -> bool:
        """Extend the lease; False when ``holder`` no longer has it (it must stop working).
        In a promotion of the control database it waits for the new primary for at most
        ``ttl_s``, then raises: a holder that could not renew within its time to live stops."""
        with deadline(ttl_s):
            return self._renew(name, holder, ttl_s, pid, pid_started_at)

    @idempotent
    def _renew(self, name: str, holder: str, ttl_s: float, pid: int | None, pid_started_at: float | None) -> bool:
        values: dict[str, Any] = {"expires_at": self._db_now() + ttl_s}
        if pid is not None:
            values["pid"] = pid
            values["pid_started_at"] = pid_started_at
        with self.engine.begin() as c:
            return bool(
                c.execute(
                    update(S.leases).where(S.leases.c.name == name, S.leases.c.holder == holder).values(**values)
                ).rowcount
            )

    def release_lease(self, name: str, holder: str) -> None:
        with self.engine.begin() as c:
            c.execute(delete(S.leases).where(S.leases.c.name == name, S.leases.c.holder == holder))

    @idempotent
    def lease(self, name: str) -> Row | None:
        with self.engine.connect() as c:
            return c.execute(select(S.leases).where(S.leases.c.name == name)).first()

    @idempotent
    def lease_live(self, name: str, holder: str | None = None) -> Row | None:
        """The lease row while it has not expired on the database's clock (and is
        ``holder``'s, when given); None otherwise."""
        q = select(S.leases).where(S.leases.c.name == name, S.leases.c.expires_at > self._db_now())
        if holder is not None:
            q = q.where(S.leases.c.holder == holder)
        with self.engine.connect() as c:
            return c.execute(q).first()

    @idempotent
    def epoch(self, name: str) -> int:
        """The lease's current fencing epoch (0 when it was never granted)."""
        with self.engine.connect() as c:
            value = c.execute(select(S.fences.c.epoch).where(S.fences.c.name == name)).scalar()
        return 0 if value is None else int(value)

    @idempotent
    def holds(self, name: str, holder: str, epoch: int) -> bool:
        """True while ``holder`` holds ``name`` under ``epoch`` and the lease has not expired
        on the database's clock: what a commit must prove."""
        q = (
            select(S.leases.c.name)
            .join(S.fences, S.fences.c.name == S.leases.c.name)
            .where(
                S.leases.c.name == name,
                S.leases.c.holder == holder,
                S.leases.c.expires_at > self._db_now(),
                S.fences.c.epoch == epoch,
                S.fences.c.holder == holder,
            )
        )
        with self.engine.connect() as c:
            return c.execute(q).first() is not None

    # -- one procedure per job ---------------------------------------------------------
    def begin_procedure(
        self, kind: str, job: str, region: str | None = None, *, ttl_s: float, lock: str | None = None, **fields: Any
    ) -> int:
        """Record a procedure and take the job's procedure lock with it, atomically; its id.
        Raises :class:`ProcedureBusy` naming the running one when another holds the lock.
        The lock lasts ``ttl_s`` (on the database's clock) unless :meth:`finish_procedure`
        ends it first: a procedure that died does not block the job for ever. ``lock`` names
        another lock than the job's, for a procedure that must leave the job's free (one
        that waits for the job's failover)."""
        record_job, job = job, lock or job
        now = self._db_now()
        try:
            with self.engine.begin() as c:
                procedure_id = S.inserted_id(
                    c.execute(
                        insert(S.procedures).values(
                            kind=kind, job=record_job, region=region, started_at=self.now(), result="running", **fields
                        )
                    )
                )
                row = dict(procedure_id=procedure_id, kind=kind, region=region, acquired_at=now, expires_at=now + ttl_s)
                if not c.execute(
                    update(S.procedure_locks)
                    .where(S.procedure_locks.c.job == job, S.procedure_locks.c.expires_at < now)
                    .values(**row)
                ).rowcount:
                    c.execute(insert(S.procedure_locks).values(job=job, **row))
                return procedure_id
        except IntegrityError:
            pass
        held = self.procedure_lock(job)
        running = self.procedure(held.procedure_id) if held is not None else None
        what = f"{held.kind} of {running.job if running else job}" if held is not None else f"a procedure of {job}"
        where = f" in {held.region}" if held is not None and held.region else ""
        since = f", started {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(running.started_at))}" if running else ""
        raise ProcedureBusy(
            f"{kind} of {record_job} refused: {what}{where} is already running (procedure "
            f"{held.procedure_id if held else '?'}{since})",
            "wait for it to end (the Tidegate page shows it, and `tidegate drill history` a drill), then try again",
            running=held,
        )

    @idempotent
    def procedure_lock(self, job: str) -> Row | None:
        """The running procedure's lock on ``job`` (None when free or expired)."""
        q = select(S.procedure_locks).where(
            S.procedure_locks.c.job == job, S.procedure_locks.c.expires_at > self._db_now()
        )
        with self.engine.connect() as c:
            return c.execute(q).first()
