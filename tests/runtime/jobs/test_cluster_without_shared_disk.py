"""A controlled job whose executors share no disk with its driver.

The east region's master is a Spark standalone cluster of one worker, and its storage root is
``s3a://tidegate-east/…`` on its own SeaweedFS store (tests/s3.py). The worker runs in a mount
namespace of its own (tidegate.spark.tools.cluster.isolation): everything pytest made — this
test's folder with the platform's home, its control database, the driver's work folder and
logs, the stores' own data — is covered by an empty tmpfs, so the worker, its executors and
their Python workers see none of it; the worker's working directory is a folder of its own.
Only the embedded event log's folder is bound back, read-only: its executors read the log's
segment files by path (docs/guide/configuration.md, "Executors on other hosts", says what that
asks of a cluster). The worker is started before the region's keys are set, so the executors
reach the store with what the driver's Spark settings carry, nothing of their own environment.

An application of its own on the same worker proves the isolation from inside an executor:
a marker file beside the driver's home is absent there, the log's folder lists the same
files and refuses writes. The job then runs over the log, stops, and its output read back
through the reader equals the batch path row for row; its tasks ran on the worker's executor.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from platform_support import MIN, fill, first_arrival
from s3 import BUCKETS, assert_east_equals_batch_path, region_env, run_batch_path, spark_child
from support import running_cluster
from tidegate.spark.tools.cluster.isolation import WorkerView, check_available
from tidegate.spark.tools.cluster.standalone import StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.slow]
JOB = "device-fleet-counts"
EVENTS = 3_000  # two micro-batches: the second reads the state the first wrote on the store
APP = f"tidegate-{JOB}-east"  # the driver's application name (tidegate.runtime.jobs.driver)
# one worker of two cores: the job's executor takes one, the probe's the other, side by side
JOB_EXECUTOR = {"spark.executor.cores": "1", "spark.cores.max": "1", "spark.executor.memory": "1g"}
PROBE_EXECUTOR = {"spark.executor.cores": "1", "spark.cores.max": "1", "spark.executor.memory": "512m"}

# run by a driver of its own: what one task on the cluster's executor sees of the driver's files
_PROBE = """
import json, os, sys
from tidegate.spark.session import build_session

args = json.loads(sys.argv[1])
spark = build_session("tidegate-no-shared-disk-probe", master=args["master"], conf=args["conf"])

def look(_):
    import os
    try:
        with open(os.path.join(args["event_log"], "written-by-an-executor"), "w"):
            pass
        event_log_write = "written"
    except OSError as refused:
        event_log_write = refused.strerror
    return {"exists": {p: os.path.exists(p) for p in args["driver_only"]},
            "event_log_files": sorted(os.listdir(args["event_log"])), "event_log_write": event_log_write,
            "store_env": sorted(k for k in os.environ if k.startswith(("TIDEGATE_S3", "AWS_ACCESS", "AWS_SECRET"))),
            "cwd": os.getcwd(), "mount_namespace": os.readlink("/proc/self/ns/mnt")}

print("PROBE " + json.dumps(spark.sparkContext.parallelize([0], 1).map(look).collect()[0]), flush=True)
spark.stop()
"""


def mount_namespaces_or_skip() -> None:
    try:
        check_available()
    except Exception as missing:  # noqa: BLE001 - the reason goes to the skip or the failure
        if os.environ.get("CI"):
            pytest.fail(str(missing))
        pytest.skip(str(missing))


@pytest.fixture
def log(tmp_path):
    """The embedded event log, in the driver's folder."""
    return fill(tmp_path / "event-log", EVENTS, seed=11)


@pytest.fixture
def worker_host():
    """The worker's own disk: a folder outside everything pytest made, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="tidegate-worker-host-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def cluster(log, tmp_path_factory, worker_host):
    """One worker of two cores that sees nothing pytest made but the log's folder (read-only).
    Yielded once the master is up: the worker registers while the platform starts. Stopped
    when the test ends, and checked to leave no process behind."""
    mount_namespaces_or_skip()
    view = WorkerView(hidden=(tmp_path_factory.getbasetemp(),), read_only=(log.root,))
    with running_cluster(StandaloneCluster(workers=1, cores_per_worker=2, memory="2g",
                                           work_dir=worker_host / "cluster", worker_view=view)) as cluster:  # fmt: skip
        yield cluster


@pytest.fixture
def reference(s3_stores, tmp_path):
    """``start(platform, spec)`` runs the batch path in a Spark child, in a thread, while the
    job runs; ``get()`` waits for the child and the folder of the batch path's output. A
    child the test did not take is closed at the end."""

    class Reference:
        future = None

        def start(self, platform, spec: Path):
            def run():
                child = spark_child(s3_stores, tmp_path)
                try:
                    return child, run_batch_path(child, platform, tmp_path, spec)
                except BaseException:
                    child.close()
                    raise

            self.future = ThreadPoolExecutor(1).submit(run)

        def get(self):
            got, self.future = self.future.result(timeout=600), None
            return got

    reference = Reference()
    yield reference
    if reference.future is not None:
        try:
            reference.future.result(timeout=600)[0].close()
        except Exception:  # noqa: BLE001 - the test's own failure is what matters; the child is gone
            pass


def start_probe(cluster: StandaloneCluster, args: dict, log_file: Path) -> subprocess.Popen:
    """A driver of its own on ``cluster`` running :data:`_PROBE` with ``args``."""
    args = {"master": cluster.master_url, "conf": cluster.driver_conf(quick_jvms=True) | PROBE_EXECUTOR} | args
    with open(log_file, "w") as out:
        return subprocess.Popen([sys.executable, "-c", _PROBE, json.dumps(args)], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip


def probe_result(probe: subprocess.Popen, log_file: Path) -> dict:
    try:
        assert probe.wait(timeout=240) == 0, log_file.read_text()[-4000:]
    finally:
        if probe.poll() is None:
            os.killpg(probe.pid, signal.SIGKILL)
            probe.wait()
    lines = [line for line in log_file.read_text().splitlines() if line.startswith("PROBE ")]
    return json.loads(lines[-1].removeprefix("PROBE "))


def test_a_job_whose_executors_cannot_see_the_drivers_disk_writes_its_lineage_to_s3_and_equals_the_batch_path(
    cluster, log, s3_stores, platform_factory, reference, tmp_path, tmp_path_factory, monkeypatch
):
    event_log = log.root
    for name, value in region_env("east", s3_stores["east"]).items():
        monkeypatch.setenv(name, value)  # the controller's and the driver's: the worker started without them
    # the driver's scratch (its Python's, its JVM's, Spark's block manager's) in its own folder
    # too, hidden from the worker: nothing may travel through /tmp either
    scratch = tmp_path / "driver-scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    root = f"s3a://{BUCKETS['east']}/platform-{time.time_ns()}"
    conf = cluster.driver_conf(quick_jvms=True) | JOB_EXECUTOR
    conf["spark.local.dir"] = str(scratch)  # the driver's only: a worker gives its executors folders of its own
    conf["spark.driver.extraJavaOptions"] += f" -Djava.io.tmpdir={scratch}"
    p = platform_factory("cluster", event_log, env={
        "TIDEGATE_REGION_EAST_STORAGE": root, "TIDEGATE_REGION_EAST_MASTER": cluster.master_url,
        "TIDEGATE_REGION_EAST_SPARK_CONF": ",".join(f"{k}={v}" for k, v in conf.items())})  # fmt: skip
    east = p.config.region("east")
    marker = tmp_path / "driver-only.marker"
    marker.write_text("on the driver's disk only")
    east.work.mkdir(parents=True, exist_ok=True)  # the driver's work folder: its logs go there
    driver_only = [str(marker), str(p.root), str(east.work), p.config.control_db.removeprefix("sqlite:///")]
    assert all(Path(path).exists() for path in driver_only) and east.on_object_store
    probe = start_probe(cluster, {"event_log": str(event_log), "driver_only": driver_only}, tmp_path / "probe.log")

    spec = p.spec_file(source={"event_log": str(event_log), "max_events_per_batch": EVENTS // 2})
    p.controller.deploy(spec)
    t = first_arrival(log) + 8 * MIN
    p.controller.start(JOB, "east", mode="custom", at=t)
    reference.start(p, spec)  # the batch path, in a local Spark child, while the job runs
    cluster.wait_for_workers()  # long done by now; else it raises with the worker's log
    seen = probe_result(probe, tmp_path / "probe.log")
    p.wait_caught_up(JOB, "east")
    p.controller.stop(JOB, "east")

    # inside an executor: the driver's files are not there; the log is, read-only
    assert seen["exists"] == dict.fromkeys(driver_only, False), seen
    assert seen["event_log_files"] == sorted(os.listdir(event_log)) and seen["event_log_files"], seen
    assert seen["event_log_write"] == "Read-only file system", seen
    assert seen["store_env"] == [], seen  # the store's keys reach executors only in the driver's settings
    assert Path(seen["cwd"]).is_relative_to(cluster.work_dir / "worker-0"), seen
    assert not Path(seen["cwd"]).is_relative_to(tmp_path_factory.getbasetemp())
    assert seen["mount_namespace"] != os.readlink("/proc/self/ns/mnt")

    # the job's tasks ran on the worker's executor, and its lineage is on the store only
    assert cluster.tasks_run(cluster.app_ids()[APP]) > 0
    lineage = p.controller.db.lineage(p.controller.db.latest_run(JOB, "east").lineage)
    assert lineage.root.startswith(f"{root}/jobs/{JOB}/lineages/")
    assert not (east.work / "jobs" / JOB / "lineages").exists()

    child, batch = reference.get()
    assert_east_equals_batch_path(s3_stores, p, JOB, t, tmp_path, child=child, batch=batch)
