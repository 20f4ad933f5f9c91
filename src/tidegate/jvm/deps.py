"""The JVM jars Tidegate needs beyond Spark's own, fetched by ``scripts/bootstrap.sh`` with
Maven (never at run time).

``maven/<name>/pom.xml`` pins each set; bootstrap copies its jars to
``$TIDEGATE_JVM_DEPS/<name>/`` (default ``var/jvm`` in the checkout, git-ignored), with a
``.fetched`` stamp holding the pom's digest, so a second run is offline and does nothing.

* ``kafka-connector`` — Spark's Kafka connector (``spark-sql-kafka-0-10_2.13``) for the
  pinned pyspark and what it needs beyond pyspark's own jars: the batch path of Kafka jobs.
* ``kafka-broker`` — an Apache Kafka broker (KRaft) with log4j2: :mod:`tidegate.inputs.kafka.broker`.
* ``hadoop-aws`` — Hadoop's S3A connector and the AWS SDK bundle: :mod:`tidegate.storage.spark`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tidegate.errors import ConfigError

JVM_DEPS_ENV = "TIDEGATE_JVM_DEPS"
CHECKOUT = Path(__file__).resolve().parents[3]  # src/tidegate/jvm/deps.py → the checkout
CONNECTOR, BROKER = "kafka-connector", "kafka-broker"


def deps_dir() -> Path:
    return Path(os.environ.get(JVM_DEPS_ENV) or CHECKOUT / "var" / "jvm")


def pom(name: str) -> Path:
    return CHECKOUT / "maven" / name / "pom.xml"


def fetched(name: str) -> bool:
    """True when bootstrap fetched ``name`` from the pom as it is now."""
    stamp = deps_dir() / name / ".fetched"
    if not stamp.is_file():
        return False
    if not pom(name).is_file():  # an installed package without the checkout: trust the stamp
        return True
    return stamp.read_text().strip() == hashlib.sha256(pom(name).read_bytes()).hexdigest()


def jars(name: str) -> list[Path]:
    """The jars of ``name``; a ConfigError saying how to fetch them when they are missing."""
    folder = deps_dir() / name
    found = sorted(folder.glob("*.jar"))
    if not found or not fetched(name):
        raise ConfigError(
            f"the {name} jars are not in {folder} (or are older than maven/{name}/pom.xml)",
            "run `bash scripts/jvm_deps.sh` (bootstrap runs it; it fetches them with Maven into var/jvm/; needs mvn: "
            f"apt-get install maven), or point {JVM_DEPS_ENV} at a folder holding them",
        )
    return found


def connector_jars_or_none() -> list[Path] | None:
    try:
        return jars(CONNECTOR)
    except ConfigError:
        return None
