"""Fixtures shared by every test directory: one local Spark session for the whole run.

The fast lane, ``pytest -m "not slow"``, leaves out every test that starts Spark or a
driver: a test marked ``spark``, or one that asks for a Spark session or a whole platform,
counts as ``slow`` too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Every Spark JVM the suite starts (the session below, drivers, check services, spark-submits)
# is short-lived and small: start it cheap. The product's default stays the JVM's own.
os.environ.setdefault("TIDEGATE_JVM_OPTIONS", "quick")
# ...and evaluates expressions without generating code: a test's batches hold a few hundred
# rows, and compiling each new projection and predicate (Janino, then C1) costs more than running
# it. Interpreted and generated evaluation give the same rows (Spark tests both). Every JVM
# pyspark launches reads it — the session below, drivers, the check service, benches under test
# — but not a spark-submit's (decision 0005).
os.environ.setdefault(
    "PYSPARK_SUBMIT_ARGS",
    "--conf spark.sql.codegen.factoryMode=NO_CODEGEN --conf spark.sql.codegen.wholeStage=false pyspark-shell",
)
# A silent Kafka topic's clock is this host's less the skew, so two reads of one topic at
# different times would get different clocks; the suite compares such reads (two readers, a
# stream and its batch path, a replay), so its topics keep the broker's own clock unless a
# test sets the skew itself (tests/inputs/kafka: test_log.py, test_kafka_idle.py).
os.environ.setdefault("TIDEGATE_KAFKA_MAX_CLOCK_SKEW", "1h")

_SLOW_FIXTURES = {"spark", "platform_factory", "airflow_home", "s3_stores"}

pytest_plugins = ["s3"]  # s3_stores: a real S3-compatible server per region (tests/s3.py)


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if item.get_closest_marker("spark") or _SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def spark():
    """A local Spark session built the way every Tidegate entry point builds it (UTC, quiet,
    the ``tidegate`` source registered); stopped when the test run ends."""
    from tidegate.spark.session import build_session

    session = build_session("tidegate-tests", master="local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server for the session (see tests/pg.py)."""
    from pg import PostgresServer

    server = PostgresServer().start()
    yield server
    server.stop()


_databases = iter(range(1, 10**6))


@pytest.fixture(params=["sqlite", "postgresql"])
def control_url(request, tmp_path):
    """A fresh control database URL, once on SQLite (the embedded default), once on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'control.db'}"
    server = request.getfixturevalue("postgres")
    return server.create_database(f"tidegate_{next(_databases)}")


@pytest.fixture
def platform_factory(tmp_path):
    """Whole platforms under tmp_path (see tests/platform_support.py); every driver and
    supervisor they started is killed when the test ends."""
    from platform_support import Platform

    made: list = []

    def make(name: str, event_log, control_url: str | None = None, env: dict[str, str] | None = None):
        root = tmp_path / name
        root.mkdir()
        p = Platform(root, event_log, control_url, env)
        made.append(p)
        return p

    yield make
    for p in made:
        p.stop_everything()


@pytest.fixture
def seen():
    """SEEN, a test-only analytic function (support.seen_function), registered for one test."""
    from support import seen_function
    from tidegate.eventtime.analytic_functions import register, unregister

    cls = register(seen_function())
    yield cls
    unregister(cls.name)


SLEEPER = "import time; time.sleep(120)"


@pytest.fixture
def sleeper():
    """A process standing for whoever holds a PID now, in a session of its own like a driver."""
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER, "--run-id", "7"], start_new_session=True)
    # Popen returns once the exec began; the kernel gives the new command line a moment later,
    # and a record without a start time is judged by its command line
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    deadline = time.monotonic() + 30
    while b"--run-id" not in cmdline.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()
