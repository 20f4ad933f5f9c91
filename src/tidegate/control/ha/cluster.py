"""The replicated control database on one machine: three sites as local processes.

``LocalCluster(folder).start()`` runs an etcd member per site (east, west, witness) and
Patroni with PostgreSQL in east and west, each site on its own ports and in its own
folder, with :mod:`tidegate.control.ha.topology`'s configuration — the same processes a
host runs, nothing simulated. East starts first and is the first primary; west clones it
and becomes its synchronous standby.

As root, each site runs in a network namespace of its own with its own address
(:mod:`tidegate.control.ha.links`), so that a partition is a real one: the calling process
reaches every site, and the sites reach each other only over links that can be cut. Without
root every site shares 127.0.0.1 and partitions are not available. Tests and benches use
the fault helpers: :meth:`LocalCluster.kill_site` (SIGKILL to everything a region runs: its
region is gone), :meth:`LocalCluster.cut` and :meth:`LocalCluster.cut_off` (the network
between two sites, or between one site and both others, severed), :meth:`LocalCluster.heal`
and :meth:`LocalCluster.reconnect`, and :meth:`LocalCluster.start_site` (a region back,
with the data it had).

PostgreSQL refuses to run as root, so as root Patroni and PostgreSQL run as the ``postgres``
user of Debian's package. Needs etcd — the build of ``scripts/etcd.sh`` (the version pinned
in ``tools/etcd/go.mod``), else Debian's ``etcd-server`` 3.4 with a warning — ``patroni``
and PostgreSQL's server binaries; ``scripts/prerequisites.sh`` installs them.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import re
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tidegate.control.ha.links import Network, unavailable_reason
from tidegate.control.ha.programs import ClusterError, etcd_program, patroni_program, pg_bin_dir
from tidegate.control.ha.topology import (
    QUICK,
    REPLICATION_USER,
    REWIND_USER,
    SUPERUSER,
    Site,
    Timings,
    etcd_command,
    multi_host_url,
    patroni_config,
)

REGIONS = ("east", "west")
WITNESS = "witness"
APP_USER = "tidegate"
APP_DATABASE = "tidegate"


class LocalCluster:
    """East, west and a witness as processes under ``folder`` (see the module docstring).

    ``partitions``: run each site in a network namespace of its own so that links can be
    cut (the default as root, where it is possible); False puts every site on ``host``."""

    def __init__(
        self, folder: Path, *, timings: Timings = QUICK, host: str = "127.0.0.1", partitions: bool | None = None
    ) -> None:
        self.folder = Path(folder)
        self.timings = timings
        self.bin_dir = pg_bin_dir()
        if partitions is None:
            partitions = unavailable_reason() is None
        self.network = Network((*REGIONS, WITNESS)) if partitions else None
        self.observer = self.network.observer_address if self.network else host  # where this process connects from
        ports = free_ports(10)
        self.sites = {
            name: Site(
                name,
                self.network.addresses[name] if self.network else host,
                etcd_client_port=ports.pop(),
                etcd_peer_port=ports.pop(),
                pg_port=None if name == WITNESS else ports.pop(),
                api_port=None if name == WITNESS else ports.pop(),
            )
            for name in (*REGIONS, WITNESS)
        }
        self.passwords = {user: secrets.token_hex(12) for user in (SUPERUSER, REPLICATION_USER, REWIND_USER)}
        self.app_password = secrets.token_hex(12)
        self.etcd: dict[str, subprocess.Popen] = {}
        self.patroni: dict[str, subprocess.Popen] = {}
        self.etcd_program = etcd_program()
        self._as_postgres = os.geteuid() == 0

    # -- the whole cluster ------------------------------------------------------------------
    def start(self, timeout_s: float = 90) -> LocalCluster:
        """Start every site; return once east is primary, west its synchronous standby,
        and the application's role and database exist."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self._own(self.folder)
        if self._as_postgres:
            closed = [p for p in self.folder.parents if p.stat().st_uid != 0 or not p.stat().st_mode & 0o001]
            closed = [p for p in closed if p.stat().st_uid != pwd.getpwnam("postgres").pw_uid]
            if closed:
                raise ClusterError(
                    f"the cluster's folder {self.folder} is inside {closed[0]}, which the postgres user cannot enter",
                    "give a folder whose parents others may traverse (a fresh tempfile.mkdtemp() is one)",
                )
        try:
            if self.network is not None:
                self.network.create()
            for name in self.sites:
                self._start_etcd(name)
            self.wait_for_etcd(timeout_s)
            self._start_patroni("east")
            self.wait_for_primary("east", timeout_s)
            self._create_app_database()
            self._start_patroni("west")
            self.wait_for_sync_standby("west", timeout_s)
        except BaseException:
            self.stop()  # a start that fails leaves no process or namespace behind
            raise
        return self

    def stop(self) -> None:
        """Stop every process and remove the sites' namespaces (no clean shutdown needed:
        the folder is thrown away)."""
        for name in self.sites:
            self.kill_site(name)
        if self.network is not None:
            self.network.close()

    def url(self, database: str = APP_DATABASE) -> str:
        """The application's multi-host URL: reaches whichever region is primary."""
        return multi_host_url(list(self.sites.values()), database, APP_USER, self.app_password)

    def create_database(self, name: str) -> str:
        """A new database of the application's role, made on the current primary (the
        standby copies it); its multi-host URL. One platform per database: a test's jobs,
        leases and procedures start from nothing."""
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
            raise ClusterError(f"{name!r} is not a plain database name", "use lower-case letters, digits and _")
        self._psql(self.wait_for_primary(), f"CREATE DATABASE {name} OWNER {APP_USER}")
        return self.url(name)

    def site_url(self, name: str) -> str:
        """The application's URL of one region's PostgreSQL, primary or not."""
        site = self.sites[name]
        return f"postgresql+psycopg://{APP_USER}:{self.app_password}@{site.host}:{site.pg_port}/{APP_DATABASE}"

    # -- one site -----------------------------------------------------------------------------
    def start_site(self, name: str) -> None:
        """Start a site's processes again, on the data they left (a returning region)."""
        if name not in self.etcd or self.etcd[name].poll() is not None:
            self._start_etcd(name)
        if name in REGIONS and (name not in self.patroni or self.patroni[name].poll() is not None):
            self._start_patroni(name)

    def kill_site(self, name: str) -> None:
        """SIGKILL everything the site runs, at once: Patroni, PostgreSQL and its backends,
        the etcd member. Nothing is shut down cleanly — the region is simply gone."""
        pids = set()
        for procs in (self.patroni, self.etcd):
            if name in procs and procs[name].poll() is None:
                pids.add(procs[name].pid)
        postmaster = self._postmaster_pid(name)
        if postmaster is not None:
            pids.add(postmaster)
        pids |= {child for pid in list(pids) for child in _descendants(pid)}
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for procs in (self.patroni, self.etcd):
            if name in procs:
                procs[name].wait(10)
        if postmaster is not None:
            _wait_gone(postmaster, 10)

    def cut(self, a: str, b: str) -> None:
        """Sever the network between sites ``a`` and ``b``: every process keeps running,
        new connections across fail, open ones hang. This process still reaches both."""
        self._partitionable().cut(a, b)

    def heal(self, a: str, b: str) -> None:
        self._partitionable().heal(a, b)

    def cut_off(self, name: str) -> None:
        """Cut the site from both others: a region so cut off keeps only its own etcd
        member, loses the quorum, and its Patroni demotes its PostgreSQL. :meth:`reconnect`
        ends it."""
        self._partitionable().isolate(name)

    def reconnect(self, name: str) -> None:
        """Heal every cut link of ``name``."""
        network = self._partitionable()
        for other in self.sites:
            if other != name:
                network.heal(name, other)

    def _partitionable(self) -> Network:
        if self.network is None:
            raise ClusterError(
                f"this cluster runs every site on {self.observer}: partitions need each site in a network namespace",
                f"run as root with iproute2 and nsenter (now: {unavailable_reason() or 'partitions=False was asked'})",
            )
        return self.network

    # -- what the sites say ----------------------------------------------------------------
    def status(self, name: str) -> dict[str, Any] | None:
        """Patroni's view of its PostgreSQL (``role``, ``state``, ``timeline``…), or None
        when its REST API does not answer."""
        site = self.sites[name]
        try:
            with urllib.request.urlopen(f"http://{site.host}:{site.api_port}/patroni", timeout=2) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def primary(self) -> str | None:
        """The region whose PostgreSQL runs as Patroni's primary now, if one does."""
        for name in REGIONS:
            status = self.status(name)
            if status and status.get("role") in ("master", "primary") and status.get("state") == "running":
                return name
        return None

    def switchover(self, to: str, timeout_s: float = 120) -> None:
        """Make ``to`` the primary by a planned switchover (Patroni's ``POST /switchover``:
        the primary hands over to its synchronous standby, nothing is lost), and wait until
        the other region is its synchronous standby again. Nothing to do when it is already."""
        current = self.wait_for_primary(timeout_s=timeout_s)
        if current == to:
            return
        self.wait_for_sync_standby(to, timeout_s)
        site = self.sites[current]
        request = urllib.request.Request(
            f"http://{site.host}:{site.api_port}/switchover",
            data=json.dumps({"leader": current, "candidate": to}).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s):
                pass
        except (OSError, urllib.error.HTTPError) as exc:
            raise ClusterError(f"the switchover from {current} to {to} was refused: {exc}", "read patroni.log") from exc
        self.wait_for_primary(to, timeout_s)
        self.wait_for_sync_standby(current, timeout_s)

    def wait_for_primary(self, name: str | None = None, timeout_s: float = 60) -> str:
        """Wait until ``name`` (or any region) is primary; its name."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._check_running()
            found = self.primary()
            if found is not None and (name is None or found == name):
                return found
            time.sleep(0.2)
        raise ClusterError(
            f"no primary {'in ' + name if name else 'in either region'} after {timeout_s:.0f} s "
            f"(east: {self.status('east')}, west: {self.status('west')})",
            f"read the sites' patroni.log and etcd.log under {self.folder}",
        )

    def wait_for_sync_standby(self, name: str, timeout_s: float = 60) -> None:
        """Wait until ``name`` streams from the primary as its synchronous standby."""
        site = self.sites[name]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._check_running()
            try:
                with urllib.request.urlopen(f"http://{site.host}:{site.api_port}/sync", timeout=2):
                    return
            except (OSError, urllib.error.HTTPError):
                time.sleep(0.3)
        raise ClusterError(
            f"{name} is not the synchronous standby after {timeout_s:.0f} s (its Patroni says {self.status(name)})",
            f"read {self.folder / name / 'patroni.log'}",
        )

    def wait_for_etcd(self, timeout_s: float = 60) -> None:
        """Wait until every member has joined and the cluster agreed on its version (Patroni
        refuses to start against a cluster that has not)."""
        deadline = time.monotonic() + timeout_s
        waiting = set(self.sites)
        while waiting and time.monotonic() < deadline:
            self._check_running()
            for name in sorted(waiting):
                try:
                    with urllib.request.urlopen(f"{self.sites[name].etcd_client_url}/version", timeout=2) as r:
                        if json.loads(r.read()).get("etcdcluster", "not_decided") != "not_decided":
                            waiting.discard(name)
                except (OSError, ValueError):
                    pass
            time.sleep(0.1)
        if waiting:
            raise ClusterError(
                f"etcd members {sorted(waiting)} did not form the cluster in {timeout_s:.0f} s",
                f"read their etcd.log under {self.folder}",
            )

    def etcd_pid(self, name: str) -> int:
        return self.etcd[name].pid

    # -- processes ----------------------------------------------------------------------------
    def _check_running(self) -> None:
        """Raise, with the end of its log, when a process this cluster started has exited
        without being killed by it."""
        for kind, procs in (("etcd", self.etcd), ("patroni", self.patroni)):
            for name, proc in procs.items():
                if proc.returncode is None and proc.poll() is not None:
                    log = self.folder / name / f"{kind}.log"
                    tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
                    raise ClusterError(f"{kind} of {name} exited with code {proc.returncode}:\n{tail}")

    def _site_dir(self, name: str) -> Path:
        path = self.folder / name
        path.mkdir(exist_ok=True)
        self._own(path)
        return path

    def _start_etcd(self, name: str) -> None:
        folder = self._site_dir(name)
        command = etcd_command(self.sites[name], list(self.sites.values()), folder / "etcd", program=self.etcd_program)
        # etcd needs no user of its own; the build lives in root's cache, which postgres cannot read
        self.etcd[name] = self._spawn(command, folder / "etcd.log", name, as_postgres=False)

    def _start_patroni(self, name: str) -> None:
        folder = self._site_dir(name)
        config = patroni_config(
            self.sites[name],
            list(self.sites.values()),
            data_dir=folder / "pgdata",
            bin_dir=self.bin_dir,
            passwords=self.passwords,
            timings=self.timings,
            socket_dir=folder,
            client_networks=sorted({"127.0.0.1/32", f"{self.observer}/32"}),
        )
        path = folder / "patroni.yaml"
        path.write_text(json.dumps(config, indent=2))
        os.chmod(path, 0o600)  # it holds the passwords
        self._own(path)
        self.patroni[name] = self._spawn([patroni_program() or "patroni", str(path)], folder / "patroni.log", name)

    def _spawn(self, command: list[str], log: Path, site: str, *, as_postgres: bool = True) -> subprocess.Popen:
        """Start ``command`` in ``site``'s namespace (when there are namespaces), as the
        postgres user when running as root and ``as_postgres``."""
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(self.folder)}
        user = "postgres" if self._as_postgres and as_postgres else None
        if self.network is not None:
            ids = pwd.getpwnam(user) if user else None
            enter = self.network.enter(site, uid=ids.pw_uid, gid=ids.pw_gid) if ids else self.network.enter(site)
            command = [*enter, *command]
            user = None  # nsenter switches, after entering the namespace
        with open(log, "ab") as out:
            return subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, user=user, group=user, cwd=self.folder
            )

    def _postmaster_pid(self, name: str) -> int | None:
        pidfile = self.folder / name / "pgdata" / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().split("\n", 1)[0])
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError):
            return None

    def _own(self, path: Path) -> None:
        if self._as_postgres:
            user = pwd.getpwnam("postgres")
            os.chown(path, user.pw_uid, user.pw_gid)

    def _create_app_database(self) -> None:
        """The application's role (with a password, as clients on other hosts log in) and
        its database, created on the primary through its local socket."""
        self._psql("east", f"CREATE ROLE {APP_USER} LOGIN PASSWORD '{self.app_password}'")
        self._psql("east", f"CREATE DATABASE {APP_DATABASE} OWNER {APP_USER}")

    def _psql(self, site: str, sql: str) -> None:
        """Run ``sql`` as the superuser on ``site``'s PostgreSQL through its local socket."""
        psql = [str(self.bin_dir / "psql"), "-h", str(self.folder / site), "-p", str(self.sites[site].pg_port)]
        psql += ["-U", SUPERUSER, "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-q", "-c", sql]
        done = subprocess.run(psql, capture_output=True, text=True, user="postgres" if self._as_postgres else None)
        if done.returncode:
            raise ClusterError(f"{sql.split(' PASSWORD ')[0]} on {site} failed: {done.stderr.strip()}")


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1 (held together while picked)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (read from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(Path(stat).parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _wait_gone(pid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
