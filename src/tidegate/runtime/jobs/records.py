"""What the operating procedures read and write of the control database, as the controller's methods.

The Airflow provider and DAGs reach Tidegate through the hook's controller only: they ask it
for jobs, active regions, runs and procedure records here, never its repository
(``controller.db``), which stays the runtime's own
(``tests/providers/tidegate_airflow/test_no_db_access.py`` holds it). Each method is the
repository's call of the same name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import Row

from tidegate.control.db import ControlDB


class ControlRecords:
    db: ControlDB

    # -- jobs, regions, runs -------------------------------------------------------------
    def jobs(self) -> list[str]:
        """Every registered job."""
        return self.db.jobs()

    def active_region(self, job: str) -> Row | None:
        """The region whose output the job's consumers read (None: none yet)."""
        return self.db.active_region(job)

    def deployment(self, job: str, region: str) -> Row | None:
        return self.db.deployment(job, region)

    def run_record(self, run_id: int) -> Row | None:
        return self.db.run(run_id)

    def latest_run(self, job: str, region: str) -> Row | None:
        return self.db.latest_run(job, region)

    def update_run(self, run_id: int, **fields: Any) -> None:
        self.db.update_run(run_id, **fields)

    def add_estimate(
        self, job: str, region: str, kind: str, seconds: float | None, details: Mapping, **fields: Any
    ) -> int:
        return self.db.add_estimate(job, region, kind, seconds, details, **fields)

    def recovery_terms(self, run_id: int) -> dict[str, float | None]:
        """The run's restart split as its estimate is (see
        :func:`tidegate.runtime.estimates.recovery.actual_terms`)."""
        from tidegate.runtime.estimates.recovery import actual_terms

        return actual_terms(self.db, run_id)

    # -- procedures and their lock -------------------------------------------------------
    def begin_procedure(self, kind: str, job: str, region: str | None = None, *, ttl_s: float, **fields: Any) -> int:
        """Record a procedure and take the job's procedure lock; ProcedureBusy while another holds it."""
        return self.db.begin_procedure(kind, job, region, ttl_s=ttl_s, **fields)

    def finish_procedure(self, procedure_id: int, result: str, **fields: Any) -> None:
        self.db.finish_procedure(procedure_id, result, **fields)

    def procedure(self, procedure_id: int) -> Row | None:
        return self.db.procedure(procedure_id)

    def procedure_lock(self, job: str) -> Row | None:
        """The procedure that holds the job now, or None."""
        return self.db.procedure_lock(job)

    # -- checks --------------------------------------------------------------------------
    def check_could_not_run(self, job: str, target: str, error: BaseException | str, context: dict | None = None):
        """Record a completeness check that could not run as failed (see
        :func:`tidegate.runtime.checks.completeness.could_not_run`)."""
        from tidegate.runtime.checks.completeness import could_not_run

        return could_not_run(self.db, job, target, None, error, context)

    def close(self) -> None:
        """Release the database connections (a short-lived controller, e.g. a trigger's poll)."""
        self.db.dispose()
