"""A job on a real Spark standalone cluster (one master, two workers, client-mode driver)
emits the same rows as the same job in local mode — and its tasks really ran on both
workers' executors, not in the driver."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from support import running_cluster
from tidegate.inputs.event_log import EventLog
from tidegate.inputs.event_log.generator import GeneratorConfig, generate
from tidegate.jobspec import load_spec
from tidegate.spark.pipeline.runner import run_stream
from tidegate.spark.tools.cluster.job import start_cluster_job
from tidegate.spark.tools.cluster.standalone import StandaloneCluster
from tidegate.spark.tools.compare import compare

pytestmark = [pytest.mark.spark, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[4]
WORKERS = 2
# two micro-batches: the second reads the state the first wrote, from executors on either worker
EVENTS, PER_BATCH = 3_000, 1_500
LOG_PARTITIONS = 2  # one source task per executor: each stage's tasks cost more than its events


@pytest.fixture
def cluster(tmp_path):
    """A master and two 1-core workers, children of this process; stopped by PID (process
    group) when the test ends, pass or fail, and checked to leave no process behind.
    Yielded once the master is up: the workers register while the driver starts (it waits
    for their executors), which saves one JVM start-up of wall time."""
    with running_cluster(StandaloneCluster(workers=WORKERS, cores_per_worker=1, memory="1g",
                                           work_dir=tmp_path / "cluster")) as cluster:  # fmt: skip
        yield cluster


def fill(event_log: Path) -> None:
    log = EventLog.create(event_log, partitions=LOG_PARTITIONS, clock="manual")
    generate(log, GeneratorConfig(devices=12, partitions=LOG_PARTITIONS, events=EVENTS, seed=11, mode="backfill",
                                  rate_per_s=5.0, idle_partitions=1, late_fraction=0.03,
                                  early_fraction=0.01, malformed_fraction=0.01))  # fmt: skip


def finished_app(cluster: StandaloneCluster, app_id: str) -> dict:
    # the driver has exited; the master files the application under completed shortly after
    deadline = time.monotonic() + 15
    while True:
        apps = {a["id"]: a for a in cluster.state()["completedapps"]}
        if app_id in apps or time.monotonic() > deadline:
            return apps.get(app_id, {})
        time.sleep(0.2)


def test_a_job_on_a_two_worker_standalone_cluster_equals_local_mode(spark, cluster, tmp_path):
    spec_path = REPO / "jobs" / "device_fleet.yaml"
    event_log = tmp_path / "event-log"
    fill(event_log)
    options = {"maxEventsPerBatch": str(PER_BATCH)}

    # the cluster driver is a process of its own (this one holds the local session); the
    # local run proceeds while it starts its JVM and waits for executors. Quick JVMs (C1
    # only, serial GC): half the CPU for a job this small, and the machine has 2 cores.
    with start_cluster_job(cluster.master_url, spec_path, event_log, tmp_path / "on-cluster",
                           conf=cluster.driver_conf(quick_jvms=True), executors=WORKERS,
                           extra_options=options) as job:  # fmt: skip
        local = run_stream(spark, load_spec(spec_path), event_log, tmp_path / "local", extra_options=options)
        cluster.wait_for_workers()  # long done by now; else it raises with the workers' log tails
        remote = job.wait(timeout_s=240)

    # the same job, the same rows
    assert remote.input_events == local.input_events == EVENTS
    assert remote.quarantined == local.quarantined > 0
    assert remote.batches == local.batches >= 2
    assert local.rows_emitted > 20
    diff = compare(spark.read.parquet(str(tmp_path / "local" / "output")),
                   spark.read.parquet(str(tmp_path / "on-cluster" / "output")))  # fmt: skip
    assert diff.equal, diff

    # … computed on the cluster: a client-mode driver of this master with one executor per
    # worker, and each worker's executor ran tasks of the job
    assert remote.master == cluster.master_url
    assert remote.executors == WORKERS, remote.executor_hosts
    assert cluster.state()["aliveworkers"] == WORKERS
    app = finished_app(cluster, remote.app_id)
    assert app.get("state") == "FINISHED", cluster.state()
    ran = [cluster.tasks_run(remote.app_id, worker=i) for i in range(WORKERS)]
    assert all(n > 0 for n in ran), f"tasks per worker: {ran}"
