"""What each site of the replicated control database runs, as pure functions.

Three sites: two regions that each run PostgreSQL under Patroni plus an etcd member, and a
witness site that runs only an etcd member. etcd's quorum is two of three, so whichever
two sites still see each other decide who is primary; a region cut off from both others
keeps nothing but its own member, which can no longer answer, and its Patroni demotes
its PostgreSQL. Each Patroni talks to its own site's etcd member only, for exactly that
reason: a Patroni that could reach a member across the partition would keep its leader
key alive from the minority side.

Replication is synchronous (Patroni's ``synchronous_mode``): a commit returns only once
the other region's standby has it, and Patroni promotes only the standby it recorded as
synchronous, so nothing acknowledged is lost when the primary's region is. It is not
``synchronous_mode_strict``: with its peer region gone the new primary accepts writes
alone rather than stopping the platform (decision 0015 weighs this).

:mod:`tidegate.control.ha.cluster` runs these on one machine for tests;
docs/guide/control-database-in-two-regions.md shows them on hosts.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCOPE = "tidegate-control"  # Patroni's cluster name: the etcd keys live under /service/<scope>
SUPERUSER = "postgres"
REPLICATION_USER = "replicator"
REWIND_USER = "rewinder"
PG_PARAMETERS = {
    # small: the control database holds a few thousand rows per job and day
    "max_connections": 50,
    "shared_buffers": "16MB",
    "max_wal_senders": 5,
    "max_replication_slots": 5,
    "wal_keep_size": "64MB",
    "hot_standby": "on",
    "wal_log_hints": "on",  # pg_rewind needs it to bring an old primary back as a standby
    "synchronous_commit": "on",
}


# each region's PostgreSQL names its region in this setting (an extension-style GUC), so a
# client of the multi-host URL can ask the server it reached which region holds the primary
REGION_SETTING = "tidegate.region"

PATRONI_MIN_TTL_S = 20  # patroni.config: smaller values are raised to it


@dataclass(frozen=True)
class Timings:
    """How fast Patroni notices a lost primary. A primary's leader key lives ``ttl_s``
    without renewal; each Patroni acts every ``loop_wait_s``; a DCS or PostgreSQL call is
    retried for ``retry_timeout_s`` before the primary gives up and demotes itself.

    Patroni demotes a primary that could not renew its key before the key expires only
    when ``loop_wait_s + 2 × retry_timeout_s ≤ ttl_s``: otherwise a partitioned primary
    could still be writable while the other region promotes.

    A demoting primary's PostgreSQL gets ``primary_stop_timeout_s`` to shut down, then
    SIGKILL. Across a real partition its shutdown waits on the WAL sender to the unreachable
    standby; Patroni 3.0 retries the DCS meanwhile and, after ``retry_timeout_s``, starts a
    second demotion beside the first, which leaves an orphan postmaster that keeps the old
    primary from ever rejoining. So the stop must end sooner than one retry.

    Patroni (3.1 and later) raises a ``ttl`` below :data:`PATRONI_MIN_TTL_S` to it without a
    word, so a shorter one is refused here: the writes of a promotion would stop for 20 s, not
    the ``ttl`` written down."""

    ttl_s: int = 30
    loop_wait_s: int = 10
    retry_timeout_s: int = 10
    primary_stop_timeout_s: int = 5

    def __post_init__(self) -> None:
        if self.ttl_s < PATRONI_MIN_TTL_S:
            raise ValueError(
                f"Patroni's ttl={self.ttl_s}s is below the {PATRONI_MIN_TTL_S} s Patroni accepts (it would run "
                f"{PATRONI_MIN_TTL_S} s): give at least {PATRONI_MIN_TTL_S}"
            )
        if self.loop_wait_s + 2 * self.retry_timeout_s > self.ttl_s:
            raise ValueError(
                f"Patroni timings ttl={self.ttl_s}s loop_wait={self.loop_wait_s}s "
                f"retry_timeout={self.retry_timeout_s}s let a cut-off primary outlive its leader key: "
                "make loop_wait + 2 × retry_timeout at most ttl"
            )
        if not 0 < self.primary_stop_timeout_s < self.retry_timeout_s:
            raise ValueError(
                f"Patroni's primary_stop_timeout={self.primary_stop_timeout_s}s must be positive and below "
                f"retry_timeout={self.retry_timeout_s}s: a longer demotion across a partition overlaps a second one"
            )


# one machine: the sites a local switch apart; the shortest ttl Patroni runs
QUICK = Timings(ttl_s=PATRONI_MIN_TTL_S, loop_wait_s=1, retry_timeout_s=3, primary_stop_timeout_s=2)


@dataclass(frozen=True)
class Site:
    """One site: ``host`` and its ports. A witness has no PostgreSQL (``pg_port`` None)."""

    name: str
    host: str
    etcd_client_port: int
    etcd_peer_port: int
    pg_port: int | None = None
    api_port: int | None = None  # Patroni's REST API: health, role, switchover
    # where the etcd member runs when not on ``host``: a container of its own (docker-compose.yaml)
    etcd_host: str | None = None
    # what pg_hba knows the site's connections by: ``host``/32 for an address, the name otherwise;
    # ``samenet`` for containers, whose addresses change at every start and have no reverse DNS
    hba_address: str | None = None

    @property
    def is_witness(self) -> bool:
        return self.pg_port is None

    @property
    def etcd_client_url(self) -> str:
        return f"http://{self.etcd_host or self.host}:{self.etcd_client_port}"

    @property
    def etcd_peer_url(self) -> str:
        return f"http://{self.etcd_host or self.host}:{self.etcd_peer_port}"


def etcd_command(
    site: Site, sites: Sequence[Site], data_dir: Path, *, token: str = SCOPE, program: str = "etcd"
) -> list[str]:
    """The command line of ``site``'s etcd member in a cluster of ``sites`` (first start and
    every restart alike: a member with data in ``data_dir`` ignores the initial cluster)."""
    cluster = ",".join(f"{s.name}={s.etcd_peer_url}" for s in sites)
    return [
        program,
        f"--name={site.name}",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={_bind_url(site.etcd_client_url)}",
        f"--advertise-client-urls={site.etcd_client_url}",
        f"--listen-peer-urls={_bind_url(site.etcd_peer_url)}",
        f"--initial-advertise-peer-urls={site.etcd_peer_url}",
        f"--initial-cluster={cluster}",
        "--initial-cluster-state=new",
        f"--initial-cluster-token={token}",
        "--quota-backend-bytes=268435456",  # Patroni keeps a few keys: 256 MB is ample
        "--auto-compaction-retention=1",
        "--pre-vote=true",  # a member back from a partition asks before it campaigns: no needless election
        "--log-level=warn",
    ]


def patroni_config(
    site: Site,
    sites: Sequence[Site],
    *,
    data_dir: Path,
    bin_dir: Path,
    passwords: Mapping[str, str],
    timings: Timings = Timings(),
    socket_dir: Path | None = None,
    client_networks: Sequence[str] = ("127.0.0.1/32",),
) -> dict[str, Any]:
    """Patroni's configuration for the PostgreSQL of ``site`` (a region, not the witness).

    ``passwords`` maps the superuser, replication and rewind users to theirs; the other
    sites and ``client_networks`` reach PostgreSQL with a password (scram-sha-256), local
    socket connections need none. Serialise it with ``json.dumps`` — JSON is YAML."""
    if site.is_witness or site.api_port is None:
        raise ValueError(f"site {site.name} runs no PostgreSQL: a witness runs etcd only")
    peers = sorted({s.hba_address or _network(s.host) for s in sites if not s.is_witness})
    hba = ["local all all trust"]
    hba += [f"host replication {REPLICATION_USER} {h} scram-sha-256" for h in peers]
    hba += [f"host all all {h} scram-sha-256" for h in peers]
    hba += [f"host all all {n} scram-sha-256" for n in client_networks]
    parameters: dict[str, Any] = dict(PG_PARAMETERS)
    if socket_dir is not None:
        parameters["unix_socket_directories"] = str(socket_dir)
    return {
        "scope": SCOPE,
        "name": site.name,
        "restapi": {"listen": f"{site.host}:{site.api_port}", "connect_address": f"{site.host}:{site.api_port}"},
        # its own member only, and no discovery of the others (use_proxies): see the module
        "etcd3": {"hosts": [f"{site.etcd_host or site.host}:{site.etcd_client_port}"], "use_proxies": True},
        "bootstrap": {
            "dcs": {
                "ttl": timings.ttl_s,
                "loop_wait": timings.loop_wait_s,
                "retry_timeout": timings.retry_timeout_s,
                "primary_stop_timeout": timings.primary_stop_timeout_s,  # Patroni 3.0 also reads master_stop_timeout
                "maximum_lag_on_failover": 0,
                "synchronous_mode": True,
                "synchronous_mode_strict": False,
                "postgresql": {"use_pg_rewind": True, "use_slots": True, "parameters": parameters},
            },
            "initdb": [{"encoding": "UTF8"}, "data-checksums"],
            "pg_hba": hba,
        },
        "postgresql": {
            "listen": f"{site.host}:{site.pg_port}",
            "connect_address": f"{site.host}:{site.pg_port}",
            "data_dir": str(data_dir),
            "bin_dir": str(bin_dir),
            "pgpass": str(data_dir.parent / "pgpass"),
            "use_pg_rewind": True,
            "basebackup": [{"checkpoint": "fast"}],  # a new standby starts now, not after a spread checkpoint
            # an old primary whose history cannot be rewound is copied afresh from the new one
            "remove_data_directory_on_rewind_failure": True,
            "remove_data_directory_on_diverged_timelines": True,
            "authentication": {
                "superuser": {"username": SUPERUSER, "password": passwords[SUPERUSER]},
                "replication": {"username": REPLICATION_USER, "password": passwords[REPLICATION_USER]},
                "rewind": {"username": REWIND_USER, "password": passwords[REWIND_USER]},
            },
            "parameters": parameters | {REGION_SETTING: site.name},
            "pg_hba": hba,
        },
        "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False, "nosync": False},
    }


def multi_host_url(sites: Sequence[Site], database: str, user: str, password: str | None = None) -> str:
    """The control database URL that always reaches the primary: every region's
    PostgreSQL, and ``target_session_attrs=read-write`` so libpq skips a standby. A
    client opened with it follows a promotion without a change of configuration."""
    creds = urllib.parse.quote(user, safe="")
    if password is not None:
        creds += ":" + urllib.parse.quote(password, safe="")
    hosts = "&".join(f"host={s.host}:{s.pg_port}" for s in sites if not s.is_witness)
    return f"postgresql+psycopg://{creds}@/{database}?{hosts}&target_session_attrs=read-write"


def _network(host: str) -> str:
    return f"{host}/32" if host.replace(".", "").isdigit() else host


def _bind_url(url: str) -> str:
    """``url`` to listen on: etcd binds to addresses only, so a member known by a name (a
    container's service name) listens on every interface and advertises the name."""
    parts = urllib.parse.urlsplit(url)
    if parts.hostname == "localhost" or (parts.hostname or "").replace(".", "").isdigit():
        return url
    return parts._replace(netloc=f"0.0.0.0:{parts.port}").geturl()
