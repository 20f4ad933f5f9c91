"""The control database opened read-only, for the Tidegate page: SQLite ``mode=ro`` (never
created), PostgreSQL in read-only transactions. One engine per URL for the process."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool


class ControlDBUnavailable(Exception):
    """The control database named by the platform config cannot be read."""


class ControlDBNotCreated(ControlDBUnavailable):
    """The control database is not there yet (no file, or no Tidegate tables): nothing was deployed."""


_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def read_only_engine(url: str) -> Engine:
    """One engine per URL for the process; SQLite opened ``mode=ro`` (never created)."""
    with _engines_lock:
        engine = _engines.get(url)
        if engine is None:
            engine = _engines[url] = _make_engine(url)
        return engine


def _make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""
        if not path or path == ":memory:":
            raise ControlDBUnavailable(f"the control database {url} is not a file the page can read")
        path = path.split("?", 1)[0]

        def connect() -> sqlite3.Connection:
            if not Path(path).is_file():
                raise ControlDBNotCreated(f"the control database {path} does not exist yet")
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout=30000")
            return conn

        # a connection per use: SQLAlchemy's default pool for a creator-made SQLite engine
        # (SingletonThreadPool) closes connections across threads, which crashes under the
        # API server's concurrent requests
        return create_engine(f"sqlite:///{path}", creator=connect, poolclass=NullPool)
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    if url.startswith("postgresql"):
        return create_engine(url, pool_pre_ping=True, connect_args={"options": "-c default_transaction_read_only=on"})
    return create_engine(url, pool_pre_ping=True)
