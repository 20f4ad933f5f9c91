"""The scripts the compose stack runs inside its containers, run here without Docker:
PostgreSQL's init script against a real (throwaway) server, the health checks against a
local HTTP server and a control database, and the init jobs' refusal of unset secrets."""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import shutil
import subprocess
import threading
import time

import pytest
from compose_model import AIRFLOW_INIT, HEALTHCHECK, POSTGRES_INIT

from tidegate.control.db import ControlDB
from tidegate.runtime.jobs.process import HOST, supervisor_lease


def _load_healthcheck():
    spec = importlib.util.spec_from_file_location("tidegate_compose_healthcheck", HEALTHCHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


healthcheck = _load_healthcheck()


# -- docker/postgres/init-databases.sh ------------------------------------------------------------


def _psql(server, *args: str, user: str | None = None, db: str = "postgres") -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            str(server.bin / "psql"),
            "-h",
            "127.0.0.1",
            "-p",
            str(server.port),
            "-U",
            user or server.user,
            "-d",
            db,
            "-v",
            "ON_ERROR_STOP=1",
            "-Atc",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _run_init(server, **passwords: str) -> subprocess.CompletedProcess:
    env = {
        "PATH": f"{server.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "PGHOST": "127.0.0.1",
        "PGPORT": str(server.port),
        "POSTGRES_USER": server.user,
        **passwords,
    }
    return subprocess.run(["bash", str(POSTGRES_INIT)], env=env, capture_output=True, text=True, timeout=60)


def test_postgres_init_creates_both_databases_each_with_its_own_role(postgres):
    passwords = {"AIRFLOW_DB_PASSWORD": "airflow-pw-1", "TIDEGATE_DB_PASSWORD": "tidegate-pw-1"}
    for _ in range(2):  # idempotent: a second run changes nothing and does not fail
        done = _run_init(postgres, **passwords)
        assert done.returncode == 0, done.stderr
    owners = _psql(
        postgres,
        "SELECT datname || '=' || pg_get_userbyid(datdba) FROM pg_database "
        "WHERE datname IN ('airflow', 'tidegate') ORDER BY 1",
    )
    assert owners.stdout.split() == ["airflow=airflow", "tidegate=tidegate"], owners.stderr
    # the passwords come from the environment (stored hashed), not from the script
    hashed = _psql(
        postgres,
        "SELECT rolname FROM pg_authid WHERE rolname IN ('airflow', 'tidegate') "
        "AND rolpassword LIKE 'SCRAM-SHA-256$%' ORDER BY 1",
    )
    assert hashed.stdout.split() == ["airflow", "tidegate"], hashed.stderr
    assert "airflow-pw-1" not in POSTGRES_INIT.read_text()
    # neither role reaches the other's database
    refused = _psql(postgres, "SELECT 1", user="airflow", db="tidegate")
    assert refused.returncode != 0 and "CONNECT" in refused.stderr, refused.stderr
    # Tidegate's control database: the tidegate role creates its tables
    url = f"postgresql+psycopg://tidegate@127.0.0.1:{postgres.port}/tidegate"
    db = ControlDB(url)
    try:
        assert db.acquire_lease("compose-test", "me", 5.0)
    finally:
        db.dispose()


@pytest.mark.parametrize("value", ["", "CHANGE_ME"])
def test_postgres_init_refuses_an_unset_password(postgres, value):
    done = _run_init(postgres, AIRFLOW_DB_PASSWORD="fine", TIDEGATE_DB_PASSWORD=value)
    assert done.returncode == 2 and "TIDEGATE_DB_PASSWORD" in done.stderr, done.stderr


def test_airflow_init_refuses_placeholders_before_touching_anything(tmp_path):
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "AIRFLOW_ADMIN_USERNAME": "admin",
        "AIRFLOW_ADMIN_PASSWORD": "CHANGE_ME",
        "AIRFLOW__CORE__FERNET_KEY": "x",
        "AIRFLOW__API_AUTH__JWT_SECRET": "x",
        "AIRFLOW__API__SECRET_KEY": "x",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp_path / "auth" / "passwords.json"),
    }
    done = subprocess.run(["bash", str(AIRFLOW_INIT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "AIRFLOW_ADMIN_PASSWORD" in done.stderr, done.stderr
    assert not (tmp_path / "auth").exists()


# -- docker/healthcheck.py ------------------------------------------------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    body = b"{}"

    def do_GET(self):  # noqa: N802 — the stdlib's name
        if self.path.startswith("/missing"):
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(type(self).body)

    def log_message(self, *_args):
        pass


@pytest.fixture
def http_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_http_check(http_server):
    _Handler.body = json.dumps({"status": "ALIVE", "aliveworkers": 1}).encode()
    assert healthcheck.main(["http", f"{http_server}/json/"]) == 0
    assert healthcheck.main(["http", f"{http_server}/json/", "--json", "status=ALIVE"]) == 0
    _Handler.body = json.dumps({"status": "STANDBY"}).encode()
    assert "STANDBY" in healthcheck.check_http(f"{http_server}/json/", "status=ALIVE")
    assert healthcheck.main(["http", f"{http_server}/missing"]) == 1
    _Handler.body = b"<html>"
    assert "not JSON" in healthcheck.check_http(f"{http_server}/json/", "status=ALIVE")


def test_http_check_of_a_closed_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert healthcheck.main(["http", f"http://127.0.0.1:{port}/", "--timeout", "2"]) == 1


def test_supervisor_check(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'control.db'}"
    monkeypatch.setenv("TIDEGATE_CONTROL_DB", url)
    monkeypatch.setenv("TIDEGATE_HOME", str(tmp_path))
    monkeypatch.setenv("TIDEGATE_REGIONS", "east,west")
    db = ControlDB(url)
    try:
        assert "no supervisor" in healthcheck.check_supervisor("east")
        assert db.acquire_lease(supervisor_lease("east"), f"supervisor@{HOST}:1", 30.0, host=HOST, pid=1)
        assert healthcheck.main(["supervisor", "--region", "east"]) == 0
        assert db.acquire_lease(supervisor_lease("west"), "supervisor@elsewhere:1", 30.0, host="elsewhere", pid=1)
        assert "elsewhere" in healthcheck.check_supervisor("west")
        db.release_lease(supervisor_lease("east"), f"supervisor@{HOST}:1")
        assert db.acquire_lease(supervisor_lease("east"), f"supervisor@{HOST}:1", 0.01, host=HOST, pid=1)
        time.sleep(0.05)
        assert "expired" in healthcheck.check_supervisor("east")
        assert "not configured" in healthcheck.check_supervisor("north")
    finally:
        db.dispose()


def test_supervisor_check_with_the_control_database_down(tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEGATE_CONTROL_DB", "postgresql+psycopg://nobody@127.0.0.1:1/nothing?connect_timeout=2")
    monkeypatch.setenv("TIDEGATE_HOME", str(tmp_path))
    assert healthcheck.main(["supervisor", "--region", "east"]) == 1


# -- docker/seaweedfs/run.sh (a region's S3 store) -------------------------------------------------

STORE_ENTRY = HEALTHCHECK.parent / "seaweedfs" / "run.sh"


def _store_entry(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "S3_DATA": str(tmp_path / "data"),
        "S3_CONFIG": str(tmp_path / "etc" / "s3.json"),
        "S3_READY": str(tmp_path / "ready"),
        **env,
    }
    return subprocess.run(["sh", str(STORE_ENTRY), *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("S3_ACCESS_KEY_ID", "CHANGE_ME"),
        ("S3_SECRET_ACCESS_KEY", ""),
        ("S3_SECRET_ACCESS_KEY", 'a"b'),
        ("S3_BUCKET", "Tidegate_East"),
    ],
)
def test_store_refuses_an_unset_or_unsafe_value_before_writing_anything(tmp_path, name, value):
    """The identities file is written by printf into JSON: a key that would need escaping, a
    placeholder or nothing stops the store before it writes the file or starts weed."""
    env = {
        "S3_BUCKET": "tidegate-east",
        "S3_ACCESS_KEY_ID": "east-0a1b",
        "S3_SECRET_ACCESS_KEY": "s3cr-t_X",
        name: value,
    }
    done = _store_entry(tmp_path, "serve", **env)
    assert done.returncode == 2 and name in done.stderr, done.stderr
    assert not (tmp_path / "etc").exists() and not (tmp_path / "data").exists()


def test_store_health_needs_the_bucket_made_since_this_start(tmp_path):
    done = _store_entry(tmp_path, "health", S3_PORT="9")
    assert done.returncode == 1 and "not ready" in done.stderr, done.stderr
    (tmp_path / "ready").touch()  # made, but nothing answers on the port: still unhealthy
    assert _store_entry(tmp_path, "health", S3_PORT="9").returncode != 0


def test_store_health_with_the_bucket_made_and_s3_answering(tmp_path, http_server):
    if shutil.which("wget") is None:  # both images have it (busybox's, Debian's): the check's client
        if os.environ.get("CI"):
            pytest.fail("no wget here: the store's health check runs it (apt-get install -y wget)")
        pytest.skip("no wget here")
    (tmp_path / "ready").touch()
    done = _store_entry(tmp_path, "health", S3_PORT=http_server.rsplit(":", 1)[1])
    assert done.returncode == 0, done.stderr
