"""Real S3-compatible stores for the tests: one SeaweedFS server per region, on loopback.

``scripts/seaweedfs.sh`` (run by ``scripts/test.sh``) builds the server once and caches it
outside the checkout; without it the tests that need a store are skipped on a developer
machine and fail under ``CI`` (set by ``.ci/run``). Each region's store has its own folder,
ports, keys and bucket (``tidegate-east``, ``tidegate-west``). Losing a region is stopping
its server (``s3_stores["east"].stop()``); ``start()`` brings the same store back, with what
it held, :func:`start_empty` one that lost everything. A test that stopped one gets it
started again when it ends.

Also here: a Spark session in a child process — its JVM needs the hadoop-aws jars on the class path
when it starts, which the test process's shared session may already have started without.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REGIONS = ("east", "west")
BUCKETS = {region: f"tidegate-{region}" for region in REGIONS}


def require_weed() -> Path:
    """The built SeaweedFS binary; skips the test without it (fails it under CI)."""
    from tidegate.errors import ConfigError
    from tidegate.storage import seaweedfs

    try:
        return seaweedfs.binary()
    except ConfigError as missing:
        if os.environ.get("CI"):
            pytest.fail(str(missing))
        pytest.skip(str(missing))


@pytest.fixture(scope="session")
def _s3_servers(tmp_path_factory):
    require_weed()
    from tidegate.storage.seaweedfs import start_stores

    stores = start_stores(tmp_path_factory.mktemp("s3-stores"), REGIONS, BUCKETS)
    yield stores
    for store in stores.values():
        store.stop()


@pytest.fixture
def s3_stores(_s3_servers):
    """``{"east": LocalS3Server, "west": LocalS3Server}``, both running; any the test stopped
    is started again afterwards."""
    for store in _s3_servers.values():
        store.start()
    yield _s3_servers
    for store in _s3_servers.values():
        store.start()


def start_empty(store) -> None:
    """Bring a stopped store back having lost everything: its data folder wiped, then started —
    the same endpoint and keys, its buckets made again as a replacement store is provisioned
    with them, nothing in them. Every other test keeps its data under a prefix of its own and
    reads nothing an earlier test wrote, so none loses what it still reads."""
    import shutil

    assert not store.running, "stop the store before it loses everything"
    shutil.rmtree(store.root / "data")
    store.start()


@dataclass(frozen=True)
class EastStorage:
    """Where the east region keeps its lineages in a test: ``kind`` is ``local`` (its folder
    under the platform's root) or ``s3`` (``s3a://tidegate-east/…`` on its own store, keys in
    ``TIDEGATE_S3_EAST_*``); ``env`` is what :func:`platform_factory` adds for it."""

    kind: str
    env: dict[str, str]
    stores: dict | None = None

    @property
    def on_s3(self) -> bool:
        return self.kind == "s3"

    def assert_equals_batch_path(
        self,
        platform,
        job: str,
        t_us: int,
        cwd: Path,
        *,
        spec: Path | None = None,
        from_us: int | None = None,
        min_rows: int = 50,
    ) -> None:
        """On an S3 root: the east region's output, windows ending after ``t_us``, equals the
        batch path row for row (compared in a Spark child, which can read ``s3a://``)."""
        assert_east_equals_batch_path(
            self.stores, platform, job, t_us, cwd, spec=spec, from_us=from_us, min_rows=min_rows
        )


@pytest.fixture(params=["local", "s3"])
def east_storage(request, monkeypatch) -> EastStorage:
    """The test once with the east region on a local root, once on an S3 one."""
    if request.param == "local":
        return EastStorage("local", {})
    stores = request.getfixturevalue("s3_stores")
    for name, value in region_env("east", stores["east"]).items():
        monkeypatch.setenv(name, value)  # the controller's and, through its allowlist, the driver's
    root = f"s3a://{BUCKETS['east']}/platform-{time.time_ns()}"
    return EastStorage("s3", {"TIDEGATE_REGION_EAST_STORAGE": root}, stores)


def region_env(region: str, store) -> dict[str, str]:
    """The environment through which region ``region`` reaches ``store`` (a LocalS3Server), as an
    operator sets it: ``TIDEGATE_S3_<REGION>_*``, never the spec or the storage root."""
    settings = store.settings()
    prefix = f"TIDEGATE_S3_{region.upper()}_"
    return {
        prefix + "ENDPOINT": settings.endpoint,
        prefix + "REGION": settings.region,
        prefix + "PATH_STYLE": "true",
        prefix + "ACCESS_KEY_ID": settings.credentials.access_key_id,
        prefix + "SECRET_ACCESS_KEY": settings.credentials.secret_access_key,
        prefix + "CONNECT_TIMEOUT_S": str(settings.connect_timeout_s),
        prefix + "REQUEST_TIMEOUT_S": str(settings.request_timeout_s),
        prefix + "ATTEMPTS": str(settings.attempts),
    }


# -- a Spark session in a child process ----------------------------------------------------------


class SparkChild:
    """A child process holding a Spark session built with ``conf``; :meth:`run` executes a
    snippet there with ``spark`` and the given names in scope and returns its ``result``."""

    def __init__(self, conf: dict[str, str], cwd: Path) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent), env.get("PYTHONPATH")]))
        self.process = subprocess.Popen(
            [sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=cwd, env=env
        )
        self.run("result = True", conf=conf, _start=True)

    def run(self, code: str, timeout_s: float = 300.0, **names):
        self.process.stdin.write(json.dumps({"code": code, "names": names}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()  # the child answers every line, or dies
        if not line:
            raise RuntimeError(f"the Spark child exited ({self.process.wait(timeout_s)})")
        answer = json.loads(line)
        if "error" in answer:
            raise ChildError(answer["error"])
        return answer["result"]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# in the child: the batch path over the whole log, written under ``scratch``
_BATCH_PATH = """
from pathlib import Path
from tidegate.jobspec import load_spec
from tidegate.spark.pipeline.runner import run_batch

run_batch(spark, load_spec(Path(spec), log_dirs=[Path(d) for d in log_dirs]), Path(event_log), Path(scratch))
result = True
"""

# in the child: the batch path's output and the east region's output through the reader,
# compared on the windows ending after the first output time
_COMPARE = """
from pathlib import Path
from pyspark.sql import functions as F
from tidegate.control.db import ControlDB
from tidegate.lineage.layout import LAYOUT_COLUMNS, JobPaths
from tidegate.runtime.outputs.reader import read_region
from tidegate.spark.tools.compare import compare

reference = spark.read.parquet(str(JobPaths(Path(scratch)).output)).drop(*LAYOUT_COLUMNS)
reference = reference.where(F.unix_micros("window_end") > F.lit(t_us))
ours = read_region(spark, ControlDB(control_db), job, "east", from_us=from_us)
diff = compare(reference, ours.select(*reference.columns))
result = {"equal": diff.equal, "diff": str(diff), "rows": ours.count()}
"""


def spark_child(stores: dict, cwd: Path) -> SparkChild:
    """A Spark child with every store's settings (``stores``: region → server), working in ``cwd``."""
    from tidegate.storage.spark import session_conf

    return SparkChild(session_conf({BUCKETS[r]: s.settings() for r, s in stores.items()}), cwd=cwd)


def run_batch_path(child: SparkChild, platform, cwd: Path, spec: Path | None = None) -> Path:
    """The batch path of ``spec`` (default the platform's ``spec_file()``) over the platform's
    whole log, run in ``child``; the folder of its output."""
    scratch = cwd / f"batch-{time.time_ns()}"
    log_dirs = [str(d) for d in platform.config.log_dirs]  # the platform's event-log folders, as its operator set them
    child.run(
        _BATCH_PATH,
        spec=str(spec or platform.spec_file()),
        event_log=str(platform.event_log),
        scratch=str(scratch),
        log_dirs=log_dirs,
    )
    return scratch


def assert_east_equals_batch_path(
    stores: dict,
    platform,
    job: str,
    t_us: int,
    cwd: Path,
    child: SparkChild | None = None,
    batch: Path | None = None,
    *,
    spec: Path | None = None,
    from_us: int | None = None,
    min_rows: int = 50,
) -> None:
    """The east region's output of ``job`` (through the reader, windows ending after ``from_us``
    when given) equals, row for row, the batch path of ``spec`` (default the platform's first
    spec) over the platform's whole log, on the windows ending after ``t_us``, and holds more
    than ``min_rows`` rows; compared in a Spark child with every store's settings — ``child``,
    one started earlier (whose :func:`run_batch_path` may have made ``batch`` already, while the
    job ran), or a new one — closed afterwards."""
    child = child or spark_child(stores, cwd)
    try:
        batch = batch or run_batch_path(child, platform, cwd, spec)
        found = child.run(
            _COMPARE, scratch=str(batch), control_db=platform.config.control_db, job=job, t_us=t_us, from_us=from_us
        )
    finally:
        child.close()
    assert found["equal"], found["diff"]
    assert found["rows"] > min_rows, found["rows"]


class ChildError(Exception):
    """What a snippet raised in the Spark child (its type and message)."""


def _child_main() -> None:  # pragma: no cover - runs in the child
    answers = os.fdopen(os.dup(1), "w")  # the answers' own pipe: the JVM inherits fd 1 and may print
    os.dup2(2, 1)
    scope: dict = {}
    for line in sys.stdin:
        request = json.loads(line)
        names = request["names"]
        try:
            if names.pop("_start", False):
                from tidegate.spark.session import build_session

                scope["spark"] = build_session("tidegate-s3-tests", master="local[2]", conf=names.pop("conf"))
            local = dict(scope, **names)
            started = time.monotonic()
            exec(request["code"], local)
            answer = {"result": local.get("result"), "elapsed_s": time.monotonic() - started}
        except Exception as failed:  # noqa: BLE001 - reported to the test
            answer = {"error": f"{type(failed).__name__}: {failed}"}
        print(json.dumps(answer, default=str), file=answers, flush=True)
    if "spark" in scope:
        scope["spark"].stop()


if __name__ == "__main__":
    _child_main()
