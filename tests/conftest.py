"""Fixtures shared by every test directory: one local Spark session for the whole run."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    """A local Spark session built the way every Tidegate entry point builds it (UTC, quiet,
    the ``tidegate`` source registered); stopped when the test run ends."""
    from tidegate.spark.session import build_session

    session = build_session("tidegate-tests", master="local[2]")
    yield session
    session.stop()
