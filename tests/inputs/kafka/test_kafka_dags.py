"""The Airflow lifecycle of a Kafka job: deploy, failover, a region-loss drill and a planned
stop, each through ``airflow dags test``, with device traffic written to the topic before each.

One topic and one live pair (east and west reading it) for the whole module, taken
through the DAGs in order, as ``tests/dags/test_pair_dags.py`` takes a pair on the embedded
log. Each DAG's GX completeness tasks check the span it affected against the batch path
(Spark's Kafka connector, under spark-submit); at the end, with both regions read to the
end of the topic, the consumer view and the upgraded region are compared with the batch
path row for row.
"""

from __future__ import annotations

import json
import time

import pytest
import yaml
from pyspark.sql import functions as F

from airflow_support import dags_test, migrate, tail
from platform_support import REPO, Platform
from tidegate.eventtime.durations import format_time_us
from tidegate.inputs.kafka.client import KafkaTopic
from tidegate.inputs.kafka.connections import BOOTSTRAP_ENV
from tidegate.inputs.kafka.log import KafkaLog
from tidegate.inputs.kafka.producer import TopicWriter
from tidegate.inputs.kafka.topics import create_topic
from tidegate.inputs.kafka.traffic import kafka_traffic
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import LAYOUT_COLUMNS
from tidegate.runtime.outputs.reader import read_consumer_view, read_region
from tidegate.spark.pipeline.runner import run_batch
from tidegate.spark.tools.compare import compare

pytestmark = [pytest.mark.spark, pytest.mark.slow]
JOB = "device-fleet-seconds"
S = 1_000_000


def burst(topic: KafkaTopic, seed: int, events: int = 400) -> None:
    """Device traffic written to the topic before a DAG runs: the drivers have new records to
    read, and each recovery has records that arrived while its region was down."""
    kafka_traffic(TopicWriter(topic), events=events, devices=12, rate_per_s=400, seed=seed)


def readings(rows) -> int:
    """The events counted in the windows of ``rows``."""
    return rows.agg(F.sum("readings")).first()[0] or 0


def kafka_spec(topic: KafkaTopic, **changes) -> dict:
    data = yaml.safe_load((REPO / "jobs" / "device_fleet_seconds.yaml").read_text())
    data["source"] = {
        "kafka": {"bootstrap_servers": topic.bootstrap_servers, "topic": topic.topic},
        "max_events_per_batch": 2_000,
    }
    data["window"]["size"] = "1s"  # a burst of a second or two closes windows
    data.update(changes)
    return data


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow-kafka")
    migrate(home)
    return home


@pytest.fixture(scope="module")
def topic(kafka_broker):
    topic = KafkaTopic(kafka_broker.bootstrap, "fleet-dags")
    create_topic(topic, 3)  # the generator leaves one partition silent: its clock must follow the others
    burst(topic, seed=7, events=1_200)
    return topic


@pytest.fixture(scope="module")
def pair(tmp_path_factory, topic):
    root = tmp_path_factory.mktemp("kafka-pair")
    # the job names its topic: the platform's default event log is never read; the operator configured
    # the test's broker as the Kafka connection 'default', so the spec's brokers are a connection's
    p = Platform(root, root / "no-event-log", env={BOOTSTRAP_ENV: topic.bootstrap_servers})
    p.topic = topic
    p.spec_v1 = root / "fleet-kafka-v1.yaml"
    p.spec_v1.write_text(yaml.safe_dump(kafka_spec(topic), sort_keys=False))
    p.t = min(i.first_arrival_us for i in KafkaLog(topic).describe() if i.first_arrival_us is not None) + 2 * S
    yield p
    p.stop_everything()


def read_to_the_end(p: Platform, region: str, timeout_s: float = 300) -> None:
    """Wait until the running lineage of ``region`` has read every record of the topic."""
    ends = {str(q): o for q, o in enumerate(KafkaLog(p.topic).snapshot().end_offsets)}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        lineage = p.controller.db.lineage(p.controller.db.latest_run(JOB, region).lineage)
        if lineage.last_offsets and json.loads(lineage.last_offsets) == ends:
            return
        time.sleep(1)
    raise AssertionError(f"{JOB} in {region} did not read to {ends} in {timeout_s} s")


def dag(airflow_home, p: Platform, dag_id: str, conf: dict):
    done = dags_test(airflow_home, dag_id, conf, p.env, p.root)
    assert done.returncode == 0, tail(done)
    return done


def test_deploy_starts_a_kafka_job_in_both_regions_and_waits_until_both_caught_up(airflow_home, pair):
    burst(pair.topic, seed=8)
    dag(
        airflow_home,
        pair,
        "tidegate_deploy",
        {
            "spec": str(pair.spec_v1),
            "regions": ["east", "west"],
            "mode": "custom",
            "at": format_time_us(pair.t),
            "keep_running": False,
        },
    )
    c = pair.controller
    for region in ("east", "west"):
        status = c.status_of(JOB, region)
        assert status.state == "running" and status.caught_up, status
        run = c.db.latest_run(JOB, region)
        assert run.input == f"kafka://{pair.topic.bootstrap_servers}/{pair.topic.topic} (connection default)"
        assert json.loads(run.starting_offsets) == {
            "0": 0,
            "1": 0,
            "2": 0,
        }  # T − L sought by append time: before the topic began
    assert c.db.active_region(JOB).region in ("east", "west")
    assert c.db.procedures(JOB)[0].kind == "deploy" and c.db.procedures(JOB)[0].result == "passed"


def test_failover_of_a_killed_kafka_driver_moves_consumers_and_restores_the_region(airflow_home, pair):
    c = pair.controller
    lost = c.db.active_region(JOB).region
    pair.kill_driver(JOB, lost)
    burst(pair.topic, seed=9)  # arrives while the region is down
    dag(
        airflow_home,
        pair,
        "tidegate_failover",
        {"job": JOB, "from_region": "active", "only_if_unhealthy": True, "reason": "test: driver killed"},
    )
    survivor = c.config.partner(lost).name
    assert c.db.active_region(JOB).region == survivor
    restored = c.status_of(JOB, lost)
    assert restored.state == "running" and restored.caught_up and not restored.active
    failover = c.db.procedures(JOB)[0]
    assert failover.kind == "failover" and failover.result == "passed", failover.detail
    checks = json.loads(failover.detail)
    assert checks["restored_run"]["run_id"] == c.db.latest_run(JOB, lost).id


def test_a_region_loss_drill_on_kafka_replays_the_lost_history_from_the_topic(airflow_home, pair):
    c = pair.controller
    standby = c.config.partner(c.db.active_region(JOB).region).name
    burst(pair.topic, seed=10)
    dag(
        airflow_home, pair, "tidegate_drill", {"job": JOB, "kind": "region-loss", "region": "standby", "timeout_s": 900}
    )
    drill = c.db.procedures(JOB, kind_prefix="drill:")[0]
    assert drill.kind == "drill:region-loss" and drill.result == "passed", drill.detail
    assert drill.estimate_s is not None and drill.actual_s is not None
    checks = json.loads(drill.checks)
    assert {ch["target"] for ch in checks} == {standby, "consumer"} and all(ch["success"] for ch in checks)
    restored = c.db.latest_run(JOB, standby)
    assert restored.checkpoint == "fresh" and restored.output_start_us == pair.t  # its whole history, replayed


def test_a_planned_stop_with_a_changed_query_replays_a_kafka_job_with_a_rehearsal(airflow_home, pair):
    c = pair.controller
    standby = c.config.partner(c.db.active_region(JOB).region).name
    data = kafka_spec(pair.topic, version=2)
    data["aggregates"] = data["aggregates"] | {"min_temperature": "min(temperature)"}
    pair.spec_v2 = pair.root / "fleet-kafka-v2.yaml"
    pair.spec_v2.write_text(yaml.safe_dump(data, sort_keys=False))
    burst(pair.topic, seed=11)
    dag(
        airflow_home,
        pair,
        "tidegate_planned_stop",
        {
            "new_spec": str(pair.spec_v2),
            "region": standby,
            "allowed_delay_s": 900,
            "mode": "last-stopped",
            "rehearsal": True,
            "timeout_s": 900,
        },
    )
    procedure = c.db.procedures(JOB)[0]
    assert procedure.kind == "planned-stop" and procedure.result == "passed", procedure.detail
    detail = json.loads(procedure.detail)
    assert all(ch["success"] for ch in detail["checks"]) and {ch["target"] for ch in detail["checks"]} == {
        standby,
        "consumer",
    }
    assert detail["estimates"]["rehearsal_s"] is not None  # the rehearsal ran over the topic
    replay = c.db.latest_run(JOB, standby)
    assert replay.version == 2 and replay.checkpoint == "fresh" and "logic changed" in replay.checkpoint_reason


def test_after_every_dag_consumers_and_the_upgraded_region_equal_the_batch_path(spark, pair, tmp_path):
    """With both regions read to the end of the topic: the consumer view (version 1, through a
    failover and a drill) and the upgraded region's replay (version 2, from its handover)
    each equal the batch recomputation over the whole topic — nothing lost, nothing doubled."""
    burst(pair.topic, seed=12)
    c = pair.controller
    for region in ("east", "west"):
        read_to_the_end(pair, region)
    active = c.db.active_region(JOB).region
    upgraded = c.config.partner(active).name
    assert c.status_of(JOB, active).version == 1 and c.status_of(JOB, upgraded).version == 2
    for region in (active, upgraded):
        c.stop(JOB, region, force=True)
    topic = pair.topic
    v1 = run_batch(spark, parse_spec(kafka_spec(topic)), topic, tmp_path / "v1", emit_after_us=pair.t)
    expected = spark.read.parquet(str(v1.paths.output)).drop(*LAYOUT_COLUMNS)
    _, view = read_consumer_view(spark, c.db, JOB)
    diff = compare(expected, view.select(*expected.columns))
    assert diff.equal, diff
    # not vacuous: the five bursts since the deploy wrote 2,000 events; only the last burst's
    # windows may still be open (the number of windows depends on the wall clock, the events do not)
    assert readings(expected) > 1_000

    handover = c.db.latest_run(JOB, upgraded).output_start_us
    v2 = run_batch(
        spark, parse_spec(yaml.safe_load(pair.spec_v2.read_text())), topic, tmp_path / "v2", emit_after_us=handover
    )
    expected = spark.read.parquet(str(v2.paths.output)).drop(*LAYOUT_COLUMNS)
    ours = read_region(spark, c.db, JOB, upgraded, from_us=handover)
    diff = compare(expected, ours.select(*expected.columns))
    assert diff.equal, diff
    assert readings(expected) > 100  # the burst after the handover, in closed windows
