"""Where a job version came from, when it was translated from a Stream Analytics query: the
query's name, path and SHA-256 (and, asked for, its text) and the side file's path and SHA-256 —
never the side file's text, which may name connections. A version deployed from a spec has no
origin, and neither has any version of a database written before origins were kept (it lacks
the column until a Tidegate that keeps them opens it).
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from sqlalchemy import inspect, select

from tidegate.control import schema as S
from tidegate_airflow.ui.reads import ControlReader, _loads

SHOWN = ("query_path", "query_sha256", "inputs_path", "inputs_sha256")  # never the side file's text


def _kept(db: ControlReader) -> bool:
    """Whether the database keeps origins (``job_versions.origin``, schema 4)."""
    with db.engine.connect() as c:
        return "origin" in {column["name"] for column in inspect(c).get_columns(S.job_versions.name)}


def _shown(recorded: Any) -> dict[str, Any] | None:
    if not isinstance(recorded, dict) or not recorded.get("query_path"):
        return None
    shown = {key: recorded.get(key) for key in SHOWN}
    return {"query": PurePath(str(recorded["query_path"])).name, **shown}


def with_origins(db: ControlReader, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each of the overview's ``jobs`` with ``origin``: its latest version's query, or None."""
    origins: dict[tuple[str, int | None], Any] = {}
    if jobs and _kept(db):
        t = S.job_versions
        rows = db._rows(select(t.c.job, t.c.version, t.c.origin).where(t.c.origin.is_not(None)))
        origins = {(r.job, r.version): _loads(r.origin) for r in rows}
    for job in jobs:
        job["origin"] = _shown(origins.get((job["job"], job.get("latest_version"))))
    return jobs


def query_of(db: ControlReader, job: str, version: int) -> dict[str, Any] | None:
    """The query version ``version`` of ``job`` was translated from, with its text; None when
    that version is not registered or came from a spec."""
    if not _kept(db):
        return None
    t = S.job_versions
    rows = db._rows(select(t.c.origin).where(t.c.job == job, t.c.version == version))
    recorded = _loads(rows[0].origin) if rows else None
    shown = _shown(recorded)
    if shown is None or not isinstance(recorded, dict):
        return None
    return {"job": job, "version": version, **shown, "text": recorded.get("query_text")}
