"""Real network partitions between the sites of a local cluster: one network namespace per site.

Each site (east, west, witness) gets a Linux network namespace of its own with one address,
plugged into a switch (a bridge in a fifth, "wan" namespace); the calling process — the
tests' client, the observer — gets an address on that switch too and reaches every site.
Every process a site runs is started inside its namespace (:meth:`Network.enter`), so each
cross-site connection — etcd's raft traffic, PostgreSQL's replication and pg_rewind,
Patroni's calls to the other region's REST API — goes through the network, while a site's
own processes reach each other inside it.

:meth:`Network.cut` severs exactly the link between two sites: each gets an ``unreachable``
route to the other's address. A new connection across the cut fails at once (no route to
host); packets of an open one go nowhere, so it hangs as over a real partition until the
link is back (:meth:`Network.heal`) or a timeout ends it. No firewall is needed — the
machine has neither iptables nor nft — only ``ip`` (iproute2), ``nsenter`` and root.

Addresses: ``10.213.N.0/24`` with N free on this machine (several clusters can run at
once), the observer ``.1``, the sites ``.11``, ``.12``, … in the order given.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tidegate.errors import TidegateError

SUBNET = "10.213"
NETNS_DIR = Path("/run/netns")


class NetworkError(TidegateError):
    """The namespaces of a partitionable local network could not be made or changed."""


def unavailable_reason() -> str | None:
    """Why this machine cannot run sites in network namespaces, or None when it can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    missing = [tool for tool in ("ip", "nsenter") if shutil.which(tool) is None]
    if missing:
        return f"network namespaces need {' and '.join(missing)} (iproute2, util-linux)"
    return None


class Network:
    """The sites' namespaces and the switch between them (see the module docstring)."""

    def __init__(self, sites: Sequence[str]) -> None:
        reason = unavailable_reason()
        if reason is not None:
            raise NetworkError(reason, "run as root with iproute2 and util-linux installed")
        self.sites = list(sites)
        self.number = self._free_number()
        self.prefix = f"tidegate{self.number}"
        self.observer_address = f"{SUBNET}.{self.number}.1"
        self.addresses = {site: f"{SUBNET}.{self.number}.{11 + i}" for i, site in enumerate(self.sites)}
        self.cuts: set[frozenset[str]] = set()
        self._created: list[str] = []

    def create(self) -> Network:
        """Make the namespaces and the switch; :meth:`close` removes them."""
        try:
            self._create()
        except (subprocess.CalledProcessError, OSError) as exc:
            self.close()
            detail = exc.stderr.strip() if isinstance(exc, subprocess.CalledProcessError) else exc
            raise NetworkError(f"making the sites' network namespaces failed: {detail}") from exc
        return self

    def namespace(self, site: str) -> str:
        return f"{self.prefix}-{site}"

    def enter(self, site: str, *, uid: int | None = None, gid: int | None = None) -> list[str]:
        """The command prefix that runs a program inside ``site``'s namespace (as ``uid``:
        ``nsenter`` switches user after entering, which a process that already dropped root
        could not)."""
        prefix = ["nsenter", f"--net={NETNS_DIR / self.namespace(site)}"]
        if uid is not None:
            prefix += [f"--setuid={uid}", f"--setgid={gid if gid is not None else uid}"]
        return [*prefix, "--"]

    def cut(self, a: str, b: str) -> None:
        """Sever the link between sites ``a`` and ``b``, both ways."""
        for here, there in ((a, b), (b, a)):
            self._ip(here, "route", "replace", "unreachable", f"{self.addresses[there]}/32")
        self.cuts.add(frozenset((a, b)))

    def heal(self, a: str, b: str) -> None:
        for here, there in ((a, b), (b, a)):
            self._ip(here, "route", "del", "unreachable", f"{self.addresses[there]}/32", check=False)
        self.cuts.discard(frozenset((a, b)))

    def isolate(self, site: str) -> None:
        """Cut ``site`` from every other site (the observer still reaches it)."""
        for other in self.sites:
            if other != site:
                self.cut(site, other)

    def heal_all(self) -> None:
        for a, b in [tuple(cut) for cut in self.cuts]:
            self.heal(a, b)

    def close(self) -> None:
        """Delete the namespaces (their interfaces go with them). Processes still inside
        keep theirs alive until they exit: stop them first."""
        if self._created:  # the observer's end would go with the switch, but a moment later
            subprocess.run(["ip", "link", "del", self.prefix], capture_output=True)
        for name in reversed(self._created):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        self._created.clear()

    # -- building it ----------------------------------------------------------------------------
    def _create(self) -> None:
        wan = f"{self.prefix}-wan"
        self._netns_add(wan)
        _run("ip", "-n", wan, "link", "add", "switch", "type", "bridge")
        _run("ip", "-n", wan, "link", "set", "switch", "up")
        for site in self.sites:
            ns = self.namespace(site)
            self._netns_add(ns)
            _run("ip", "-n", wan, "link", "add", site[:15], "type", "veth", "peer", "name", "wan0", "netns", ns)
            self._plug(wan, site[:15])
            _run("ip", "-n", ns, "addr", "add", f"{self.addresses[site]}/24", "dev", "wan0")
            _run("ip", "-n", ns, "link", "set", "wan0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        # the observer's end lives in this process's namespace, named after the subnet: unique here
        _run("ip", "-n", wan, "link", "add", "observer", "type", "veth", "peer", "name", self.prefix)
        _run("ip", "-n", wan, "link", "set", self.prefix, "netns", str(os.getpid()))
        self._plug(wan, "observer")
        _run("ip", "addr", "add", f"{self.observer_address}/24", "dev", self.prefix)
        _run("ip", "link", "set", self.prefix, "up")

    def _plug(self, wan: str, port: str) -> None:
        _run("ip", "-n", wan, "link", "set", port, "master", "switch")
        _run("ip", "-n", wan, "link", "set", port, "up")

    def _netns_add(self, name: str) -> None:
        _run("ip", "netns", "add", name)
        self._created.append(name)

    def _ip(self, site: str, *args: str, check: bool = True) -> None:
        done = subprocess.run(["ip", "-n", self.namespace(site), *args], capture_output=True, text=True)
        if check and done.returncode:
            raise NetworkError(f"ip {' '.join(args)} in {site}'s namespace failed: {done.stderr.strip()}")

    @staticmethod
    def _free_number() -> int:
        """A subnet number that no namespace or interface of this machine uses yet."""
        taken = {p.name for p in NETNS_DIR.iterdir()} if NETNS_DIR.is_dir() else set()
        addresses = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True).stdout
        for number in random.sample(range(1, 255), 254):
            if f"{SUBNET}.{number}." not in addresses and not any(t.startswith(f"tidegate{number}-") for t in taken):
                return number
        raise NetworkError(f"every subnet {SUBNET}.N.0/24 is in use", "delete stale namespaces: ip netns list")


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True, text=True)
