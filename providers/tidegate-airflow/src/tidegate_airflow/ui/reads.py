"""What the Tidegate page shows, read from the control database — and nothing written to it.

Whether a run's driver is alive is decided by :func:`tidegate.runtime.jobs.liveness.judge_run`,
the rule the controller's status uses too: a run in starting/running/stopping whose lease
``job:<job>:<region>`` is held by ``run-<id>`` and not expired (and, on this host, whose
process runs) is alive; otherwise it is reported as lost. Recording a lost run is the
controller's and the supervisor's business, never the page's. The database is opened
read-only (SQLite ``mode=ro``; PostgreSQL with
read-only transactions, and with ``TIDEGATE_UI_DB`` naming a role that may only SELECT —
``scripts/tidegate_ui_role.sql`` — the server itself refuses writes), so a bug here cannot
write either.

A run restarted on its checkpoint continues that checkpoint's *lineage*: its last output,
watermark and counts are the lineage's (every run of it) until the run has figures of its
own, so a restart does not look like "nothing happened". Before the first deploy there is
no control database (or one without Tidegate's tables): that is :class:`ControlDBNotCreated`,
an empty start, not an outage.

Wall-clock moments are float epoch seconds (``*_at``); event times are int µs (``*_us``);
the JSON adds ISO strings for the µs values so the page needs no time arithmetic of its own.

The read-only connection is :mod:`tidegate_airflow.ui.read_only`. Why one module of the
reads: every one goes through that connection and the one liveness rule above; split by
panel, each part would reopen both.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, inspect, select, union
from sqlalchemy.engine import Engine, Row

from tidegate.control import schema as S
from tidegate.control.db import ControlDB
from tidegate.eventtime.durations import format_time_us
from tidegate.runtime.jobs.liveness import judge_run, local_process_alive
from tidegate_airflow.ui.outcomes import procedure_outcome
from tidegate_airflow.ui.read_only import ControlDBNotCreated, ControlDBUnavailable


# -- formatting --------------------------------------------------------------------------
def iso_us(value_us: int | None) -> str | None:
    """ISO 8601 in UTC for any stored µs value (``+10000-…`` past the year 9999)."""
    return None if value_us is None else format_time_us(value_us)


def _loads(text: str | None) -> Any:
    if text is None or text == "":
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text  # a free-text document is shown as written


def _s(value_us: int | None) -> float | None:
    return None if value_us is None else value_us / 1e6


# -- job × region status -----------------------------------------------------------------
class ControlReader:
    """Read-only queries behind the page's JSON routes."""

    def __init__(
        self,
        engine: Engine,
        regions: Iterable[str] = (),
        *,
        now: Callable[[], float] = time.time,
        host: str | None = None,
        driver_alive: Callable[[Any], bool] | None = None,
    ) -> None:
        from tidegate.runtime.jobs.process import HOST
        from tidegate.runtime.jobs.process import driver_alive as _driver_alive

        self.engine = engine
        self.configured_regions = list(regions)
        self.now = now
        self.host = HOST if host is None else host
        self.driver_alive = driver_alive or _driver_alive  # of a run row: its recorded process

    def _rows(self, query) -> list[Row]:
        try:
            with self.engine.connect() as c:
                return list(c.execute(query))
        except ControlDBUnavailable:
            raise
        except Exception as exc:  # the page says why instead of a bare 500
            orig = getattr(exc, "orig", None)
            if isinstance(orig, ControlDBUnavailable):
                raise orig from None
            if self._without_tables():
                raise ControlDBNotCreated(f"the control database {self._name()} has no Tidegate tables yet") from None
            raise ControlDBUnavailable(
                f"cannot read the control database {self._name()}: {orig or exc}; check TIDEGATE_UI_DB (or "
                "TIDEGATE_CONTROL_DB) and that the database is up — a read-only role needs SELECT on Tidegate's "
                "tables (scripts/tidegate_ui_role.sql)"
            ) from None

    def _without_tables(self) -> bool:
        """True when the database answers but Tidegate never created its tables in it."""
        try:
            with self.engine.connect() as c:
                return not inspect(c).has_table(S.schema_info.name)
        except Exception:  # noqa: BLE001 — unreachable or not a database: not an empty start
            return False

    def _name(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    # -- jobs ---------------------------------------------------------------------------
    def jobs(self) -> list[str]:
        q = union(
            select(S.job_versions.c.job),
            select(S.deployments.c.job),
            select(S.runs.c.job).where(S.runs.c.kind == "job"),
            select(S.active_regions.c.job),
        )
        return sorted({r[0] for r in self._rows(q)})

    def overview(self) -> dict[str, Any]:
        """Every job × region: state, versions, the active region and the latest figures."""
        now = self.now()
        jobs = self.jobs()
        deployments = {(r.job, r.region): r for r in self._rows(select(S.deployments))}
        latest_ids = select(func.max(S.runs.c.id)).where(S.runs.c.kind == "job").group_by(S.runs.c.job, S.runs.c.region)
        runs = {(r.job, r.region): r for r in self._rows(select(S.runs).where(S.runs.c.id.in_(latest_ids)))}
        run_ids = [r.id for r in runs.values()]
        lineages = self._lineages(sorted({r.lineage for r in runs.values()}))
        leases = {r.name: r for r in self._rows(select(S.leases).where(S.leases.c.name.like("job:%")))}
        actives = {r.job: r for r in self._rows(select(S.active_regions))}
        latest = {}  # job -> its highest registered version (ordered: the last one wins)
        for r in self._rows(
            select(S.job_versions.c.job, S.job_versions.c.version, S.job_versions.c.source_path).order_by(
                S.job_versions.c.job, S.job_versions.c.version
            )
        ):
            latest[r.job] = r
        totals = self._run_totals(run_ids)
        last_batches = self._last_batches(run_ids)

        regions = list(self.configured_regions)
        for _job, region in list(deployments) + list(runs):
            if region not in regions:
                regions.append(region)

        out = []
        for job in jobs:
            active = actives.get(job)
            rows = []
            for region in regions:
                rows.append(
                    self._status(
                        job,
                        region,
                        deployments.get((job, region)),
                        runs.get((job, region)),
                        leases,
                        active,
                        totals,
                        last_batches,
                        lineages,
                        now,
                    )
                )
            out.append(
                {
                    "job": job,
                    "latest_version": latest[job].version if job in latest else None,
                    "source_path": latest[job].source_path if job in latest else None,
                    "active_region": active.region if active else None,
                    "active_since": active.since if active else None,
                    "active_reason": active.reason if active else None,
                    "regions": rows,
                }
            )
        return {"now": now, "regions": regions, "jobs": out}

    def _status(self, job, region, dep, run, leases, active, totals, last_batches, lineages, now) -> dict[str, Any]:
        base = {
            "job": job,
            "region": region,
            "active": bool(active and active.region == region),
            "desired": dep.desired if dep else None,
            "deployed_version": dep.version if dep else None,
            "keep_running": bool(dep.keep_running) if dep else None,
        }
        if run is None:
            return {
                **base,
                "state": "never",
                "recorded_state": None,
                "detail": "no run yet",
                "version": None,
                "run_id": None,
                "counts": {},
            }
        verdict = judge_run(
            run,
            leases.get(f"job:{job}:{region}"),
            now=now,
            process_alive=local_process_alive(run, self.host, self.driver_alive),
        )
        last = last_batches.get(run.id)
        stages = _loads(last.stages) if last is not None else None
        rate = stages.get("input_rate_eps") if isinstance(stages, dict) else None
        # the checkpoint's lineage: what every run of it did, this one included
        lineage = lineages.get(run.lineage) or LineageFigures()
        checkpoint_batch = last if last is not None else lineage.last_batch
        last_output_us = _latest(run.last_output_us, lineage.row.last_output_us if lineage.row else None)
        watermark_us = run.job_watermark_us
        if watermark_us is None and lineage.last_batch is not None:
            watermark_us = lineage.last_batch.job_watermark_us
        final_us = lineage.row.emitted_through_us if lineage.row else None
        return {
            **base,
            "state": verdict.state.value,
            "recorded_state": run.status,
            "detail": verdict.detail,
            "run_id": run.id,
            "version": run.version,
            "start_mode": run.start_mode,
            "output_start_us": run.output_start_us,
            "output_start": iso_us(run.output_start_us),
            "checkpoint": run.checkpoint,
            "checkpoint_reason": run.checkpoint_reason,
            "lineage": run.lineage,
            "partial": bool(run.partial),
            "host": run.host,
            "pid": run.pid,
            "requested_at": run.requested_at,
            "started_at": run.started_at,
            "heartbeat_at": run.heartbeat_at,
            "caught_up_at": run.caught_up_at,
            "ended_at": run.ended_at,
            "last_output_us": last_output_us,
            "last_output": iso_us(last_output_us),
            "job_watermark_us": watermark_us,
            "job_watermark": iso_us(watermark_us),
            "output_final_through_us": final_us,
            "output_final_through": iso_us(final_us),
            "watermark_delay_s": _s(last.watermark_delay_us) if last is not None else None,
            # as the controller reports it: recorded on the broker's clock at the batch, growing
            # with the time since, so a stuck job's lag keeps rising
            "processing_lag_s": None
            if last is None or last.processing_lag_us is None
            else last.processing_lag_us / 1e6 + max(0.0, now - last.processed_at),
            "input_rate_eps": rate,
            "backlog_events": run.backlog_events,
            "last_batch_id": run.last_batch_id
            if run.last_batch_id is not None
            else (checkpoint_batch.batch_id if checkpoint_batch is not None else None),
            "last_batch_at": checkpoint_batch.processed_at if checkpoint_batch is not None else None,
            "last_batch_run_id": checkpoint_batch.run_id if checkpoint_batch is not None else None,
            "counts": lineage.counts or totals.get(run.id, {}),  # the lineage's, every run of it
            "run_counts": totals.get(run.id, {}),  # this run's own
            "log_path": run.log_path,
        }

    def _run_totals(self, run_ids: list[int]) -> dict[int, dict[str, int]]:
        if not run_ids:
            return {}
        cols = [func.coalesce(func.sum(getattr(S.batch_metrics.c, n)), 0).label(n) for n in ControlDB.COUNTS]
        q = (
            select(S.batch_metrics.c.run_id, *cols)
            .where(S.batch_metrics.c.run_id.in_(run_ids))
            .group_by(S.batch_metrics.c.run_id)
        )
        return {row.run_id: _counts(row) for row in self._rows(q)}

    def _lineages(self, lineage_ids: list[str]) -> dict[str, LineageFigures]:
        """Per lineage: its row, its counts over every run of it, and its newest batch."""
        if not lineage_ids:
            return {}
        rows = {r.id: r for r in self._rows(select(S.lineages).where(S.lineages.c.id.in_(lineage_ids)))}
        counts = {r.lineage: _counts(r) for r in self._rows(ControlDB.lineage_totals_query(lineage_ids))}
        bm, runs = S.batch_metrics, S.runs
        newest = (
            select(runs.c.lineage, func.max(bm.c.processed_at).label("at"))
            .join_from(bm, runs, runs.c.id == bm.c.run_id)
            .where(runs.c.lineage.in_(lineage_ids))
            .group_by(runs.c.lineage)
            .subquery()
        )
        q = (
            select(bm, newest.c.lineage)
            .join_from(bm, runs, runs.c.id == bm.c.run_id)
            .join(newest, (runs.c.lineage == newest.c.lineage) & (bm.c.processed_at == newest.c.at))
            .order_by(bm.c.batch_id, bm.c.run_id)
        )
        last = {r.lineage: r for r in self._rows(q)}  # ties: the highest batch, then the latest run
        return {i: LineageFigures(rows.get(i), counts.get(i, {}), last.get(i)) for i in lineage_ids}

    def _last_batches(self, run_ids: list[int]) -> dict[int, Row]:
        if not run_ids:
            return {}
        bm = S.batch_metrics
        newest = (
            select(bm.c.run_id, func.max(bm.c.processed_at).label("at"))
            .where(bm.c.run_id.in_(run_ids))
            .group_by(bm.c.run_id)
            .subquery()
        )
        q = (
            select(bm)
            .join(newest, (bm.c.run_id == newest.c.run_id) & (bm.c.processed_at == newest.c.at))
            .order_by(bm.c.batch_id)
        )
        return {r.run_id: r for r in self._rows(q)}  # ties: the highest batch id wins

    # -- metrics over time --------------------------------------------------------------
    def metrics(self, job: str, *, since: float | None = None, limit: int = 500) -> dict[str, Any]:
        """Per region, the last ``limit`` batches (oldest first) since ``since``."""
        bm = S.batch_metrics
        regions = [r[0] for r in self._rows(select(bm.c.region).where(bm.c.job == job).distinct())]
        series = {}
        for region in sorted(set(regions) | set(self.configured_regions)):
            q = select(bm).where(bm.c.job == job, bm.c.region == region)
            if since is not None:
                q = q.where(bm.c.processed_at >= since)
            q = q.order_by(bm.c.processed_at.desc(), bm.c.batch_id.desc()).limit(limit)
            rows = list(reversed(self._rows(q)))
            series[region] = _points(rows)
        return {"job": job, "now": self.now(), "since": since, "series": series}

    # -- procedures and checks ------------------------------------------------------------
    def procedures(self, job: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        q = select(S.procedures).order_by(S.procedures.c.id.desc()).limit(limit)
        if job:
            q = q.where(S.procedures.c.job == job)
        out = []
        for r in self._rows(q):
            error = None if r.estimate_s is None or r.actual_s is None else r.actual_s - r.estimate_s
            checks, detail = _loads(r.checks), _loads(r.detail)
            out.append(
                {
                    "id": r.id,
                    "kind": r.kind,
                    "job": r.job,
                    "region": r.region,
                    "started_at": r.started_at,
                    "ended_at": r.ended_at,
                    "result": r.result,
                    "estimate_s": r.estimate_s,
                    "actual_s": r.actual_s,
                    "error_s": error,
                    "checks": checks,
                    "detail": detail,
                    # how far the consumer view fell behind meanwhile (tidegate.runtime.outputs.consumer_gap)
                    "consumer_gap": detail.get("consumer_gap") if isinstance(detail, dict) else None,
                    # a failed drill's step, restore and the state it left; why one was refused or aborted
                    "outcome": procedure_outcome(r.result, detail, checks, r.actual_s),
                    "data_docs": r.data_docs,
                }
            )
        return out

    def procedure(self, procedure_id: int) -> Row | None:
        rows = self._rows(select(S.procedures).where(S.procedures.c.id == procedure_id))
        return rows[0] if rows else None

    def checks(self, job: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        q = select(S.checks).order_by(S.checks.c.id.desc()).limit(limit)
        if job:
            q = q.where(S.checks.c.job == job)
        return [
            {
                "id": r.id,
                "at": r.at,
                "job": r.job,
                "target": r.target,
                "success": bool(r.success),
                "span_from_us": r.span_from_us,
                "span_to_us": r.span_to_us,
                "span_from": iso_us(r.span_from_us),
                "span_to": iso_us(r.span_to_us),
                "summary": r.summary,
                "findings": _loads(r.findings),
                "context": _loads(r.context),
                "data_docs": r.data_docs,
            }
            for r in self._rows(q)
        ]

    def check(self, check_id: int) -> Row | None:
        rows = self._rows(select(S.checks).where(S.checks.c.id == check_id))
        return rows[0] if rows else None

    def operations(self, job: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        q = select(S.operations).order_by(S.operations.c.id.desc()).limit(limit)
        if job:
            q = q.where(S.operations.c.job == job)
        return [
            {
                "id": r.id,
                "at": r.at,
                "job": r.job,
                "region": r.region,
                "action": r.action,
                "outcome": r.outcome,
                "detail": _loads(r.detail),
                "actor": r.actor,
            }
            for r in self._rows(q)
        ]


@dataclass(frozen=True)
class LineageFigures:
    row: Row | None = None  # None: a run recorded before lineages were (or its row is gone)
    counts: dict[str, int] = field(default_factory=dict)
    last_batch: Row | None = None


def _counts(row: Row) -> dict[str, int]:
    """The semantics §5 sums of a row, with the page's late / early / out-of-order kinds."""
    counts = {n: int(getattr(row, n)) for n in ControlDB.COUNTS}
    counts["late"] = counts["late_adjusted"] + counts["late_dropped"]
    counts["early"] = counts["early_dropped"]
    counts["out_of_order"] = counts["out_of_order_adjusted"] + counts["out_of_order_dropped"]
    return counts


def _latest(*values_us: int | None) -> int | None:
    known = [v for v in values_us if v is not None]
    return max(known) if known else None


def _input_counts(partitions: Any) -> dict[str, int]:
    """A join job's kept events per input in one batch, summed over its log partitions (the
    engine's per-partition ``inputs`` counts); {} for a job with one input."""
    totals: dict[str, int] = {}
    for counts in partitions.values() if isinstance(partitions, dict) else ():
        for name, n in ((counts or {}).get("inputs") or {}).items():
            totals[name] = totals.get(name, 0) + int(n)
    return totals


def _points(rows: list[Row]) -> list[dict[str, Any]]:
    """Chart points; the input rate is the driver's ``input_rate_eps`` (events arriving per
    second) when recorded, else the batch's events over the time since the run's previous
    batch (none for a run's first batch: its backlog is no rate)."""
    points = []
    previous: Row | None = None
    for r in rows:
        stages = _loads(r.stages)
        rate = stages.get("input_rate_eps") if isinstance(stages, dict) else None
        if rate is None and previous is not None and previous.run_id == r.run_id:
            interval = r.processed_at - previous.processed_at
            rate = r.input_events / interval if interval > 0 else None
        points.append(
            {
                "t": r.processed_at,
                "run_id": r.run_id,
                "batch_id": r.batch_id,
                "watermark_delay_s": _s(r.watermark_delay_us),
                "processing_lag_s": _s(r.processing_lag_us),
                "input_rate_eps": rate,
                "input_events": r.input_events,
                "rows_emitted": r.rows_emitted,
                "late": r.late_adjusted + r.late_dropped,
                "early": r.early_dropped,
                "out_of_order": r.out_of_order_adjusted + r.out_of_order_dropped,
                "quarantined": r.quarantined,
                "backlog_events": r.backlog_events,
                "batch_seconds": r.batch_seconds,
                "inputs": _input_counts(_loads(r.partitions)),
            }
        )
        previous = r
    return points
