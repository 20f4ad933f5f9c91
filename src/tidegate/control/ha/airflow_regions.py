"""Airflow in both regions on one metadata database, on the replicated control database.

Each region runs the whole of Airflow's control plane — scheduler, triggerer, DAG
processor and API server — against ONE metadata database, ``airflow``, that lives beside
the control database in the same Patroni cluster and is reached through the same kind of
multi-host URL (``target_session_attrs=read-write``: whichever region is primary). Airflow's
schedulers share a database by design (row locks with ``SKIP LOCKED``), so the two regions
schedule together while both stand and the survivor alone once one falls. Each scheduler
runs its tasks with its own LocalExecutor, whose workers report through their own region's
API server (``execution_api_server_url``).

When a region is lost, its scheduler stops heartbeating; after ``health_check_threshold_s``
the other scheduler, at its next orphan check (every ``orphan_check_interval_s``), marks it
failed and resets the task instances it had queued or running, which then run again in the
surviving region (:class:`FailureTimings`).

The settings are pure functions (:func:`region_environment`, :func:`airflow_url`);
:class:`AirflowRegions` runs them as local processes over a
:class:`tidegate.control.ha.cluster.LocalCluster` for tests and trying it out, and kills a
whole region — its Airflow and its database site — at once. The guide:
docs/guide/control-plane-in-two-regions.md.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from tidegate.control.ha.cluster import REGIONS, LocalCluster, free_ports
from tidegate.control.ha.programs import ClusterError
from tidegate.control.ha.topology import SUPERUSER

AIRFLOW_DATABASE = "airflow"
AIRFLOW_USER = "airflow"
COMPONENTS = ("scheduler", "triggerer", "dag-processor", "api-server")


@dataclass(frozen=True)
class FailureTimings:
    """How fast a surviving scheduler takes over what a lost region's scheduler held.

    A scheduler heartbeats every ``scheduler_heartbeat_s``; one silent for
    ``health_check_threshold_s`` is dead to the others, and each looks for the task instances
    of dead schedulers every ``orphan_check_interval_s``. A lost region's queued and running
    tasks therefore run again at most ``health_check_threshold_s + orphan_check_interval_s``
    (plus a scheduler loop) after its last heartbeat. ``task_heartbeat_timeout_s`` is how long
    a scheduler waits on a task of its own whose process stopped heartbeating."""

    scheduler_heartbeat_s: int = 5
    health_check_threshold_s: int = 30
    orphan_check_interval_s: int = 60
    task_heartbeat_timeout_s: int = 300

    def __post_init__(self) -> None:
        if self.health_check_threshold_s < 2 * self.scheduler_heartbeat_s:
            raise ValueError(
                f"a scheduler health check threshold of {self.health_check_threshold_s}s is under two "
                f"heartbeats ({self.scheduler_heartbeat_s}s each): one slow loop would have the other "
                "region reset a living scheduler's tasks; make it at least twice the heartbeat"
            )


QUICK = FailureTimings(
    scheduler_heartbeat_s=1, health_check_threshold_s=6, orphan_check_interval_s=5, task_heartbeat_timeout_s=30
)


def airflow_url(control_url: str, password: str, *, connect_timeout_s: int = 5) -> str:
    """The metadata database's multi-host URL: the control database's (every region's
    PostgreSQL, ``target_session_attrs=read-write``) with Airflow's user and database, and a
    connect timeout so that a host of a lost region is given up rather than waited on."""
    url = make_url(control_url).set(username=AIRFLOW_USER, password=password, database=AIRFLOW_DATABASE)
    url = url.update_query_dict({"connect_timeout": str(connect_timeout_s)})
    return url.render_as_string(hide_password=False)


def region_environment(
    region: str,
    *,
    metadata_url: str,
    home: Path,
    dags_folder: Path,
    api_port: int,
    log_ports: tuple[int, int],
    jwt_secret: str,
    timings: FailureTimings = FailureTimings(),
    parallelism: int = 2,
) -> dict[str, str]:
    """The settings of one region's Airflow: its own home, API port and executor; the
    metadata database, DAGs folder and JWT secret every region shares (a task's token is
    issued by one region's scheduler and checked by that region's API server, but a user's
    token should hold in both)."""
    api = f"http://127.0.0.1:{api_port}"
    return {
        "AIRFLOW_HOME": str(home),
        "TIDEGATE_REGION": region,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_url,
        # the async engine the API server uses: psycopg 3 again (Airflow would pick asyncpg)
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": metadata_url,
        # few connections per process (PostgreSQL is shared by eight processes and the
        # platform); checked before use, so a connection to a lost primary is replaced
        "AIRFLOW__DATABASE__SQL_ALCHEMY_POOL_SIZE": "2",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_MAX_OVERFLOW": "3",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_POOL_PRE_PING": "True",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": str(parallelism),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{api}/execution/",
        "AIRFLOW__API__BASE_URL": api,
        "AIRFLOW__API__PORT": str(api_port),
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API_AUTH__JWT_SECRET": jwt_secret,
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": str(timings.scheduler_heartbeat_s),
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": str(timings.health_check_threshold_s),
        "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": str(timings.orphan_check_interval_s),
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(timings.task_heartbeat_timeout_s),
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        # the scheduler's and the triggerer's log servers (8793 and 8794 on hosts of their own)
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(log_ports[0]),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(log_ports[1]),
    }


def component_command(airflow: Path, component: str, api_port: int) -> list[str]:
    """The command line of one Airflow component."""
    if component not in COMPONENTS:
        raise ValueError(f"unknown Airflow component {component!r}: one of {', '.join(COMPONENTS)}")
    command = [str(airflow), component]
    if component == "api-server":
        command += ["--host", "127.0.0.1", "--port", str(api_port), "--workers", "1"]
    return command


class AirflowRegions:
    """Airflow's control plane in east and in west over ``cluster``, under ``folder``
    (one home per region), every region reading ``dags_folder``.

    ``prepare()`` creates the metadata database and migrates it once; ``start(region)``
    starts a region's four components, each in its own session, and waits for its API
    server; ``kill_region(region)`` SIGKILLs them and everything they started and the
    region's database site; ``stop()`` ends what is left."""

    def __init__(
        self,
        cluster: LocalCluster,
        folder: Path,
        dags_folder: Path,
        *,
        timings: FailureTimings = QUICK,
        extra_env: dict[str, str] | None = None,
        airflow: Path | None = None,
    ) -> None:
        self.cluster = cluster
        self.folder = Path(folder)
        self.dags_folder = Path(dags_folder)
        self.timings = timings
        self.extra_env = dict(extra_env or {})
        self.airflow = airflow or Path(sys.executable).with_name("airflow")
        self.password = os.urandom(12).hex()
        self.jwt_secret = os.urandom(48).hex()  # ≥ 64 bytes for HS512
        ports = free_ports(3 * len(REGIONS))
        self.api_ports = {region: ports.pop() for region in REGIONS}
        self.log_ports = {region: (ports.pop(), ports.pop()) for region in REGIONS}
        self.restarts: list[tuple[str, str, int, float]] = []  # (region, component, exit code, time.time())
        self._watching = threading.Event()
        self._watch = threading.Thread(target=self._restart_exited, daemon=True)
        self.url = airflow_url(cluster.url(), self.password)
        self.procs: dict[str, dict[str, subprocess.Popen]] = {region: {} for region in REGIONS}

    def env(self, region: str) -> dict[str, str]:
        home = self.folder / region
        settings = region_environment(
            region,
            metadata_url=self.url,
            home=home,
            dags_folder=self.dags_folder,
            api_port=self.api_ports[region],
            log_ports=self.log_ports[region],
            jwt_secret=self.jwt_secret,
            timings=self.timings,
        )
        return os.environ | self.extra_env | settings

    def api_url(self, region: str) -> str:
        return f"http://127.0.0.1:{self.api_ports[region]}"

    # -- the metadata database ------------------------------------------------------------------
    def prepare(self, timeout_s: float = 300) -> None:
        """Airflow's role and database on the primary (the standby copies them), then
        ``airflow db migrate`` once and a check that Airflow's user reaches it through the
        multi-host URL (what ``airflow db check`` does, ``SELECT 1``, without starting
        Airflow's CLI for it)."""
        admin = make_url(self.cluster.url()).set(
            username=SUPERUSER, password=self.cluster.passwords[SUPERUSER], database="postgres"
        )
        engine = create_engine(admin, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as db:
                db.execute(text(f"CREATE ROLE {AIRFLOW_USER} LOGIN PASSWORD '{self.password}'"))
                db.execute(text(f"CREATE DATABASE {AIRFLOW_DATABASE} OWNER {AIRFLOW_USER}"))
        finally:
            engine.dispose()
        self._run(REGIONS[0], ["db", "migrate"], timeout_s)
        engine = create_engine(self.url)
        try:
            with engine.connect() as db:
                db.execute(text("SELECT 1"))
        except SQLAlchemyError as exc:
            where = make_url(self.url).render_as_string(hide_password=True)
            raise ClusterError(f"Airflow's metadata database does not answer through {where}: {exc}") from exc
        finally:
            engine.dispose()

    def _run(self, region: str, args: list[str], timeout_s: float) -> None:
        home = self.folder / region
        home.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [str(self.airflow), *args],
            env=self.env(region),
            cwd=home,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if done.returncode:
            raise ClusterError(f"airflow {' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")

    # -- a region's processes ---------------------------------------------------------------------
    def start(self, region: str, components: tuple[str, ...] = COMPONENTS) -> None:
        """Start the region's scheduler, triggerer, DAG processor and API server (or those of
        ``components`` not running yet). A component that exits is started again after a
        second, as systemd's ``Restart=always`` would: a scheduler whose database call fails
        in the promotion window exits."""
        (self.folder / region / "plugins").mkdir(parents=True, exist_ok=True)
        for component in components:
            if component not in self.procs[region]:
                self._spawn(region, component)
        if not self._watch.is_alive():
            self._watch.start()

    def _spawn(self, region: str, component: str) -> None:
        home = self.folder / region
        with open(home / f"{component}.log", "ab") as log:
            self.procs[region][component] = subprocess.Popen(
                component_command(self.airflow, component, self.api_ports[region]),
                env=self.env(region),
                cwd=home,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # the region's processes are found by session
            )

    def _restart_exited(self) -> None:
        while not self._watching.wait(1):
            for region, procs in list(self.procs.items()):
                for component, proc in list(procs.items()):
                    if proc.poll() is not None and self.procs[region].get(component) is proc:
                        self.restarts.append((region, component, proc.returncode, time.time()))
                        self._spawn(region, component)

    def wait_until_serving(self, region: str, timeout_s: float = 180) -> None:
        """Wait until the region's API server answers and its scheduler, DAG processor and
        triggerer have heartbeated. Start the regions one after the other: two DAG processors
        starting at once both insert the DAG bundle's row, and one of them exits."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.api_url(region)}/api/v2/monitor/health", timeout=5) as res:
                    health = res.read().decode()
                if _all_healthy(health):
                    return
            except OSError:
                pass
            time.sleep(1)
        raise ClusterError(
            f"Airflow in {region} did not serve after {timeout_s:.0f} s", f"read the logs under {self.folder / region}"
        )

    def schedulers_running(self) -> int:
        """How many schedulers heartbeat in the metadata database now (a region's counts once
        its first heartbeat is in)."""
        engine = create_engine(self.url)
        try:
            with engine.connect() as db:
                return int(
                    db.execute(
                        text(
                            "SELECT count(*) FROM job WHERE job_type = 'SchedulerJob' AND state = 'running' "
                            "AND latest_heartbeat > now() - make_interval(secs => :fresh)"
                        ),
                        {"fresh": float(self.timings.health_check_threshold_s)},
                    ).scalar()
                    or 0
                )
        finally:
            engine.dispose()

    def kill_region(self, region: str) -> None:
        """SIGKILL every Airflow process of the region — components, executor workers and
        the tasks they run — and its database site: the region is gone."""
        self.kill_airflow(region, signal.SIGKILL)
        self.cluster.kill_site(region)

    def kill_airflow(self, region: str, sig: int = signal.SIGKILL, grace_s: float = 10) -> None:
        """Send ``sig`` to every process of the region's sessions; SIGKILL what is left
        after ``grace_s``."""
        procs, self.procs[region] = self.procs[region], {}  # no restarts of what is being killed
        sessions = {proc.pid for proc in procs.values()}
        _signal(_session_members(sessions), sig)
        deadline = time.monotonic() + grace_s
        for proc in procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                break
        _signal(_session_members(sessions), signal.SIGKILL)
        for proc in procs.values():
            proc.wait(10)

    def stop(self, graceful: bool = True) -> None:
        """End every Airflow process that is left, database untouched: SIGTERM, then SIGKILL
        after a grace, region by region; or, not ``graceful``, SIGKILL to every region's
        sessions at once (for a harness whose folders are thrown away next)."""
        self._watching.set()
        if self._watch.is_alive():
            self._watch.join(10)
        if graceful:
            for region in REGIONS:
                if self.procs[region]:
                    self.kill_airflow(region, signal.SIGTERM)
            return
        procs = [proc for region in REGIONS for proc in self.procs[region].values()]
        self.procs = {region: {} for region in REGIONS}
        sessions = {proc.pid for proc in procs}
        _signal(_session_members(sessions), signal.SIGKILL)
        for proc in procs:
            proc.wait(10)
        _signal(_session_members(sessions), signal.SIGKILL)  # anything forked while the first went out

    def log_tail(self, region: str, component: str, chars: int = 3000) -> str:
        try:
            return (self.folder / region / f"{component}.log").read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"


def _all_healthy(health: str) -> bool:
    try:
        found = json.loads(health)
        return all(found[part]["status"] == "healthy" for part in ("scheduler", "dag_processor", "triggerer"))
    except (ValueError, KeyError, TypeError):
        return False


def _signal(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _session_members(sessions: set[int]) -> set[int]:
    """Every process whose session is one of ``sessions`` (read from /proc): a component,
    its workers and their tasks, which lead process groups of their own but stay in it."""
    members = set()
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) in sessions:  # after the name: state, ppid, pgrp, session
            members.add(int(Path(stat).parent.name))
    return members
