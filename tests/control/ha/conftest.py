"""The replicated control database of the failover tests: started once per session.

Three sites as local processes (:class:`tidegate.control.ha.cluster.LocalCluster`): east
and west run PostgreSQL under Patroni, all three run an etcd member. Skipped where etcd,
Patroni or PostgreSQL are not installed (failed under ``CI``: scripts/prerequisites.sh
installs them).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def ha_cluster():
    from tidegate.control.ha.cluster import LocalCluster
    from tidegate.control.ha.programs import missing_programs

    missing = missing_programs()
    if missing:
        message = f"the replicated control database needs {', '.join(missing)}: run scripts/prerequisites.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    folder = Path(tempfile.mkdtemp(prefix="tidegate-ha-"))
    cluster = LocalCluster(folder).start()
    yield cluster
    cluster.stop()
    shutil.rmtree(folder, ignore_errors=True)
