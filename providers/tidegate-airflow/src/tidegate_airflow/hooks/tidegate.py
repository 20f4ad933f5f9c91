"""The Airflow side's one door to Tidegate: the job controller, through a hook.

Tasks never run streaming queries: they ask the controller to change what the control
database says and to launch or stop detached drivers, which outlive the task (and Airflow
itself). A later task — after an Airflow restart, in another worker — finds the same
drivers through the same database.

Configuration is the platform's own (``TIDEGATE_*`` environment, see docs/guide/configuration.md). An
Airflow connection (default ``tidegate_default``, of the provider's type ``tidegate`` or any
other) may override it: each key of its extra JSON is a ``TIDEGATE_*`` variable, e.g.
``{"TIDEGATE_CONTROL_DB": "postgresql+psycopg://…", "TIDEGATE_REGIONS": "east,west"}``.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any

from airflow.sdk import BaseHook


class TidegateHook(BaseHook):
    conn_name_attr = "tidegate_conn_id"
    default_conn_name = "tidegate_default"
    conn_type = "tidegate"
    hook_name = "Tidegate"

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """The connection form shows the extra JSON only: the rest of a connection means nothing here."""
        return {
            "hidden_fields": ["host", "schema", "login", "password", "port"],
            "relabeling": {"extra": "TIDEGATE_* settings (JSON)"},
            "placeholders": {
                "extra": '{"TIDEGATE_CONTROL_DB": "postgresql+psycopg://…", "TIDEGATE_REGIONS": "east,west"}'
            },
        }

    def __init__(self, tidegate_conn_id: str | None = default_conn_name, actor: str = "airflow") -> None:
        super().__init__()
        self.tidegate_conn_id = tidegate_conn_id
        self.actor = actor

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.tidegate_conn_id:
            try:
                conn = self.get_connection(self.tidegate_conn_id)
            except Exception:  # no such connection: the environment is the configuration
                return env
            extra = conn.extra_dejson or {}
            env.update({k: str(v) for k, v in extra.items() if k.startswith("TIDEGATE_")})
        return env

    @cached_property
    def controller(self):
        from tidegate.runtime.jobs.config import load_config
        from tidegate.runtime.jobs.controller import Controller

        return Controller(load_config(env=self.environment()), actor=self.actor)

    # -- lifecycle ---------------------------------------------------------------------
    def deploy(self, spec_path: str) -> dict[str, Any]:
        """Register the spec at ``spec_path``, which a DAG's caller chose: it must be a YAML
        file in the spec folders (``TIDEGATE_SPEC_DIRS``, default the checkout's jobs/)."""
        from tidegate.jobspec.folders import confined_spec_path

        path = confined_spec_path(spec_path, *self._spec_folders())
        result = self.controller.deploy(path)
        self.log.info(result.describe())
        return {"job": result.job, "version": result.version, "fingerprint": result.fingerprint, "new": result.new}

    def deploy_query(self, query: str, inputs: str | None = None) -> dict[str, Any]:
        """Translate the Stream Analytics query at ``query`` (with the side file ``inputs``) and
        register the spec it makes, recording the query as the version's origin; both paths, a
        DAG caller's, are confined as a spec path is (:meth:`deploy`)."""
        query_path, inputs_path = self._query_paths(query, inputs)
        result = self.controller.deploy_query(query_path, inputs_path)
        self.log.info("%s, translated from %s", result.describe(), query_path)
        return {"job": result.job, "version": result.version, "fingerprint": result.fingerprint, "new": result.new}

    def translate(self, spec: str | None, query: str | None = None, inputs: str | None = None) -> dict[str, Any]:
        """Check what a deploy of the spec, or of the query and its side file, would register,
        registering nothing: the confined paths (and the query's and side file's SHA-256), or a
        :class:`~tidegate.errors.ConfigError` — a query's naming its line and column."""
        from tidegate.jobspec.folders import confined_spec_path
        from tidegate.runtime.jobs.query_origin import check_query
        from tidegate_airflow.deploy_source import deploy_source

        source = deploy_source(spec, query, inputs)
        if source.query is None:
            return {"spec": str(confined_spec_path(source.spec, *self._spec_folders()))}
        origin = check_query(*self._query_paths(source.query, source.inputs))
        self.log.info("%s translates into a spec the spec loader accepts", origin.query_path)
        return origin.summary()

    def _spec_folders(self) -> tuple[tuple[Path, ...], Path]:
        """The spec folders and the checkout a relative path is taken from."""
        from tidegate.jobspec.folders import spec_dirs
        from tidegate_airflow.commands import REPO_JOBS

        checkout = REPO_JOBS.parent
        return spec_dirs(self.environment(), REPO_JOBS, checkout), checkout

    def _query_paths(self, query: str, inputs: str | None) -> tuple[Path, Path | None]:
        from tidegate.runtime.jobs.query_origin import confined_query_file

        folders, checkout = self._spec_folders()
        side = None if inputs is None else confined_query_file(inputs, folders, checkout, side_file=True)
        return confined_query_file(query, folders, checkout), side

    def start(
        self,
        job: str,
        region: str,
        *,
        mode: str = "auto",
        at: str | None = None,
        version: int | None = None,
        accept_partial: bool = False,
        keep_running: bool | None = None,
        context: dict | None = None,
    ) -> dict[str, Any]:
        result = self.controller.start(
            job,
            region,
            mode=mode,
            at=at or None,
            version=version,
            accept_partial=accept_partial,
            keep_running=keep_running,
            context=context,
        )
        self.log.info(result.describe())
        return start_summary(result)

    def stop(
        self, job: str, region: str, *, grace_s: float = 60.0, force: bool = False, reason: str = ""
    ) -> dict[str, Any]:
        status = self.controller.stop(job, region, grace_s=grace_s, force=force, reason=reason)
        self.log.info("job %s in %s: %s (%s)", job, region, status.state, status.detail or "")
        return status_summary(status)

    def status(self, job: str, region: str) -> dict[str, Any]:
        return status_summary(self.controller.status_of(job, region))

    def estimate(
        self, job: str, region: str, *, rehearsal: bool = True, mode: str | None = None, version: int | None = None
    ) -> dict[str, Any]:
        from tidegate.runtime.estimates.estimate import model_estimate
        from tidegate.runtime.estimates.recovery import model_basis
        from tidegate.runtime.estimates.rehearsal import rehearsal_for_restart, rehearse

        out: dict[str, Any] = {"job": job, "region": region}
        r = rehearse(self.controller, job, region, version=version) if rehearsal else None
        if r is not None:
            self.log.info(r.describe())
        plan = self._plan(job, region, mode, version) if mode else None
        m = model_estimate(
            self.controller, job, region, plan=plan, spec=self.controller.spec(job, version)[1] if version else None
        )
        self.controller.add_estimate(job, region, "model", m.seconds, m.__dict__, version=version)
        self.log.info(m.describe())
        out.update(
            model_s=m.seconds,
            model_note=m.note,
            backlog_events=m.backlog_events,
            input_rate_eps=m.input_rate_eps,
            per_partition_eps=m.per_partition_eps,
            model_basis=model_basis(m),
        )
        if r is not None:  # what the rehearsal says of the restart, from the backlog the model counted
            restart = rehearsal_for_restart(r, m.backlog_events, m.input_rate_eps)
            self.log.info(restart.describe())
            out.update(
                rehearsal_s=restart.seconds,
                rehearsal_measured_s=r.seconds,
                rehearsal_basis=restart.basis,
                first_output_s=r.first_output_s,
                rehearsal_run=r.run_id,
            )
        return out

    def _plan(self, job: str, region: str, mode: str, version: int | None):
        from tidegate.runtime.jobs import planning

        _, spec = self.controller.spec(job, version)
        return planning.plan(self.controller, job, region, mode, spec=spec, accept_partial=True)


def start_summary(result) -> dict[str, Any]:
    from tidegate.eventtime.durations import format_time_us

    plan = result.plan
    return {
        "job": result.job,
        "region": result.region,
        "version": result.version,
        "run_id": result.run_id,
        "status": result.status,
        "pid": result.pid,
        "log": str(result.log_path),
        "mode": plan.mode,
        "checkpoint": plan.checkpoint,
        "reason": plan.reason,
        "output_start": format_time_us(plan.output_start_us),
        "output_start_us": plan.output_start_us,
        "input_from": format_time_us(plan.input_from_us),
        "partial": plan.partial,
        "adopted": result.adopted,  # a retried start that took over the run in flight: why
    }


def status_summary(status) -> dict[str, Any]:
    from tidegate.eventtime.durations import format_time_us

    out = status.to_dict()
    out["last_output"] = format_time_us(status.last_output_us)
    out["job_watermark"] = format_time_us(status.job_watermark_us)
    return out
