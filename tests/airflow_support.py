"""Running the real DAGs with ``airflow dags test`` against a whole Tidegate platform."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@contextmanager
def environment(env: dict[str, str]):
    """``env`` in ``os.environ`` for the block, the earlier values back after it (Airflow reads
    its settings from the environment of the process it runs in)."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def airflow_env(home: Path) -> dict[str, str]:
    """Airflow on SQLite under ``home`` with the repository's DAGs (the provider is installed:
    its entry points bring the rest), and one Spark connection per region (local masters)."""
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "AIRFLOW_CONN_TIDEGATE_SPARK_EAST": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "AIRFLOW_CONN_TIDEGATE_SPARK_WEST": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "TIDEGATE_JOBS_DIR": str(REPO / "jobs"),
    }


def migrate(home: Path) -> None:
    """A freshly migrated Airflow metadata database in ``home``: a copy of one migrated once
    per Airflow version and machine (the schema does not depend on the home), so that each
    test module and bench does not spend its own ``airflow db migrate``."""
    home.mkdir(parents=True, exist_ok=True)
    template = Path(tempfile.gettempdir()) / f"tidegate-airflow-db-{airflow_version()}"
    template.mkdir(exist_ok=True)
    with (template / "lock").open("w") as lock:  # xdist workers migrate it once between them
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (template / "airflow.db").exists():
            scratch = Path(tempfile.mkdtemp(dir=template))
            done = subprocess.run(
                [str(BIN / "airflow"), "db", "migrate"],
                env=os.environ | airflow_env(scratch),
                capture_output=True,
                text=True,
                timeout=600,
            )
            if done.returncode:
                raise RuntimeError(f"airflow db migrate failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
            (scratch / "airflow.db").rename(template / "airflow.db")
            shutil.rmtree(scratch, ignore_errors=True)
    shutil.copyfile(template / "airflow.db", home / "airflow.db")


def airflow_version() -> str:
    from importlib.metadata import version

    return version("apache-airflow")


def dags_test(
    home: Path, dag_id: str, conf: dict, platform_env: dict[str, str], cwd: Path, timeout_s: float = 1500
) -> subprocess.CompletedProcess:
    """``airflow dags test DAG -c CONF``; exit 0 when the DAG run succeeded."""
    env = os.environ | platform_env | airflow_env(home)
    done = subprocess.run(
        [str(BIN / "airflow"), "dags", "test", dag_id, "-c", json.dumps(conf)],
        env=env,
        cwd=str(cwd),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    logs = home / "dags-test"  # the whole output of every run, for when a tail is not enough
    logs.mkdir(parents=True, exist_ok=True)
    name = f"{time.strftime('%H%M%S')}-{time.monotonic_ns() % 10**6:06d}-{dag_id}-{done.returncode}.log"  # runs at once
    (logs / name).write_text(done.stdout + "\n" + done.stderr)
    hidden = failed_tasks(done) if done.returncode == 0 else []
    # a run Airflow calls successful while one of its tasks ended failed hides a fault from operators
    assert not hidden, f"{dag_id} succeeded with failed tasks {hidden}:\n{tail(done)}"
    return done


def failed_tasks(done: subprocess.CompletedProcess) -> list[str]:
    """The tasks of a ``dags test`` run whose last state was ``failed``."""
    task, last = None, {}
    for line in (done.stdout + "\n" + done.stderr).splitlines():
        if started := re.search(r"\[DAG TEST\] starting task_id=(\S+)", line):
            task = started.group(1)
        elif task and (state := re.search(r"Task instance state updated .* new_state=(\w+)", line)):
            last[task] = state.group(1)
    return sorted(name for name, state in last.items() if state == "failed")


def tail(done: subprocess.CompletedProcess, chars: int = 6000) -> str:
    return (done.stdout + "\n" + done.stderr)[-chars:]
