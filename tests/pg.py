"""A throwaway PostgreSQL server for the tests: initdb + pg_ctl in a temp directory.

The binaries come from Debian's ``postgresql`` package (``scripts/test.sh`` installs it
when missing). PostgreSQL refuses to run as root, so as root the server runs as the
package's ``postgres`` user. Trust authentication on 127.0.0.1 only; the server is
stopped (and its directory removed) when the test session ends.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def _bin_dir() -> Path:
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(candidate, "initdb").exists():
            return Path(candidate)
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise RuntimeError(
        "PostgreSQL server binaries not found: the control database tests run against a real PostgreSQL — "
        "install it with `apt-get install -y postgresql` (scripts/test.sh does this)"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self) -> None:
        self.bin = _bin_dir()
        self.dir = Path(tempfile.mkdtemp(prefix="tidegate-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self.user = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name

    def _run(self, *args: str) -> subprocess.CompletedProcess:
        cmd = [str(a) for a in args]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=False)

    def start(self) -> PostgresServer:
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
        done = self._run(self.bin / "initdb", "-D", self.data, "-A", "trust", "-U", self.user, "--no-sync")
        if done.returncode:
            raise RuntimeError(f"initdb failed: {done.stderr or done.stdout}")
        opts = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        done = self._run(self.bin / "pg_ctl", "-D", self.data, "-l", self.dir / "server.log", "-o", opts, "-w", "start")
        if done.returncode:
            log = (self.dir / "server.log").read_text() if (self.dir / "server.log").exists() else ""
            raise RuntimeError(f"PostgreSQL did not start: {done.stderr or done.stdout}\n{log}")
        return self

    def create_database(self, name: str) -> str:
        deadline = time.monotonic() + 20
        while True:
            done = self._run(self.bin / "createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, name)
            if done.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"createdb {name} failed: {done.stderr}")
            time.sleep(0.3)
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        self._run(self.bin / "pg_ctl", "-D", self.data, "-m", "immediate", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)
