"""A database table captured as a reference snapshot: ``tidegate reference capture``.

A table that changes in place cannot be replayed; a snapshot can. Each capture reads the whole
table through an operator-configured connection and publishes it as the folder
``valid_from=<capture time>/table.parquet`` beside the earlier snapshots
(:mod:`tidegate.inputs.reference`) — written under a hidden name and renamed into place whole;
in an S3 folder (``s3a://bucket/prefix``), its file first and its ``_published`` marker last
(:mod:`tidegate.inputs.reference_s3`).
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
    reference_captures:                               # what the tidegate_reference_capture DAG captures
      - {connection: inventory, table: devices, to: var/reference/devices}
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidegate.errors import ConfigError
from tidegate.eventtime.reference import SNAPSHOT_PREFIX, snapshot_folder_name, snapshot_time_us
from tidegate.jobspec.reference_prefix import S3_REFERENCE, s3_reference_root
from tidegate.storage.uri import StorageRoot

if TYPE_CHECKING:  # pyarrow is imported by the capture itself: the platform's settings read this module
    import pyarrow as pa

_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
CAPTURED_FILE = "table.parquet"


def reference_connections(file_settings: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """``reference_connections`` of the config file, checked: each names ``url_env`` or ``url_file``."""
    given = file_settings.get("reference_connections") or {}
    if not isinstance(given, Mapping):
        raise ConfigError(
            "config reference_connections: expected a mapping of connection name to settings",
            "e.g. reference_connections: {inventory: {url_env: INVENTORY_DB_URL}}",
        )
    out = {}
    for name, settings in given.items():
        where = f"config reference_connections.{name}"
        if not isinstance(settings, Mapping) or set(settings) - {"url_env", "url_file"} or len(settings) != 1:
            raise ConfigError(
                f"{where}: give exactly one of url_env or url_file",
                "the URL may hold a password: name the environment variable or file it is read from",
            )
        out[str(name)] = {str(k): str(v) for k, v in settings.items()}
    return out


def reference_captures(file_settings: Mapping[str, Any], base: Path) -> tuple[dict[str, Any], ...]:
    """``reference_captures`` of the config file, checked: each a configured connection, a plain
    table name and the folder (relative ones against ``base``) its snapshots are published in."""
    given = file_settings.get("reference_captures") or []
    connections = reference_connections(file_settings)
    example = "e.g. reference_captures: [{connection: inventory, table: devices, to: var/reference/devices}]"
    if not isinstance(given, list):
        raise ConfigError("config reference_captures: expected a list of captures", example)
    out = []
    for i, capture in enumerate(given):
        where = f"config reference_captures[{i}]"
        if not isinstance(capture, Mapping) or set(capture) != {"connection", "table", "to"}:
            raise ConfigError(f"{where}: give connection, table and to, and nothing else", example)
        if str(capture["connection"]) not in connections:
            raise ConfigError(
                f"{where}: connection {capture['connection']!r} is not under reference_connections",
                "configure it there first",
            )
        check_table_name(str(capture["table"]))
        out.append(
            {
                "connection": str(capture["connection"]),
                "table": str(capture["table"]),
                "to": capture_folder(str(capture["to"]), base, f"{where}.to"),
            }
        )
    return tuple(out)


def capture_folder(given: str, base: Path, where: str = "--to") -> Path | StorageRoot:
    """The folder snapshots are published in: a local one (relative to ``base``) or an S3 prefix."""
    if given.strip().lower().startswith(S3_REFERENCE):
        return s3_reference_root(given, where)
    return base / given


def check_table_name(table: str) -> str:
    if not _TABLE.fullmatch(table):
        raise ConfigError(f"table {table!r} is not a plain table name", "give name or schema.name")
    return table


def connection_url(name: str, connections: Mapping[str, Mapping[str, str]], env: Mapping[str, str]) -> str:
    """The URL of connection ``name``, read now from where the operator keeps it."""
    settings = connections.get(name)
    if settings is None:
        known = ", ".join(sorted(connections)) or "none"
        raise ConfigError(
            f"reference connection {name!r} is not configured (configured: {known})",
            "add it under reference_connections in $TIDEGATE_CONFIG",
        )
    if "url_env" in settings:
        url = env.get(settings["url_env"])
        if not url:
            raise ConfigError(
                f"reference connection {name}: {settings['url_env']} is not set",
                "set it to the database's SQLAlchemy URL",
            )
        return url
    try:
        return Path(settings["url_file"]).read_text().strip()
    except OSError as exc:
        raise ConfigError(
            f"reference connection {name}: cannot read {settings['url_file']} ({exc.strerror})",
            "point url_file at a readable file holding the URL",
        ) from None


def read_table(url: str, table: str) -> pa.Table:
    """Every row of ``table`` (``name`` or ``schema.name``), columns as the database gives them."""
    import pyarrow as pa
    import sqlalchemy as sa

    schema, _, name = check_table_name(table).rpartition(".")
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            try:
                reflected = sa.Table(name, sa.MetaData(), schema=schema or None, autoload_with=conn)
            except sa.exc.NoSuchTableError:
                raise ConfigError(
                    f"table {table} does not exist in the reference connection's database",
                    "check the table's name (and schema)",
                ) from None
            result = conn.execute(sa.select(reflected))
            columns = list(result.keys())
            rows = result.fetchall()
    finally:
        engine.dispose()
    return pa.table({c: [r[i] for r in rows] for i, c in enumerate(columns)})


def publish_snapshot(rows: pa.Table, folder: Path | StorageRoot, now_us: int) -> Path | StorageRoot | None:
    """``rows`` as snapshot ``valid_from=<now, whole seconds>`` of ``folder`` (on S3: published
    by its marker, :mod:`tidegate.inputs.reference_s3`); None when they equal the newest
    snapshot's (nothing changed). Refused when they changed and a snapshot is not older than now."""
    import pyarrow.parquet as pq

    at = now_us - now_us % 1_000_000
    if isinstance(folder, StorageRoot):
        from tidegate.inputs.reference_s3 import publish_s3_snapshot

        return publish_s3_snapshot(rows, folder, at, CAPTURED_FILE)
    folder.mkdir(parents=True, exist_ok=True)
    snapshots = sorted((t, p) for p in folder.iterdir() if p.is_dir()
                       for t in [snapshot_time_us(p.name)] if t is not None)  # fmt: skip
    if snapshots:  # unchanged: nothing to publish, however soon after the last capture
        newest = snapshots[-1][1] / CAPTURED_FILE
        if newest.exists() and pq.read_table(newest).equals(rows):
            return None
    if snapshots and snapshots[-1][0] >= at:
        raise ConfigError(
            f"{folder}: the newest snapshot, {snapshots[-1][1].name}, is not older than the capture "
            f"time {snapshot_folder_name(at)[len(SNAPSHOT_PREFIX) :]}",
            "snapshots only move forward in time: check the clock, or remove the future snapshot",
        )
    hidden = folder / f".{snapshot_folder_name(at)}"
    shutil.rmtree(hidden, ignore_errors=True)  # a capture that died half way
    hidden.mkdir()
    pq.write_table(rows, hidden / CAPTURED_FILE)
    target = folder / snapshot_folder_name(at)
    os.rename(hidden, target)
    return target
