"""Fixtures for the Tidegate page: a filled control database, a migrated Airflow home, and
Airflow's real API app (with the installed provider's plugin) behind FastAPI's TestClient."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from ui_airflow import AIRFLOW, airflow_environment, login
from ui_data import build_control_db

from airflow_support import environment


@pytest.fixture(scope="session")
def control(tmp_path_factory):
    """The control database of ui_data: device_fleet in east (active) and west, a lost run,
    a drill, a planned stop and a GX check with its Data Docs."""
    return build_control_db(tmp_path_factory.mktemp("tidegate"))


@pytest.fixture(scope="session")
def migrated_airflow_db(tmp_path_factory, control) -> Path:
    """An Airflow metadata database after ``airflow db migrate`` (copied by each user)."""
    home = tmp_path_factory.mktemp("airflow_template")
    env = {**os.environ, **airflow_environment(home, control.url)}
    done = subprocess.run(
        [str(AIRFLOW), "db", "migrate"], env=env, cwd=home, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"airflow db migrate failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return home / "airflow.db"


def airflow_home(tmp_path_factory, name: str, migrated: Path, control_url: str) -> tuple[Path, dict[str, str]]:
    home = tmp_path_factory.mktemp(name)
    shutil.copy(migrated, home / "airflow.db")
    return home, airflow_environment(home, control_url)


@pytest.fixture(scope="session")
def inprocess_airflow(tmp_path_factory, migrated_airflow_db, control) -> tuple[Path, dict[str, str]]:
    """The home and settings of the Airflow that ``airflow_app`` runs (to load DAGs into it)."""
    return airflow_home(tmp_path_factory, "airflow_inprocess", migrated_airflow_db, control.url)


@pytest.fixture(scope="session")
def airflow_app(inprocess_airflow):
    """Airflow's real API app in this process, its plugins loaded from their entry points.

    Airflow reads most settings when first imported; if another test imported it earlier,
    the settings it cached (database, plugins folder) are re-read from the environment.
    Its settings are in the environment only while the app is built and while a test that
    uses it runs (``_airflow_settings``): left there for the session, they named this
    database to every later test in the worker."""
    home, env = inprocess_airflow
    with environment(env):
        from airflow import plugins_manager, settings
        from airflow.api_fastapi import app as api_app

        settings.configure_vars()
        settings.prepare_syspath_for_config_and_plugins()
        settings.dispose_orm()
        settings.configure_orm()
        _clear_plugin_caches(plugins_manager)
        api_app.purge_cached_app()
        app = api_app.create_app(apps="core")
    try:
        yield app
    finally:
        try:
            _clear_plugin_caches(plugins_manager)
            settings.dispose_orm()
            settings.configure_vars()
            settings.configure_orm()
        except Exception:  # noqa: BLE001 — best effort: later tests configure Airflow themselves
            pass


@pytest.fixture(autouse=True)
def _airflow_settings(request, monkeypatch):
    """The in-process Airflow's settings while a test that uses its app runs."""
    if "airflow_app" in request.fixturenames:
        _, env = request.getfixturevalue("inprocess_airflow")
        for key, value in env.items():
            monkeypatch.setenv(key, value)


def _clear_plugin_caches(plugins_manager) -> None:
    for name in ("_get_plugins", "_get_ui_plugins", "get_fastapi_plugins", "get_flask_plugins"):
        cached = getattr(plugins_manager, name, None)
        if cached is not None and hasattr(cached, "cache_clear"):
            cached.cache_clear()


@pytest.fixture(scope="session")
def client(airflow_app, inprocess_airflow):
    from fastapi.testclient import TestClient

    _, env = inprocess_airflow
    c = TestClient(airflow_app, base_url="http://localhost")
    with environment(env):
        c.__enter__()
    try:
        yield c
    finally:
        with environment(env):
            c.__exit__(None, None, None)


@pytest.fixture(scope="session")
def token(client, inprocess_airflow) -> str:
    """A JWT for the admin user, obtained as Airflow issues them (POST /auth/token)."""
    with environment(inprocess_airflow[1]):
        return login(client, "admin")


@pytest.fixture
def auth(token) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
