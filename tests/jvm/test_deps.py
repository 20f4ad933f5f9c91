"""The JVM side of Kafka input: pinned, fetched by bootstrap, found without a network."""

from __future__ import annotations

import re
import subprocess
import time
import zipfile

from platform_support import REPO
from tidegate.jvm import deps as jars
from tidegate.spark.pipeline import java_source


def test_the_connector_is_pinned_to_the_pinned_pyspark():
    pyspark = re.search(r"^pyspark==(\S+)$", (REPO / "requirements" / "constraints.txt").read_text(), re.M).group(1)
    pom = jars.pom(jars.CONNECTOR).read_text()
    assert f"<spark.version>{pyspark}</spark.version>" in pom
    assert re.search(r"<kafka.version>4\.\d+\.\d+</kafka.version>", jars.pom(jars.BROKER).read_text())


def test_bootstrap_fetched_the_connector_and_the_broker_and_a_second_run_does_nothing():
    names = {j.name for j in jars.jars(jars.CONNECTOR)}
    assert "spark-sql-kafka-0-10_2.13-4.2.0.jar" in names and any(n.startswith("kafka-clients-") for n in names)
    assert not any(n.startswith(("spark-core", "scala-library")) for n in names)  # pyspark ships those
    broker = {j.name for j in jars.jars(jars.BROKER)}
    assert any(n.startswith("kafka_2.13-4.") for n in broker) and any(n.startswith("log4j-core") for n in broker)
    started = time.monotonic()
    again = subprocess.run(["bash", str(REPO / "scripts" / "jvm_deps.sh")], capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and again.stderr == "" and time.monotonic() - started < 5  # no Maven, no network


def test_the_wire_reader_compiles_against_the_pinned_kafka_clients_it_is_built_on(tmp_path, monkeypatch):
    """The wire feed uses kafka-clients' message and record classes, which change between minor
    releases: the pin names the version, and an upgrade that breaks them fails this build."""
    pinned = re.search(r"<kafka.clients.version>(\S+)</kafka.clients.version>", jars.pom(jars.CONNECTOR).read_text())
    assert pinned is not None
    assert f"kafka-clients-{pinned.group(1)}.jar" in {j.name for j in jars.jars(jars.CONNECTOR)}
    monkeypatch.setattr(java_source, "jar_path", lambda: tmp_path / "reader.jar")
    with zipfile.ZipFile(java_source.build_jar()) as built:
        names = set(built.namelist())
    assert {f"tidegate/jvm/{c}.class" for c in ("WireFeed", "FetchedBatches", "BrokerWire")} <= names
