"""A DuckDB session that reads the consumer view, lineages on S3 included, with no key written down.

:func:`connect` makes the view afresh (:mod:`tidegate.runtime.outputs.duckdb_view`: current to
the last committed batch) in a DuckDB session holding what its S3 lineages need: the ``httpfs``
extension, loaded from the ``duckdb-extension-httpfs`` package (the same release as ``duckdb``;
nothing is installed or downloaded), and a temporary secret per bucket made from the region's
settings and :func:`tidegate.storage.aws.current_credentials` — the chain every other S3 read of
Tidegate signs with. The secrets live in the session only.
"""

from __future__ import annotations

from pathlib import Path

from tidegate.jobspec.model import PRIMARY_OUTPUT
from tidegate.runtime.outputs.duckdb_view import (
    secret_name,
    secret_options,
    sql_literal,
    sql_quote,
    view_name,
    view_parts_of,
    view_sql,
)
from tidegate.runtime.outputs.reader import active_region, region_spans
from tidegate.storage.s3 import S3Settings


def connect(controller, job: str, output: str = PRIMARY_OUTPUT, *, database: str = ":memory:"):
    """A DuckDB connection holding the consumer view of ``job``'s output ``output`` (view
    ``"<job>"``, or ``"<job>.<name>"``), made now from the control database and the commit
    records — the SQL :func:`tidegate.runtime.outputs.reader.publish_view` writes, current to
    the last committed batch — with httpfs loaded and a temporary secret per S3 bucket. The
    keys are those of the moment: a session kept longer than temporary keys live connects again."""
    region = active_region(controller.db, job)
    parts = view_parts_of(region_spans(controller.db, job, region, output))
    con = open_duckdb(parts.buckets, database=database)
    con.execute(view_sql(view_name(job, output), f"job {job}, region {region}", parts))
    return con


def open_duckdb(buckets: dict[str, S3Settings], *, database: str = ":memory:"):
    """A DuckDB connection in UTC that reaches ``buckets``: httpfs loaded from its package,
    a temporary secret for each bucket from :func:`tidegate.storage.aws.current_credentials`.
    Nothing is installed, downloaded or loaded behind its back: without the ``icu`` extension
    (not in the ``duckdb`` wheel) DuckDB's time zone is UTC, the span's."""
    import duckdb

    con = duckdb.connect(database, config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    if buckets:
        con.execute(f"LOAD {sql_quote(str(httpfs_extension()))}")
        for bucket, settings in buckets.items():
            con.execute(*_create_secret(bucket, settings))
    return con


def httpfs_extension() -> Path:
    """The httpfs extension file the ``duckdb-extension-httpfs`` package holds for this DuckDB."""
    import duckdb
    import duckdb_extension_httpfs

    from tidegate.errors import ConfigError

    extensions = Path(duckdb_extension_httpfs.__file__).parent / "extensions"
    path = extensions / f"v{duckdb.__version__}" / "httpfs.duckdb_extension"
    if not path.is_file():
        raise ConfigError(
            f"no httpfs extension for DuckDB {duckdb.__version__} in {extensions}",
            "install the pinned pair: pip install -c requirements/constraints.txt duckdb duckdb-extension-httpfs",
        )
    return path


def _create_secret(bucket: str, settings: S3Settings) -> tuple[str, list[str]]:
    """The statement that creates the bucket's secret, and the keys of now as its bound
    parameters: the keys never reach the SQL text, only the session."""
    from tidegate.storage.aws import current_credentials

    keys = current_credentials(settings)
    secrets = {"KEY_ID": keys.access_key_id, "SECRET": keys.secret_access_key}
    if keys.session_token:
        secrets["SESSION_TOKEN"] = keys.session_token
    shown = ", ".join(f"{k} {sql_literal(v)}" for k, v in secret_options(bucket, settings).items())
    bound = ", ".join(f"{k} ?" for k in secrets)
    return f"CREATE OR REPLACE TEMPORARY SECRET {secret_name(bucket)} ({shown}, {bound})", list(secrets.values())
