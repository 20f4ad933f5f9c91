"""A database table captured as a reference snapshot: ``tidegate reference capture``.

A table that changes in place cannot be replayed; a snapshot can. Each capture reads the whole
table through an operator-configured connection and publishes it as the folder
``valid_from=<capture time>/table.parquet`` beside the earlier snapshots
(:mod:`tidegate.inputs.reference`) — written under a hidden name and renamed into place whole.
From there on the job treats it like any file snapshot: an event joins the snapshot valid at
its own time, and the lineage records the snapshot's files. Run on a schedule (cron, an
Airflow task), captures are the table's refreshes; a capture equal to the newest snapshot
publishes nothing, so a frequent schedule does not pile up copies.

The capture time comes from the clock passed in; it must be later than the newest snapshot,
so time only moves forward. Connections are the operator's, never a spec's: a name in
``reference_connections`` of ``$TIDEGATE_CONFIG`` and where its SQLAlchemy URL (which may
hold a password) is read — an environment variable or a file::

    reference_connections:
      inventory: {url_env: INVENTORY_DB_URL}          # or url_file: /run/secrets/inventory-url
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from tidegate.errors import ConfigError
from tidegate.eventtime.reference import SNAPSHOT_PREFIX, snapshot_folder_name, snapshot_time_us

if TYPE_CHECKING:  # pyarrow is imported by the capture itself: the platform's settings read this module
    import pyarrow as pa

_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
CAPTURED_FILE = "table.parquet"


def reference_connections(file_settings: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """``reference_connections`` of the config file, checked: each names ``url_env`` or ``url_file``."""
    given = file_settings.get("reference_connections") or {}
    if not isinstance(given, Mapping):
        raise ConfigError("config reference_connections: expected a mapping of connection name to settings",
                          "e.g. reference_connections: {inventory: {url_env: INVENTORY_DB_URL}}")
    out = {}
    for name, settings in given.items():
        where = f"config reference_connections.{name}"
        if not isinstance(settings, Mapping) or set(settings) - {"url_env", "url_file"} or len(settings) != 1:
            raise ConfigError(f"{where}: give exactly one of url_env or url_file",
                              "the URL may hold a password: name the environment variable or file it is read from")
        out[str(name)] = {str(k): str(v) for k, v in settings.items()}
    return out


def connection_url(name: str, connections: Mapping[str, Mapping[str, str]], env: Mapping[str, str]) -> str:
    """The URL of connection ``name``, read now from where the operator keeps it."""
    settings = connections.get(name)
    if settings is None:
        known = ", ".join(sorted(connections)) or "none"
        raise ConfigError(f"reference connection {name!r} is not configured (configured: {known})",
                          "add it under reference_connections in $TIDEGATE_CONFIG")
    if "url_env" in settings:
        url = env.get(settings["url_env"])
        if not url:
            raise ConfigError(f"reference connection {name}: {settings['url_env']} is not set",
                              "set it to the database's SQLAlchemy URL")
        return url
    try:
        return Path(settings["url_file"]).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"reference connection {name}: cannot read {settings['url_file']} ({exc.strerror})",
                          "point url_file at a readable file holding the URL") from None


def read_table(url: str, table: str) -> pa.Table:
    """Every row of ``table`` (``name`` or ``schema.name``), columns as the database gives them."""
    import pyarrow as pa
    import sqlalchemy as sa

    if not _TABLE.fullmatch(table):
        raise ConfigError(f"table {table!r} is not a plain table name", "give name or schema.name")
    schema, _, name = table.rpartition(".")
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            try:
                reflected = sa.Table(name, sa.MetaData(), schema=schema or None, autoload_with=conn)
            except sa.exc.NoSuchTableError:
                raise ConfigError(f"table {table} does not exist in the reference connection's database",
                                  "check the table's name (and schema)") from None
            result = conn.execute(sa.select(reflected))
            columns = list(result.keys())
            rows = result.fetchall()
    finally:
        engine.dispose()
    return pa.table({c: [r[i] for r in rows] for i, c in enumerate(columns)})


def publish_snapshot(rows: pa.Table, folder: Path, now_us: int) -> Path | None:
    """``rows`` as snapshot ``valid_from=<now, whole seconds>`` of ``folder``; None when they
    equal the newest snapshot's (nothing changed). Refused when a snapshot is not older."""
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    at = now_us - now_us % 1_000_000
    snapshots = sorted((t, p) for p in folder.iterdir() if p.is_dir()
                       for t in [snapshot_time_us(p.name)] if t is not None)  # fmt: skip
    if snapshots and snapshots[-1][0] >= at:
        raise ConfigError(f"{folder}: the newest snapshot, {snapshots[-1][1].name}, is not older than the capture "
                          f"time {snapshot_folder_name(at)[len(SNAPSHOT_PREFIX):]}",
                          "snapshots only move forward in time: check the clock, or remove the future snapshot")
    if snapshots:
        newest = snapshots[-1][1] / CAPTURED_FILE
        if newest.exists() and pq.read_table(newest).equals(rows):
            return None
    hidden = folder / f".{snapshot_folder_name(at)}"
    shutil.rmtree(hidden, ignore_errors=True)  # a capture that died half way
    hidden.mkdir()
    pq.write_table(rows, hidden / CAPTURED_FILE)
    target = folder / snapshot_folder_name(at)
    os.rename(hidden, target)
    return target
