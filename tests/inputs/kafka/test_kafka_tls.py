"""Kafka over TLS, for real: the project's broker listens with a certificate ``keytool`` made at
test time (``SSL``, and ``SASL_SSL`` with its users); the operator's connection names the CA
file (``ssl_ca_file``). Both readers verify the broker against it, and a job runs its whole
lifecycle over each listener: start, stop, more traffic, resume from its checkpoint, equal to
the batch path read over the same listener.
"""

from __future__ import annotations

import pytest
import yaml
from pyspark.sql import functions as F

from platform_support import REPO
from tidegate.inputs.kafka.client import SASL_PASSWORD_ENV, SASL_USERNAME_ENV, KafkaLogError, KafkaTopic
from tidegate.inputs.kafka.connections import BOOTSTRAP_ENV, PROTOCOL_ENV, SSL_CA_FILE_ENV
from tidegate.inputs.kafka.log import KafkaLog
from tidegate.inputs.kafka.producer import TopicWriter
from tidegate.inputs.kafka.traffic import kafka_traffic
from tidegate.jobspec import parse_spec
from tidegate.lineage.layout import LAYOUT_COLUMNS
from tidegate.runtime.outputs.reader import read_region
from tidegate.spark.pipeline.runner import run_batch
from tidegate.spark.tools.compare import compare
from topic_streams import stream

pytestmark = pytest.mark.spark
JOB = "device-fleet-seconds"
S = 1_000_000


def tls_connection(kafka_broker, protocol: str, sasl_user) -> dict[str, str]:
    """The operator's settings of the connection 'default' for the broker's ``protocol`` listener."""
    port = kafka_broker.ssl_port if protocol == "SSL" else kafka_broker.sasl_ssl_port
    env = {BOOTSTRAP_ENV: f"127.0.0.1:{port}", PROTOCOL_ENV: protocol, SSL_CA_FILE_ENV: kafka_broker.ca_file}
    if protocol == "SASL_SSL":
        env |= {SASL_USERNAME_ENV: sasl_user[0], SASL_PASSWORD_ENV: sasl_user[1]}
    return env


def traffic(topic: KafkaTopic, seed: int) -> None:
    kafka_traffic(TopicWriter(topic), events=1_600, devices=12, rate_per_s=800, seed=seed)


def job_spec(topic: str) -> dict:
    data = yaml.safe_load((REPO / "jobs" / "device_fleet_seconds.yaml").read_text())
    data["source"] = {"kafka": {"topic": topic}, "max_events_per_batch": 1_000}  # the connection 'default'
    data["window"]["size"] = "1s"
    return data


@pytest.mark.parametrize("protocol", ["SSL", "SASL_SSL"])
def test_both_readers_verify_a_tls_listener_with_the_connections_ca_and_read_it(
    spark, kafka_broker, topic_factory, monkeypatch, sasl_user, tmp_path, protocol
):
    plain = topic_factory(partitions=2)
    TopicWriter(plain).append(0, ["a", "b"], ['{"i": 1}', '{"i": 2}'])
    TopicWriter(plain).append(1, ["c"], ['{"i": 3}'])
    for name, value in tls_connection(kafka_broker, protocol, sasl_user).items():
        monkeypatch.setenv(name, value)
    topic = KafkaTopic(f"127.0.0.1:{kafka_broker.ssl_port if protocol == 'SSL' else kafka_broker.sasl_ssl_port}",
                       plain.topic)  # fmt: skip
    assert topic.client_config()["ssl.ca.location"] == kafka_broker.ca_file
    assert topic.spark_options()["kafka.ssl.truststore.type"] == "PEM" and topic.jvm_reader() == "consumer"
    log = KafkaLog(topic)  # confluent-kafka, as the planner and the Python reader use it
    ends = [p.end_offset for p in log.describe()]
    assert ends == [2, 1]
    python = [[k for b in log.read_batches(p, 0, ends[p]) for k in b.column("key").to_pylist()] for p in (0, 1)]
    assert python == [["a", "b"], ["c"]]
    rows = [(p, o, k) for b in stream(spark, topic, tmp_path / "jvm", "jvm") for p, o, _, k, _ in b["rows"]]
    assert sorted(rows) == [(0, 0, "a"), (0, 1, "b"), (1, 0, "c")]  # the JVM reader: Kafka's consumer over TLS


def test_a_tls_listener_whose_certificate_the_connection_does_not_trust_is_refused(
    kafka_broker, topic_factory, monkeypatch, tmp_path
):
    plain = topic_factory(partitions=1)
    other = tmp_path / "other-ca.pem"
    from tidegate.inputs.kafka.broker import make_keystore

    other.write_bytes(make_keystore(tmp_path / "other")[1].read_bytes())  # a CA that did not sign the broker's key
    monkeypatch.setenv(BOOTSTRAP_ENV, f"127.0.0.1:{kafka_broker.ssl_port}")
    monkeypatch.setenv(PROTOCOL_ENV, "SSL")
    monkeypatch.setenv(SSL_CA_FILE_ENV, str(other))
    with pytest.raises(KafkaLogError) as refused:
        KafkaLog(KafkaTopic(f"127.0.0.1:{kafka_broker.ssl_port}", plain.topic)).describe()
    assert f"127.0.0.1:{kafka_broker.ssl_port}" in str(refused.value)


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["SASL_SSL"])  # every TLS setting SSL takes, and SASL besides
def test_a_job_over_a_tls_listener_stops_resumes_from_its_checkpoint_and_equals_the_batch_path(
    spark, kafka_broker, topic_factory, platform_factory, monkeypatch, sasl_user, protocol
):
    plain = topic_factory(partitions=3)
    traffic(plain, seed=21)
    env = tls_connection(kafka_broker, protocol, sasl_user)
    for name, value in env.items():  # the operator's settings, in the controller's process and its drivers'
        monkeypatch.setenv(name, value)
    p = platform_factory(f"tls-{protocol.lower()}", REPO / "var" / "unused-event-log", env=env)
    spec_path = p.root / "fleet-tls.yaml"
    spec_path.write_text(yaml.safe_dump(job_spec(plain.topic), sort_keys=False))
    p.controller.deploy(spec_path)
    t = min(i.first_arrival_us for i in KafkaLog(plain).describe() if i.first_arrival_us is not None) - S
    first = p.controller.start(JOB, "east", mode="custom", at=t)
    p.wait_caught_up(JOB, "east")
    p.controller.stop(JOB, "east")
    traffic(plain, seed=22)  # arrives while the job is stopped
    second = p.controller.start(JOB, "east", mode="last-stopped")
    p.wait_caught_up(JOB, "east")
    p.controller.stop(JOB, "east")
    run = p.controller.db.run(second.run_id)
    assert run.checkpoint == "reused" and run.lineage == first.plan.lineage_id
    assert run.input == f"kafka://{env[BOOTSTRAP_ENV]}/{plain.topic} (connection default)"

    topic = KafkaTopic(env[BOOTSTRAP_ENV], plain.topic, connection="default")
    batch = run_batch(spark, parse_spec(job_spec(plain.topic)), topic, p.root / "batch")
    expected = spark.read.parquet(str(batch.paths.output)).drop(*LAYOUT_COLUMNS)
    ours = read_region(spark, p.controller.db, JOB, "east")
    diff = compare(expected.where(F.unix_micros("window_end") > F.lit(t)), ours.select(*expected.columns))
    assert diff.equal, diff
    resumed = p.controller.db.batch_metrics(JOB, "east", run_id=second.run_id, limit=1_000)
    assert sum(m.input_events for m in resumed) == 1_600  # the resumed run read what arrived while it was stopped
    assert ours.agg(F.sum("readings")).first()[0] > 1_000  # not vacuous: closed windows of both bursts
