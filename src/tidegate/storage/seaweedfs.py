"""A local S3-compatible store: SeaweedFS's ``weed server -s3`` on loopback, one per region.

SeaweedFS (Apache-2.0) is built from source by ``scripts/seaweedfs.sh`` at the version pinned
in ``tools/seaweedfs/go.mod`` and cached outside the checkout, in
``${TIDEGATE_CACHE:-~/.cache/tidegate}/seaweedfs/<version>/weed``. A :class:`LocalS3Server`
runs one store in a folder of its own: master, volume server, filer and S3 gateway in one
process, every port on 127.0.0.1, one identity whose keys it makes up, telemetry off. It can
be stopped (the region's store is lost) and started again on the same folder and ports (the
store is back, with what it held).

Free of pyspark; pyarrow is imported when a bucket is made.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path

from tidegate.errors import ConfigError
from tidegate.storage.s3 import S3Credentials, S3Settings

CACHE_ENV = "TIDEGATE_CACHE"
CHECKOUT = Path(__file__).resolve().parents[3]  # src/tidegate/storage/seaweedfs.py → the checkout
GO_MOD = CHECKOUT / "tools" / "seaweedfs" / "go.mod"
_REQUIRE = re.compile(r"^require github\.com/seaweedfs/seaweedfs (v\S+)", re.M)
_PORTS = ("master", "master.grpc", "volume", "volume.grpc", "filer", "filer.grpc", "s3", "s3.grpc")


def pinned_version() -> str:
    found = _REQUIRE.search(GO_MOD.read_text()) if GO_MOD.is_file() else None
    if found is None:
        raise ConfigError(
            f"no SeaweedFS version pinned in {GO_MOD}", "restore tools/seaweedfs/go.mod from the repository"
        )
    return found.group(1)


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where setup caches what it builds (the same rule as ``scripts/seaweedfs.sh``)."""
    env = os.environ if env is None else env
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    return Path(env.get("XDG_CACHE_HOME") or Path(env.get("HOME") or Path.home()) / ".cache") / "tidegate"


def binary_path(env: Mapping[str, str] | None = None) -> Path:
    return cache_dir(env) / "seaweedfs" / pinned_version() / "weed"


def binary(env: Mapping[str, str] | None = None) -> Path:
    """The built ``weed``; a ConfigError saying how to build it when it is missing."""
    path = binary_path(env)
    if not os.access(path, os.X_OK):
        raise ConfigError(
            f"SeaweedFS {pinned_version()} is not built ({path} is missing)",
            "run `bash scripts/seaweedfs.sh` (needs Go; the first build downloads ~3.7 GB of modules and "
            "takes minutes; `bash scripts/test.sh` runs it)",
        )
    return path


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1 (held together while picked)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class LocalS3Server:
    """One SeaweedFS store in ``root`` (created), serving S3 on 127.0.0.1 at :attr:`endpoint`."""

    def __init__(self, root: Path, *, name: str = "s3", region: str = "us-east-1") -> None:
        self.name = name
        self.root = Path(root)
        self.region = region
        self.ports = dict(zip(_PORTS, free_ports(len(_PORTS)), strict=True))
        self.credentials = S3Credentials(f"tidegate-{name}", secrets.token_hex(20))
        self.process: subprocess.Popen | None = None
        self.buckets: set[str] = set()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    @property
    def log(self) -> Path:
        return self.root / "weed.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def settings(self, **more) -> S3Settings:
        """How a client reaches this store: path-style, plain HTTP, its own keys."""
        return S3Settings(
            endpoint=self.endpoint, region=self.region, path_style=True, credentials=self.credentials, **more
        )

    def command(self) -> list[str]:
        p = self.ports
        return [
            str(binary()),
            "server",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-dir={self.root / 'data'}",
            f"-master.port={p['master']}",
            f"-master.port.grpc={p['master.grpc']}",
            f"-volume.port={p['volume']}",
            f"-volume.port.grpc={p['volume.grpc']}",
            f"-filer.port={p['filer']}",
            f"-filer.port.grpc={p['filer.grpc']}",
            f"-filer.localSocket={self.root / 'filer.sock'}",
            "-filer",
            "-s3",
            f"-s3.port={p['s3']}",
            f"-s3.port.grpc={p['s3.grpc']}",
            f"-s3.localSocket={self.root / 's3.sock'}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",  # catalogs Tidegate does not use
            f"-s3.config={self.root / 's3.json'}",
            # small volumes, as many as the disk holds: a test store stays small
            "-master.volumeSizeLimitMB=64",
            "-volume.max=0",
            "-volume.preStopSeconds=0",  # stopped means gone: no grace period for the master to notice
            # one master, no peers: elected at once when it starts again on its folder (default 10 s)
            "-master.electionTimeout=1s",
            # no statistics leave the machine
            "-master.telemetry=false",
            "-master.telemetry.url=http://127.0.0.1:9/",
        ]

    def start(self, timeout_s: float = 60.0) -> LocalS3Server:
        """Start (or start again) and wait until its buckets can be written; idempotent."""
        self.launch()
        return self.wait_ready(timeout_s)

    def launch(self) -> LocalS3Server:
        """Start the process without waiting for it (:meth:`wait_ready` waits)."""
        if self.running:
            return self
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        identity = {
            "name": self.credentials.access_key_id,
            "credentials": [
                {"accessKey": self.credentials.access_key_id, "secretKey": self.credentials.secret_access_key}
            ],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"],
        }
        config = self.root / "s3.json"
        config.write_text(json.dumps({"identities": [identity]}))
        config.chmod(0o600)
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        return self

    def wait_ready(self, timeout_s: float = 60.0) -> LocalS3Server:
        """Wait until S3 answers and every bucket it held takes a write (after a restart the
        first write waits for the master to hand out volumes again: seconds)."""
        try:
            self._wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def create_bucket(self, bucket: str, timeout_s: float = 30.0) -> str:
        """Make ``bucket`` (retried while the store finishes starting); returns its name."""
        from tidegate.storage.aws import arrow_filesystem

        settings = self.settings(attempts=1, connect_timeout_s=2, request_timeout_s=10)
        fs = arrow_filesystem(settings, allow_bucket_creation=True)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fs.create_dir(bucket)
                with fs.open_output_stream(f"{bucket}/.tidegate-probe") as out:  # a volume is assigned
                    out.write(b"ok")
                fs.delete_file(f"{bucket}/.tidegate-probe")
                self.buckets.add(bucket)
                return bucket
            except OSError as failed:
                if time.monotonic() > deadline or not self.running:
                    raise RuntimeError(
                        f"S3 store {self.name}: bucket {bucket} could not be made: {failed}\n{self._log_tail()}"
                    ) from failed
                time.sleep(0.3)

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop the server, killed if it has not exited ``timeout_s`` after SIGTERM (its shutdown
        lingers); its folder stays, and :meth:`start` brings the same store back."""
        if self.process is None:
            return
        if self.process.poll() is None:
            for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
                try:
                    os.killpg(self.process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.process.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self.process = None
        # its gRPC services also listen on unix sockets in /tmp named by port; a killed server leaves them
        for port in (p for name, p in self.ports.items() if name.endswith("grpc")):
            for leftover in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                leftover.unlink(missing_ok=True)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if not self.running:
                raise RuntimeError(f"S3 store {self.name} exited at start:\n{self._log_tail()}")
            if self._answers():
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"S3 store {self.name} did not answer within {timeout_s:.0f} s:\n{self._log_tail()}")
            time.sleep(0.2)
        for bucket in sorted(self.buckets):  # after a restart: the store must serve what it held
            self.create_bucket(bucket, timeout_s=max(5.0, deadline - time.monotonic()))

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(self.endpoint + "/", timeout=2).close()
        except urllib.error.HTTPError:
            return True  # 403 to an unsigned request: the gateway is up
        except OSError:
            return False
        return True

    def _log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def start_stores(root: Path, names: Iterable[str], buckets: Mapping[str, str]) -> dict[str, LocalS3Server]:
    """One started store per name in its own folder under ``root``, each with its bucket."""
    stores: dict[str, LocalS3Server] = {}
    try:
        for name in names:  # started side by side: each spends seconds waiting on itself
            stores[name] = LocalS3Server(Path(root) / name, name=name).launch()
        for name, store in stores.items():
            store.wait_ready()
            store.create_bucket(buckets[name])
    except BaseException:
        for store in stores.values():
            store.stop()
        raise
    return stores
