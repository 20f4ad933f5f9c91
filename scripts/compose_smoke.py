"""The compose stack's smoke steps, through the stack's own Airflow REST API (scripts/compose.sh
smoke runs them in order; the standard library only, so the host needs nothing but python3).

    compose_smoke.py env FILE VERSION   the env file: throwaway secrets, free host ports, small Spark
    compose_smoke.py deploy     tidegate_deploy: the demo job into east and west, until both caught up
    compose_smoke.py drill      tidegate_drill: a node failure (kill -9) of the standby, recovered, checked
    compose_smoke.py failover   tidegate_failover: consumers to the partner; GX passed on the consumer view
    compose_smoke.py idle       until no run of those DAGs is queued or running (the drill's scheduled one)

AIRFLOW_URL, AIRFLOW_USERNAME and AIRFLOW_PASSWORD name the api-server and the admin user
(Airflow 3's Simple auth manager: POST /auth/token gives the JWT every call carries).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

URL = os.environ.get("AIRFLOW_URL", "http://127.0.0.1:8080").rstrip("/")
_token: str | None = None
RETRY_S = 180  # how long a read waits for the api-server's database to answer again


def log(message: str) -> None:
    print(f"smoke: {message}", file=sys.stderr, flush=True)


def call(method: str, path: str, body: dict | None = None, *, auth: bool = True, raw: bool = False):
    global _token
    if auth and _token is None:
        _token = call(
            "POST",
            "/auth/token",
            {"username": os.environ["AIRFLOW_USERNAME"], "password": os.environ["AIRFLOW_PASSWORD"]},
            auth=False,
        )["access_token"]
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if auth:
        headers["Authorization"] = f"Bearer {_token}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(URL + path, data=data, method=method, headers=headers)
    # a read, or the token, is retried while the api-server cannot reach its database (a
    # promotion under way answers 500 for up to Patroni's ttl); a write is never repeated
    retry = method == "GET" or path == "/auth/token"
    deadline = time.monotonic() + RETRY_S
    while True:
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                text = response.read().decode()
            break
        except (urllib.error.HTTPError, urllib.error.URLError, ConnectionError) as exc:
            server_side = not isinstance(exc, urllib.error.HTTPError) or exc.code >= 500
            if not (retry and server_side) or time.monotonic() > deadline:
                raise
            log(f"{method} {path}: {exc}; again in 5 s")
            time.sleep(5)
    if raw:
        return text
    return json.loads(text) if text else None


def wait_for_dag(dag_id: str, timeout_s: float = 300) -> None:
    """Until the dag-processor has parsed the DAG and it is unpaused."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            dag = call("GET", f"/api/v2/dags/{dag_id}")
            if dag.get("has_import_errors"):
                errors = call("GET", "/api/v2/importErrors")
                raise SystemExit(f"smoke: {dag_id} has import errors: {json.dumps(errors)[:4000]}")
            if dag.get("is_paused"):
                call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
            return
        except urllib.error.HTTPError as exc:
            if exc.code != 404 or time.monotonic() > deadline:
                raise
        time.sleep(5)


def run_dag(dag_id: str, conf: dict, timeout_s: float) -> str:
    """Trigger a run, wait for its end; a failed run prints its failed tasks' logs and stops."""
    wait_for_dag(dag_id)
    run = call("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf})
    run_id = run["dag_run_id"]
    log(f"{dag_id}: run {run_id} with {json.dumps(conf)}")
    quoted = urllib.parse.quote(run_id, safe="")
    deadline = time.monotonic() + timeout_s
    seen: dict[str, str] = {}
    while True:
        state = call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{quoted}")["state"]
        for ti in tasks(dag_id, run_id):
            if ti["state"] and seen.get(ti["task_id"]) != ti["state"]:
                seen[ti["task_id"]] = ti["state"]
                log(f"{dag_id}: {ti['task_id']} {ti['state']}")
        if state in ("success", "failed"):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"smoke: {dag_id} run {run_id} still {state} after {timeout_s:.0f} s")
        time.sleep(10)
    if state != "success":
        for ti in tasks(dag_id, run_id):
            if ti["state"] in ("failed", "upstream_failed"):
                print_log(dag_id, run_id, ti)
        raise SystemExit(f"smoke: {dag_id} run {run_id} failed")
    return run_id


def wait_idle(dag_ids: tuple[str, ...], timeout_s: float) -> None:
    """Until no run of ``dag_ids`` is queued or running: unpausing the drill DAG for its manual
    run also starts its scheduled one, whose procedure must not be in flight when a region is
    lost (a failover that finds a drill running joins it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        active = [
            f"{dag_id} {run['dag_run_id']}"
            for dag_id in dag_ids
            for run in call("GET", f"/api/v2/dags/{dag_id}/dagRuns?state=queued&state=running")["dag_runs"]
        ]
        if not active:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"smoke: still in flight after {timeout_s:.0f} s: {active}")
        log(f"waiting for {', '.join(active)}")
        time.sleep(30)


def tasks(dag_id: str, run_id: str) -> list[dict]:
    quoted = urllib.parse.quote(run_id, safe="")
    return call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{quoted}/taskInstances")["task_instances"]


def print_log(dag_id: str, run_id: str, ti: dict) -> None:
    quoted = urllib.parse.quote(run_id, safe="")
    try:
        content = call(
            "GET",
            f"/api/v2/dags/{dag_id}/dagRuns/{quoted}/taskInstances/{ti['task_id']}/logs/"
            f"{max(ti.get('try_number') or 1, 1)}?full_content=true",
        )
        lines = [e.get("event", "") if isinstance(e, dict) else str(e) for e in content.get("content", [])]
    except Exception as exc:  # the log is a diagnosis only
        lines = [f"(no log: {exc})"]
    log(f"{dag_id}: {ti['task_id']} {ti['state']}, its log's end:\n" + "\n".join(lines[-60:]))


def xcom(dag_id: str, run_id: str, task_id: str):
    quoted = urllib.parse.quote(run_id, safe="")
    entry = call(
        "GET",
        f"/api/v2/dags/{dag_id}/dagRuns/{quoted}/taskInstances/{task_id}/xcomEntries/return_value?deserialize=true",
    )
    value = entry.get("value")
    return json.loads(value) if isinstance(value, str) and value[:1] in "[{" else value


def check_passed(dag_id: str, run_id: str, task_id: str, target: str) -> None:
    outcomes = xcom(dag_id, run_id, task_id)
    mine = [o for o in outcomes if o.get("target") == target] if target else outcomes
    if not mine or not all(o.get("success") for o in mine):
        raise SystemExit(f"smoke: {dag_id} {task_id}: GX did not pass on {target}: {json.dumps(outcomes)[:3000]}")
    for o in mine:
        log(f"{dag_id}: GX passed on {o['target']} over {o.get('span')}: {o.get('summary')}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_env(path: str, version: str) -> None:
    """The smoke never needs .env: every secret is new and thrown away with the stack, each
    region's store gets its own key pair, and the host ports are free ones on loopback."""
    token = lambda: secrets.token_urlsafe(24)  # noqa: E731
    small = "spark.cores.max=1,spark.executor.cores=1,spark.executor.memory=512m,spark.driver.memory=512m"
    values = {
        "COMPOSE_PROJECT_NAME": "tidegate-smoke",
        "TIDEGATE_VERSION": version,
        "POSTGRES_PASSWORD": token(),
        "AIRFLOW_DB_PASSWORD": token(),
        "TIDEGATE_DB_PASSWORD": token(),
        "AIRFLOW_ADMIN_USERNAME": "admin",
        "AIRFLOW_ADMIN_PASSWORD": token(),
        "AIRFLOW_FERNET_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
        "AIRFLOW_JWT_SECRET": token(),
        "AIRFLOW_API_SECRET_KEY": token(),
        "TIDEGATE_S3_EAST_ACCESS_KEY_ID": "east-" + secrets.token_hex(8),
        "TIDEGATE_S3_EAST_SECRET_ACCESS_KEY": token(),
        "TIDEGATE_S3_WEST_ACCESS_KEY_ID": "west-" + secrets.token_hex(8),
        "TIDEGATE_S3_WEST_SECRET_ACCESS_KEY": token(),
        # Patroni's own users, read only under the control-ha profile (COMPOSE_PROFILES=control-ha)
        "CONTROL_HA_REPLICATION_PASSWORD": token(),
        "CONTROL_HA_REWIND_PASSWORD": token(),
        "TIDEGATE_BIND_ADDRESS": "127.0.0.1",
        "AIRFLOW_API_PORT": free_port(),
        "AIRFLOW_WEST_API_PORT": free_port(),
        "SPARK_EAST_UI_PORT": free_port(),
        "SPARK_WEST_UI_PORT": free_port(),
        # small: the machine runs the whole stack
        "SPARK_WORKER_CORES": 1,
        "SPARK_WORKER_MEMORY": "1g",
        "TIDEGATE_REGION_EAST_SPARK_CONF": small,
        "TIDEGATE_REGION_WEST_SPARK_CONF": small,
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.writelines(f"{k}={v}\n" for k, v in values.items())


def main(step: str) -> None:
    # the spec and the job are the DAG forms' defaults: the demo's (tidegate.examples)
    if step == "env" and len(sys.argv) == 4:
        write_env(sys.argv[2], sys.argv[3])
    elif step == "deploy":
        run_dag("tidegate_deploy", {"regions": ["east", "west"], "mode": "auto", "keep_running": True}, timeout_s=1800)
    elif step == "drill":
        run_id = run_dag(
            "tidegate_drill",
            {"kind": "node-failure", "region": "standby", "timeout_s": 1200, "max_lag_s": 120},
            timeout_s=1800,
        )
        result = xcom("tidegate_drill", run_id, "finish")
        log(f"tidegate_drill: {json.dumps(result)[:1500]}")
        check_passed("tidegate_drill", run_id, "check_completeness", "consumer")
    elif step == "idle":
        wait_idle(("tidegate_deploy", "tidegate_drill", "tidegate_failover"), timeout_s=1800)
    elif step == "failover":
        run_id = run_dag(
            "tidegate_failover", {"from_region": "active", "reason": "compose smoke", "timeout_s": 1200}, timeout_s=1800
        )
        check_passed("tidegate_failover", run_id, "check_consumer_view", "consumer")
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
