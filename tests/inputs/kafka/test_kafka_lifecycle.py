"""A job on a real Kafka topic, through the real connector: stream = batch path; kill -9, then the
restart DAG = exactly once, checked by GX.

Traffic is the event log generator's (devices, skewed clocks, late/early events, malformed
payloads) written to a topic whose broker stamps append times, on the seconds-scale job
``jobs/device_fleet_seconds.yaml`` (a broker cannot be backfilled with an hour of arrivals).
"""

from __future__ import annotations

import pytest
import yaml

from platform_support import REPO
from tidegate.inputs.kafka.connections import BOOTSTRAP_ENV
from tidegate.inputs.kafka.log import KafkaLog
from tidegate.inputs.kafka.producer import TopicWriter
from tidegate.inputs.kafka.traffic import kafka_traffic
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import LAYOUT_COLUMNS
from tidegate.runtime.outputs.reader import read_region
from tidegate.spark.pipeline.runner import run_batch, run_stream
from tidegate.spark.tools.compare import compare

pytestmark = [pytest.mark.spark, pytest.mark.slow]
JOB = "device-fleet-seconds"
S = 1_000_000


def traffic(topic, events: int = 4_000, seed: int = 5) -> None:
    kafka_traffic(TopicWriter(topic), events=events, devices=12, rate_per_s=800, seed=seed)


def kafka_spec(topic, **source):
    data = yaml.safe_load((REPO / "jobs" / "device_fleet_seconds.yaml").read_text())
    data["source"] = {"kafka": {"bootstrap_servers": topic.bootstrap_servers, "topic": topic.topic}} | source
    data["window"]["size"] = "1s"  # 5 s of traffic: windows close while it lasts
    return data


@pytest.fixture(scope="module")
def fleet_topic(kafka_broker, tmp_path_factory):
    from tidegate.inputs.kafka.client import KafkaTopic
    from tidegate.inputs.kafka.topics import create_topic

    topic = KafkaTopic(kafka_broker.bootstrap, "fleet-lifecycle")
    create_topic(topic, 3)
    traffic(topic)
    return topic


@pytest.fixture(scope="module")
def reference(spark, fleet_topic, tmp_path_factory):
    """The batch path over the whole topic, read through Spark's own Kafka connector."""
    result = run_batch(
        spark, parse_spec(kafka_spec(fleet_topic)), fleet_topic, tmp_path_factory.mktemp("kafka-reference") / "batch"
    )
    return spark.read.parquet(str(result.paths.output)).drop(*LAYOUT_COLUMNS)


def test_the_stream_over_kafka_equals_the_batch_path_through_sparks_connector(spark, fleet_topic, reference, tmp_path):
    spec = parse_spec(kafka_spec(fleet_topic))
    result = run_stream(spark, spec, fleet_topic, tmp_path / "stream", extra_options={"maxEventsPerBatch": "700"})
    assert result.batches >= 5 and result.input_events == 4_000
    ours = spark.read.parquet(str(result.paths.output)).drop(*LAYOUT_COLUMNS)
    diff = compare(reference, ours)
    assert diff.equal, diff
    assert reference.count() > 12
    assert result.quarantined > 0  # the generator's malformed payloads: quarantined, not lost


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory):
    from airflow_support import migrate

    home = tmp_path_factory.mktemp("airflow")
    migrate(home)
    return home


def test_kill_9_then_the_restart_dag_resumes_a_kafka_job_exactly_once_and_gx_finds_it_complete(
    spark, platform_factory, airflow_home, fleet_topic, reference
):
    """kill -9 of the driver mid-stream, then ``tidegate_restart`` through ``airflow dags test``:
    the checkpoint is reused, the run catches up, the GX completeness suite passes against the
    batch path (Spark's connector, under spark-submit) and the output equals it row for row."""
    from pyspark.sql import functions as F

    from airflow_support import dags_test, tail

    # the operator configured the test's broker as the Kafka connection 'default': the spec names its brokers
    p = platform_factory(
        "kafka-kill", REPO / "var" / "unused-event-log", env={BOOTSTRAP_ENV: fleet_topic.bootstrap_servers}
    )
    spec_path = p.root / "fleet-kafka.yaml"
    spec_path.write_text(yaml.safe_dump(kafka_spec(fleet_topic, max_events_per_batch=1_000), sort_keys=False))
    p.controller.deploy(spec_path)
    log = KafkaLog(fleet_topic)
    t = min(i.first_arrival_us for i in log.describe() if i.first_arrival_us is not None) - S
    started = p.controller.start(JOB, "east", mode="custom", at=t)
    assert started.plan.starting_offsets == {0: 0, 1: 0, 2: 0}  # T − L reaches before the topic's start
    p.wait_batches(JOB, "east", 1)
    p.kill_driver(JOB, "east")
    assert p.controller.status_of(JOB, "east").state == "lost"
    done = dags_test(
        airflow_home, "tidegate_restart", {"job": JOB, "region": "east", "mode": "last-stopped"}, p.env, p.root
    )
    assert done.returncode == 0, tail(done)
    latest = p.controller.db.latest_run(JOB, "east")
    assert latest.id != started.run_id
    assert latest.checkpoint == "reused" and latest.lineage == started.plan.lineage_id
    check = p.controller.db.checks(JOB)[0]
    assert check.success and check.target == "east", check.summary
    p.controller.stop(JOB, "east")
    ours = read_region(spark, p.controller.db, JOB, "east")
    diff = compare(reference.where(F.unix_micros("window_end") > F.lit(t)), ours.select(*reference.columns))
    assert diff.equal, diff
