"""The JVM side of Kafka input: pinned, fetched by bootstrap, found without a network."""

from __future__ import annotations

import re
import subprocess
import time

from platform_support import REPO
from tidegate.jvm import deps as jars


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
