"""The programs the replicated control database runs, and where this host has them:
PostgreSQL's server binaries, etcd (the pinned build, else Debian's) and the pinned Patroni.
``scripts/prerequisites.sh`` installs them; :func:`missing_programs` names what is missing."""

from __future__ import annotations

import glob
import logging
import os
import re
import shutil
from pathlib import Path

from tidegate.errors import TidegateError
from tidegate.storage.seaweedfs import cache_dir

CHECKOUT = Path(__file__).resolve().parents[4]  # src/tidegate/control/ha/programs.py → the checkout
ETCD_GO_MOD = CHECKOUT / "tools" / "etcd" / "go.mod"
_log = logging.getLogger(__name__)


class ClusterError(TidegateError):
    """The local replicated control database did not reach the state asked for."""


def pg_bin_dir() -> Path:
    """PostgreSQL's server binaries: Debian's newest ``/usr/lib/postgresql/N/bin``."""
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(candidate, "pg_rewind").exists():
            return Path(candidate)
    raise ClusterError(
        "PostgreSQL's server binaries (initdb, pg_rewind) were not found under /usr/lib/postgresql",
        "install them: `apt-get install -y postgresql` (scripts/prerequisites.sh does this)",
    )


def etcd_binary() -> Path | None:
    """The etcd that ``scripts/etcd.sh`` built at the version ``tools/etcd/go.mod`` pins,
    or None when it is not built (the same place the script uses)."""
    pinned = re.search(r"^require go\.etcd\.io/etcd/server/v3 (v\S+)", ETCD_GO_MOD.read_text(), re.M)
    if pinned is None:
        return None
    path = cache_dir() / "etcd" / pinned.group(1) / "etcd"
    return path if os.access(path, os.X_OK) else None


def etcd_program() -> str:
    """The etcd the cluster runs: the pinned build, else Debian's (3.4.23, which lets a
    stale raft leader revoke leases — decision 0015), with a warning saying so."""
    built = etcd_binary()
    if built is not None:
        return str(built)
    _log.warning(
        "etcd: the pinned build is missing (run `bash scripts/etcd.sh`); using Debian's %s, "
        "which decision 0015 does not vouch for across a partition",
        shutil.which("etcd") or "etcd",
    )
    return "etcd"


PATRONI_HOME = Path("/var/cache/tidegate/patroni")  # scripts/patroni.sh installs there


def patroni_program() -> str | None:
    """The pinned Patroni that scripts/patroni.sh installs (``$TIDEGATE_PATRONI_HOME``, default
    :data:`PATRONI_HOME`), else none: releases before 3.0.3 — Debian 12's is 3.0.2 — write the
    leader key without comparing it, so a primary cut off by a partition may take it back when
    the partition heals (decision 0015)."""
    program = Path(os.environ.get("TIDEGATE_PATRONI_HOME") or PATRONI_HOME) / "bin" / "patroni"
    return str(program) if program.exists() else None


def missing_programs() -> list[str]:
    """The programs this cluster needs that are not installed (empty when it can run)."""
    missing = [name for name in ("etcdctl",) if shutil.which(name) is None]
    if patroni_program() is None:
        missing.append("patroni (bash scripts/patroni.sh)")
    if etcd_binary() is None and shutil.which("etcd") is None:
        missing.insert(0, "etcd")
    try:
        pg_bin_dir()
    except ClusterError:
        missing.append("postgresql")
    return missing
