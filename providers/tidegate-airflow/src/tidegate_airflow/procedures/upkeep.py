"""Upkeep of every job's own files, as the daily ``tidegate_upkeep`` DAG runs it: compaction of
each lineage's outputs, then retention (:mod:`tidegate.runtime.outputs.upkeep` says what is kept)."""

from __future__ import annotations

from typing import Any

from tidegate_airflow.hooks.tidegate import TidegateHook


def upkeep_all(hook: TidegateHook, dry_run: bool = False) -> list[dict[str, Any]]:
    """Per registered job: batch folders merged, and what retention removed (or would)."""
    from tidegate.runtime.outputs.upkeep import broker_now_us, clean_job, compact_job

    c = hook.controller
    done = []
    for job in c.jobs():
        merged = [] if dry_run else compact_job(c, job)
        cleaned = clean_job(c, job, broker_now_us(c, job), apply=not dry_run)
        done.append(
            {
                "job": job,
                "folders_merged": sum(m.folders_merged for m in merged),
                "removed": [str(p) for p in cleaned.removed],
                "kept": cleaned.kept,
            }
        )
    return done
