"""One real Kafka broker (KRaft, loopback, random ports, its own data dir) for the whole run.

Started from the jars ``scripts/bootstrap.sh`` fetched; a test that needs a topic asks
``topic_factory`` for a fresh one (append-time timestamps, as Tidegate creates them).
"""

from __future__ import annotations

import itertools

import pytest

from tidegate.inputs.kafka import broker as local_broker
from tidegate.inputs.kafka.client import KafkaTopic
from tidegate.inputs.kafka.topics import create_topic

_names = itertools.count(1)
SASL_USERS = {"tidegate": "tidegate-secret"}  # the broker's SASL/PLAIN listener accepts these


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    state = local_broker.start(tmp_path_factory.mktemp("kafka-broker"), sasl_users=SASL_USERS, tls=True)
    yield state
    local_broker.stop(__import__("pathlib").Path(state.data_dir))


@pytest.fixture
def sasl_user() -> tuple[str, str]:
    """A user and password the broker's SASL/PLAIN listener accepts."""
    return next(iter(SASL_USERS.items()))


@pytest.fixture
def topic_factory(kafka_broker, request):
    def make(partitions: int = 2, **settings) -> KafkaTopic:
        name = f"{request.node.name[:40].strip('[]').replace('[', '-')}-{next(_names)}"
        topic = KafkaTopic(kafka_broker.bootstrap, "".join(c if c.isalnum() or c in "-_." else "-" for c in name))
        create_topic(topic, partitions, **settings)
        return topic

    return make
