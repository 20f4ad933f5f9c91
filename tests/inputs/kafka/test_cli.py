"""``tidegate kafka start|status|stop`` for people: a broker of their own under TIDEGATE_HOME."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # starts a broker of its own


def test_start_status_stop_a_local_broker(tmp_path):
    env = dict(os.environ) | {"TIDEGATE_HOME": str(tmp_path)}
    cli = [sys.executable, "-m", "tidegate.cli", "kafka"]

    def run(*args):
        return subprocess.run([*cli, *args], env=env, capture_output=True, text=True, timeout=120)

    assert run("status").returncode == 1 and "tidegate kafka start" in run("status").stdout
    started = run("start", "--port", "0")
    assert started.returncode == 0, started.stderr
    try:
        assert "Kafka broker running: bootstrap 127.0.0.1:" in started.stdout
        assert str(tmp_path / "kafka") in started.stdout
        bootstrap = started.stdout.split("bootstrap ")[1].split(",")[0]
        made = run("create-topic", "readings", "--bootstrap", bootstrap, "--partitions", "2")
        assert made.returncode == 0 and "LogAppendTime" in made.stdout, made.stderr
        assert run("status").stdout.startswith("running: bootstrap " + bootstrap)
    finally:
        assert "stopped" in run("stop").stdout
    assert run("status").returncode == 1
