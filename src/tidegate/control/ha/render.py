"""A site's files from :mod:`tidegate.control.ha.topology`, on the command line: what a host
or a container runs, written where it starts, so no second copy of the settings exists.

    python -m tidegate.control.ha.render patroni east --site east:patroni-east:etcd-east \\
        --site west:patroni-west:etcd-west --site witness::etcd-witness \\
        --data-dir /var/lib/postgresql/patroni/data --bin-dir /usr/lib/postgresql/15/bin \\
        --client-network samenet --out /var/lib/postgresql/patroni/patroni.yaml
    python -m tidegate.control.ha.render etcd witness --site … --data-dir /var/lib/etcd/witness --exec

A site is ``NAME:PG_HOST[:ETCD_HOST]``: the host of its PostgreSQL and Patroni, and of its
etcd member when that runs elsewhere (a container of its own); a witness has no PostgreSQL
(``NAME::ETCD_HOST``). Ports are the guide's: PostgreSQL 5432, Patroni's API 8008, etcd
2379 (clients) and 2380 (peers). Patroni's passwords come from the environment, under the
names Patroni itself reads (``PATRONI_SUPERUSER_PASSWORD``, ``PATRONI_REPLICATION_PASSWORD``,
``PATRONI_REWIND_PASSWORD``), never from the command line.

Standard library only: the control database's image runs it with Debian's Python, beside
Patroni, without the rest of Tidegate.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tidegate.control.ha.topology import (
    REPLICATION_USER,
    REWIND_USER,
    SUPERUSER,
    Site,
    etcd_command,
    patroni_config,
)

PG_PORT = 5432
API_PORT = 8008
ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380
# the variables Patroni reads for these users' passwords: one name for both readers
PASSWORD_VARIABLES = {
    SUPERUSER: "PATRONI_SUPERUSER_PASSWORD",
    REPLICATION_USER: "PATRONI_REPLICATION_PASSWORD",
    REWIND_USER: "PATRONI_REWIND_PASSWORD",
}


class RenderError(ValueError):
    """A site list or an environment that does not describe the cluster."""


def parse_site(text: str, *, hba_address: str | None = None) -> Site:
    """``NAME:PG_HOST[:ETCD_HOST]`` (``NAME::ETCD_HOST``: a witness) as a :class:`Site` on the
    standard ports."""
    name, _, rest = text.partition(":")
    pg_host, _, etcd_host = rest.partition(":")
    if not name or not (pg_host or etcd_host) or ":" in etcd_host:
        raise RenderError(f"site {text!r}: NAME:PG_HOST[:ETCD_HOST], or NAME::ETCD_HOST for a witness")
    if not pg_host:
        return Site(name, etcd_host, ETCD_CLIENT_PORT, ETCD_PEER_PORT)
    return Site(
        name,
        pg_host,
        ETCD_CLIENT_PORT,
        ETCD_PEER_PORT,
        pg_port=PG_PORT,
        api_port=API_PORT,
        etcd_host=etcd_host or None,
        hba_address=hba_address,
    )


def parse_sites(texts: Sequence[str], *, hba_address: str | None = None) -> list[Site]:
    sites = [parse_site(t, hba_address=hba_address) for t in texts]
    names = [s.name for s in sites]
    if len(set(names)) != len(names):
        raise RenderError(f"sites named twice: {names}")
    regions = [s for s in sites if not s.is_witness]
    if len(regions) != 2 or len(sites) != 3:
        raise RenderError(f"two regions and a witness, not {[t for t in texts]}")
    return sites


def site_named(sites: Sequence[Site], name: str) -> Site:
    for site in sites:
        if site.name == name:
            return site
    raise RenderError(f"no site {name!r} among {[s.name for s in sites]}")


def passwords_from(env: Mapping[str, str]) -> dict[str, str]:
    missing = [var for var in PASSWORD_VARIABLES.values() if not env.get(var)]
    if missing:
        raise RenderError(f"{', '.join(missing)} not set: Patroni's users need their passwords")
    return {user: env[var] for user, var in PASSWORD_VARIABLES.items()}


def patroni_settings(args: argparse.Namespace, env: Mapping[str, str]) -> dict[str, Any]:
    """What ``render patroni`` writes: :func:`topology.patroni_config` of the named site."""
    sites = parse_sites(args.site, hba_address=args.hba_address)
    return patroni_config(
        site_named(sites, args.name),
        sites,
        data_dir=Path(args.data_dir),
        bin_dir=Path(args.bin_dir),
        passwords=passwords_from(env),
        socket_dir=Path(args.socket_dir) if args.socket_dir else None,
        client_networks=tuple(args.client_network or ("127.0.0.1/32",)),
    )


def etcd_member_command(args: argparse.Namespace) -> list[str]:
    """What ``render etcd`` prints or runs: :func:`topology.etcd_command` of the named site."""
    sites = parse_sites(args.site)
    return etcd_command(site_named(sites, args.name), sites, Path(args.data_dir))


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m tidegate.control.ha.render", description=__doc__.split("\n\n")[0])
    kinds = top.add_subparsers(dest="kind", required=True)
    for kind, what in (("patroni", "Patroni's settings of a region"), ("etcd", "a site's etcd member")):
        sub = kinds.add_parser(kind, help=what)
        sub.add_argument("name", help="the site this host or container is")
        sub.add_argument("--site", action="append", required=True, help="NAME:PG_HOST[:ETCD_HOST], every site")
        sub.add_argument("--data-dir", required=True)
    patroni = kinds.choices["patroni"]
    patroni.add_argument("--bin-dir", required=True, help="PostgreSQL's programs")
    patroni.add_argument("--socket-dir", help="PostgreSQL's socket directory (default: PostgreSQL's own)")
    patroni.add_argument("--client-network", action="append", help="pg_hba address of clients (repeatable)")
    patroni.add_argument("--hba-address", help="pg_hba address of the regions' hosts (default: each host)")
    patroni.add_argument("--out", help="write here, readable by its owner only (default: print)")
    kinds.choices["etcd"].add_argument("--exec", action="store_true", help="run the member instead of printing")
    return top


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.kind == "etcd":
            command = etcd_member_command(args)
            if args.exec:
                os.execvp(command[0], command)
            print(json.dumps(command))
            return 0
        text = json.dumps(patroni_settings(args, os.environ if env is None else env), indent=2) + "\n"
    except RenderError as exc:
        print(f"render: {exc}", file=sys.stderr)
        return 2
    if args.out:
        fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # it holds the passwords, also when it was there before
        with os.fdopen(fd, "w") as out:
            out.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
