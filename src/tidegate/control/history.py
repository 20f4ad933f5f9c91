"""What happened: operations, completeness checks, procedures and catch-up estimates.

Part of :class:`tidegate.control.db.ControlDB` (a mixin over its engine and clock): the
records people, the page and the calibration of estimates read back, as opposed to the
state the platform acts on (versions, deployments, runs, lineages, metrics, the active
region — in ``db``) and who may act (:mod:`tidegate.control.leases`). Rows are appended
and then only completed (a procedure's end, an estimate's run); nothing here decides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Engine, Row

from tidegate.control import schema as S


class History:
    """Operations, checks, procedures and estimates over ``self.engine`` (see the module docstring)."""

    # provided by ControlDB (its __init__ sets them)
    engine: Engine
    now: Callable[[], float]

    # -- operations, checks, procedures ----------------------------------------------------
    def record_operation(
        self,
        action: str,
        outcome: str,
        *,
        job: str | None = None,
        region: str | None = None,
        detail: Any = None,
        actor: str | None = None,
    ) -> None:
        with self.engine.begin() as c:
            c.execute(
                insert(S.operations).values(
                    at=self.now(),
                    job=job,
                    region=region,
                    action=action,
                    outcome=outcome,
                    detail=detail if isinstance(detail, (str, type(None))) else S.dumps(detail),
                    actor=actor,
                )
            )

    def operations(self, job: str | None = None, limit: int = 100) -> list[Row]:
        q = select(S.operations).order_by(S.operations.c.id.desc()).limit(limit)
        if job is not None:
            q = q.where(S.operations.c.job == job)
        with self.engine.connect() as c:
            return list(c.execute(q))

    def record_check(
        self,
        job: str,
        target: str,
        success: bool,
        *,
        span: tuple[int | None, int | None] = (None, None),
        summary: str = "",
        findings: Any = None,
        data_docs: str | None = None,
        context: Any = None,
    ) -> int:
        with self.engine.begin() as c:
            return S.inserted_id(
                c.execute(
                    insert(S.checks).values(
                        at=self.now(),
                        job=job,
                        target=target,
                        span_from_us=span[0],
                        span_to_us=span[1],
                        success=success,
                        summary=summary,
                        findings=S.dumps(findings),
                        data_docs=data_docs,
                        context=S.dumps(context),
                    )
                )
            )

    def checks(self, job: str | None = None, limit: int = 100) -> list[Row]:
        q = select(S.checks).order_by(S.checks.c.id.desc()).limit(limit)
        if job is not None:
            q = q.where(S.checks.c.job == job)
        with self.engine.connect() as c:
            return list(c.execute(q))

    def start_procedure(self, kind: str, job: str, region: str | None = None, **fields: Any) -> int:
        with self.engine.begin() as c:
            return S.inserted_id(
                c.execute(
                    insert(S.procedures).values(
                        kind=kind, job=job, region=region, started_at=self.now(), result="running", **fields
                    )
                )
            )

    def note_procedure(self, procedure_id: int, detail: str) -> bool:
        """Replace a running procedure's detail (a step it must find again if its task dies
        and runs a second time); False when the procedure has ended."""
        with self.engine.begin() as c:
            return bool(
                c.execute(
                    update(S.procedures)
                    .where(S.procedures.c.id == procedure_id, S.procedures.c.result == "running")
                    .values(detail=detail)
                ).rowcount
            )

    def finish_procedure(self, procedure_id: int, result: str, **fields: Any) -> None:
        if "checks" in fields and not isinstance(fields["checks"], (str, type(None))):
            fields["checks"] = S.dumps(fields["checks"])
        with self.engine.begin() as c:
            c.execute(
                update(S.procedures)
                .where(S.procedures.c.id == procedure_id)
                .values(result=result, ended_at=self.now(), **fields)
            )
            c.execute(delete(S.procedure_locks).where(S.procedure_locks.c.procedure_id == procedure_id))

    def procedures(self, job: str | None = None, kind_prefix: str | None = None, limit: int = 100) -> list[Row]:
        q = select(S.procedures).order_by(S.procedures.c.id.desc()).limit(limit)
        if job is not None:
            q = q.where(S.procedures.c.job == job)
        if kind_prefix is not None:
            q = q.where(S.procedures.c.kind.like(kind_prefix + "%"))
        with self.engine.connect() as c:
            return list(c.execute(q))

    def procedure(self, procedure_id: int) -> Row | None:
        with self.engine.connect() as c:
            return c.execute(select(S.procedures).where(S.procedures.c.id == procedure_id)).first()

    # -- estimates -------------------------------------------------------------------------
    def add_estimate(
        self,
        job: str,
        region: str,
        kind: str,
        seconds: float | None,
        details: Mapping,
        *,
        version: int | None = None,
        first_output_s: float | None = None,
        run_id: int | None = None,
    ) -> int:
        with self.engine.begin() as c:
            return S.inserted_id(
                c.execute(
                    insert(S.estimates).values(
                        job=job,
                        region=region,
                        version=version,
                        kind=kind,
                        seconds=seconds,
                        first_output_s=first_output_s,
                        details=S.dumps(dict(details)),
                        created_at=self.now(),
                        run_id=run_id,
                    )
                )
            )

    def estimates(self, job: str, region: str | None = None, limit: int = 50) -> list[Row]:
        q = select(S.estimates).where(S.estimates.c.job == job).order_by(S.estimates.c.id.desc()).limit(limit)
        if region is not None:
            q = q.where(S.estimates.c.region == region)
        with self.engine.connect() as c:
            return list(c.execute(q))

    def attach_estimates(self, estimate_ids: Iterable[int], run_id: int) -> None:
        ids = list(estimate_ids)
        if ids:
            with self.engine.begin() as c:
                c.execute(update(S.estimates).where(S.estimates.c.id.in_(ids)).values(run_id=run_id))
