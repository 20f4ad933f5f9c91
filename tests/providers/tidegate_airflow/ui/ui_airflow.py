"""Running Airflow for the page's tests: its settings, logging in, and a real API server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]  # tests/providers/tidegate_airflow/ui/ → the checkout
AIRFLOW = Path(sys.executable).with_name("airflow")
PASSWORDS = {"admin": "admin-pw", "viewer": "viewer-pw", "op": "op-pw"}
JWT_SECRET = "tidegate-ui-tests-jwt-secret-" + "0123456789abcdef" * 4  # ≥ 64 bytes for HS512


def airflow_environment(home: Path, control_url: str) -> dict[str, str]:
    """Settings for an Airflow with the installed provider's plugin (and an empty plugins folder)
    whose users log in with the passwords above (SimpleAuthManager, the default auth manager)."""
    (home / "dags").mkdir(parents=True, exist_ok=True)
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps(PASSWORDS))
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer,op:op",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__API_AUTH__JWT_SECRET": JWT_SECRET,
        "AIRFLOW__API__EXPOSE_CONFIG": "False",
        "TIDEGATE_CONTROL_DB": control_url,
        "TIDEGATE_REGIONS": "east,west",
    }


def load_dags(home: Path, env: dict[str, str], sources: dict[str, str]) -> None:
    """Write DAG files (name → source) into the Airflow's DAG folder and have Airflow parse
    them into its database (``airflow dags reserialize``), as its DAG processor would."""
    import os
    import subprocess

    for name, source in sources.items():
        (home / "dags" / name).write_text(source)
    done = subprocess.run(
        [str(AIRFLOW), "dags", "reserialize"],
        env={**os.environ, **env},
        cwd=home,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def login(client, user: str) -> str:
    """A JWT the way Airflow issues them to a SimpleAuthManager user (POST /auth/token)."""
    res = client.post("/auth/token", json={"username": user, "password": PASSWORDS[user]})
    assert res.status_code in (200, 201), res.text
    return res.json()["access_token"]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ApiServer:
    """``airflow api-server`` on a free loopback port, in its own session so that it and
    anything it starts are stopped together, by its process group id, at the end."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home = home
        self.env = env
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = home / "api-server.log"
        self.proc = None

    def start(self, timeout_s: float = 300) -> ApiServer:
        import os
        import subprocess
        import time
        import urllib.request

        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [str(AIRFLOW), "api-server", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"],
            cwd=self.home,
            env={**os.environ, **self.env},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"airflow api-server exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=5) as res:
                    if res.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"airflow api-server not healthy after {timeout_s:.0f} s:\n{self.log_tail()}")
            time.sleep(1)

    def stop(self) -> None:
        import os
        import signal
        import subprocess

        if self.proc is None or self.proc.poll() is not None:
            return
        pgid = self.proc.pid  # start_new_session: the server leads its own process group
        try:
            os.killpg(pgid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        except ProcessLookupError:
            pass

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"
