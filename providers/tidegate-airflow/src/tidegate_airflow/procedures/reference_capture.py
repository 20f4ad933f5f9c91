"""Reference tables refreshed on a schedule, as the ``tidegate_reference_capture`` DAG runs it:
each configured database table captured as a snapshot (:mod:`tidegate.inputs.reference_capture`,
the same capture as ``tidegate reference capture``).

A scheduled run captures every entry of ``reference_captures`` in ``$TIDEGATE_CONFIG``. A run
triggered by hand may name one capture instead — connection, table and folder — which are
untrusted: the connection must be configured, the table a plain name and the folder inside the
reference folders (``TIDEGATE_REFERENCE_DIRS``; an ``s3a://`` folder under an S3 prefix among
them), as a job spec's ``reference.path`` must be.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from tidegate_airflow.hooks.tidegate import TidegateHook


def captures_to_run(env: dict[str, str], connection: str, table: str, folder: str,
                    base: Path) -> list[dict[str, Any]]:  # fmt: skip
    """The configured captures (none of the three given), or the one the three name, checked."""
    from tidegate.errors import ConfigError
    from tidegate.inputs.reference_capture import check_table_name
    from tidegate.jobspec.folders import REFERENCE_DIRS_ENV, confined_s3_reference, reference_dirs
    from tidegate.jobspec.reference_prefix import S3_REFERENCE
    from tidegate.runtime.jobs.config import load_config

    config = load_config(env=env, cwd=base)
    given = [v.strip() for v in (connection, table, folder)]
    if not any(given):
        if not config.reference_captures:
            raise ConfigError(
                "no reference_captures are configured: nothing to capture",
                "list them in $TIDEGATE_CONFIG, e.g. reference_captures: "
                "[{connection: inventory, table: devices, to: var/reference/devices}]",
            )
        return [dict(c) for c in config.reference_captures]
    if not all(given):
        raise ConfigError(
            "give connection, table and folder together, or none (every configured capture)",
            "name the one capture to run",
        )
    connection, table, folder = given
    if connection not in (config.reference_connections or {}):
        known = ", ".join(sorted(config.reference_connections or {})) or "none"
        raise ConfigError(
            f"reference connection {connection!r} is not configured (configured: {known})",
            "add it under reference_connections in $TIDEGATE_CONFIG",
        )
    check_table_name(table)
    dirs = reference_dirs(env, base)
    if folder.lower().startswith(S3_REFERENCE):  # under an S3 prefix among the reference folders
        return [{"connection": connection, "table": table, "to": confined_s3_reference(folder, dirs)}]
    to = Path(folder) if Path(folder).is_absolute() else base / folder
    real = to.resolve()  # symlinks followed, the folder itself may not exist yet
    if ".." in Path(folder).parts or not any(isinstance(d, Path) and real.is_relative_to(d.resolve()) for d in dirs):
        raise ConfigError(
            f"folder {folder} is outside the reference folders",
            f"publish under {' or '.join(str(d) for d in dirs)}, or add the folder to {REFERENCE_DIRS_ENV}",
        )
    return [{"connection": connection, "table": table, "to": to}]


def capture(
    hook: TidegateHook,
    connection: str = "",
    table: str = "",
    folder: str = "",
    now_us: Callable[[], int] = lambda: time.time_ns() // 1000,
) -> list[dict[str, Any]]:
    """Capture each table: per capture, the snapshot it published (None: unchanged). Every
    capture is tried; the task fails after them, naming each that could not be taken."""
    from tidegate.errors import TidegateError
    from tidegate.inputs.reference_capture import connection_url, publish_snapshot, read_table
    from tidegate.runtime.jobs.config import load_config
    from tidegate.storage.uri import StorageRoot

    env = hook.environment()
    base = Path.cwd()  # relative folders are the worker's working directory's, as the platform's settings
    try:
        captures = captures_to_run(env, connection, table, folder, base)
        connections = load_config(env=env, cwd=base).reference_connections or {}
    except TidegateError as exc:
        raise AirflowFailException(str(exc)) from None
    done, failed = [], []
    for c in captures:
        try:
            rows = read_table(connection_url(c["connection"], connections, env), c["table"])
            to = c["to"] if isinstance(c["to"], StorageRoot) else Path(c["to"])
            published = publish_snapshot(rows, to, now_us())
        except TidegateError as exc:
            failed.append(f"{c['table']} → {c['to']}: {exc}")
            continue
        print(
            f"{c['table']}: "
            + (
                f"{rows.num_rows} rows published as {published}"
                if published is not None
                else f"unchanged since the newest snapshot in {c['to']}; nothing published"
            )
        )
        done.append(
            {
                "connection": c["connection"],
                "table": c["table"],
                "to": str(c["to"]),
                "published": None if published is None else str(published).rsplit("/", 1)[-1],
                "rows": rows.num_rows,
            }
        )
    if failed:
        raise AirflowFailException("reference capture failed for " + "; ".join(failed))
    return done
