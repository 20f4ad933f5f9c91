"""Topics whose records carry the broker's append time — the only arrival time Tidegate trusts.

semantics §6: arrival time on Kafka is the broker's append time. A topic with
``message.timestamp.type=CreateTime`` keeps the producer's timestamp, which is event time
(any clock, any order), so a job on it is refused, saying how to fix the topic.
"""

from __future__ import annotations

from concurrent.futures import Future

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from tidegate.inputs.kafka.client import TIMEOUT_S, KafkaTopic

TIMESTAMP_TYPE = "message.timestamp.type"
LOG_APPEND_TIME = "LogAppendTime"


_REPORTED: dict[str, str] = {}  # brokers → the last error a client reported for them (e.g. authentication)


def reporting(topic: KafkaTopic) -> dict:
    """Client settings that keep the client's own error reports, for :func:`unreachable` to name."""
    return {"error_cb": lambda err: _REPORTED.__setitem__(topic.bootstrap_servers, err.str())}


def admin(topic: KafkaTopic) -> AdminClient:
    _REPORTED.pop(topic.bootstrap_servers, None)
    return AdminClient(topic.client_config() | reporting(topic))


def _given_or_new(topic: KafkaTopic, client: AdminClient | None) -> AdminClient:
    """``client``, or a new one: not ``client or admin(topic)`` — an AdminClient is falsy while its
    queue is empty (``len``), so that made a new client, and paid its first connection, every time."""
    return client if client is not None else admin(topic)


def describe_partitions(topic: KafkaTopic, client: AdminClient | None = None) -> int:
    """How many partitions the topic has; an error naming topic and broker if it cannot be read."""
    client = _given_or_new(topic, client)
    try:
        meta = client.list_topics(topic=topic.topic, timeout=TIMEOUT_S)
    except KafkaException as exc:
        client.poll(0.1)  # serve the client's error reports: they say why (refused, authentication)
        raise unreachable(topic, exc) from None
    found = meta.topics.get(topic.topic)
    if found is None or found.error is not None or not found.partitions:
        why = "" if found is None or found.error is None else f" ({found.error.str()})"
        raise topic.error(
            f"the topic does not exist{why}",
            f"create it with `tidegate kafka create-topic {topic.topic} --bootstrap {topic.bootstrap_servers} "
            "--partitions N` (append-time timestamps), or fix source.kafka.topic",
        )
    return len(found.partitions)


def check_append_time(topic: KafkaTopic, client: AdminClient | None = None) -> None:
    """Refuse a topic whose records carry producer timestamps (CreateTime)."""
    client = _given_or_new(topic, client)
    _refuse_create_time(topic, _ask_timestamp_type(topic, client))


def describe_append_time_topic(topic: KafkaTopic, client: AdminClient | None = None) -> int:
    """:func:`describe_partitions` and :func:`check_append_time` in one: the topic's configuration
    is asked for beside its metadata, not after it."""
    client = _given_or_new(topic, client)
    asked = _ask_timestamp_type(topic, client)
    partitions = describe_partitions(topic, client)  # a missing topic is reported as such, first
    _refuse_create_time(topic, asked)
    return partitions


def _ask_timestamp_type(topic: KafkaTopic, client: AdminClient) -> Future:
    resource = ConfigResource(ResourceType.TOPIC, topic.topic)
    return client.describe_configs([resource], request_timeout=TIMEOUT_S)[resource]


def _refuse_create_time(topic: KafkaTopic, asked: Future) -> None:
    try:
        entries = asked.result(TIMEOUT_S)
    except KafkaException as exc:
        raise unreachable(topic, exc) from None
    kind = entries[TIMESTAMP_TYPE].value if TIMESTAMP_TYPE in entries else None
    if kind != LOG_APPEND_TIME:
        raise topic.error(
            f"{TIMESTAMP_TYPE} is {kind}: its records carry the producer's clock, which is event time, "
            "not the broker's append time Tidegate uses as arrival time (semantics §6)",
            f"set the topic to append time: kafka-configs.sh --bootstrap-server {topic.bootstrap_servers} "
            f"--alter --entity-type topics --entity-name {topic.topic} --add-config {TIMESTAMP_TYPE}={LOG_APPEND_TIME} "
            "(records already in the topic keep their producer timestamps: replay only from after the change)",
        )


def create_topic(topic: KafkaTopic, partitions: int, *, retention_ms: int | None = None) -> None:
    """Create ``topic`` with append-time timestamps (an existing one is checked instead)."""
    client = admin(topic)
    config = {TIMESTAMP_TYPE: LOG_APPEND_TIME}
    if retention_ms is not None:
        config["retention.ms"] = str(retention_ms)
    new = NewTopic(topic.topic, num_partitions=partitions, replication_factor=-1, config=config)
    try:
        client.create_topics([new], request_timeout=TIMEOUT_S)[topic.topic].result(TIMEOUT_S)
    except KafkaException as exc:
        if exc.args and getattr(exc.args[0], "name", lambda: "")() == "TOPIC_ALREADY_EXISTS":
            check_append_time(topic, client)
            return
        raise unreachable(topic, exc) from None
    wait_for_topic(topic, client)


def wait_for_topic(topic: KafkaTopic, client: AdminClient, timeout_s: float = TIMEOUT_S) -> None:
    """A created topic's partitions have leaders only a moment later: wait for them."""
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        meta = client.list_topics(topic=topic.topic, timeout=TIMEOUT_S).topics.get(topic.topic)
        if (
            meta is not None
            and meta.error is None
            and meta.partitions
            and all(p.leader >= 0 for p in meta.partitions.values())
        ):
            return
        if time.monotonic() > deadline:
            raise topic.error("the topic was created but its partitions have no leader yet", "retry in a moment")
        time.sleep(0.05)


def delete_topic(topic: KafkaTopic) -> None:
    client = admin(topic)  # kept referenced until the answer came: a collected client cancels its requests
    try:
        client.delete_topics([topic.topic], request_timeout=TIMEOUT_S)[topic.topic].result(TIMEOUT_S)
    except KafkaException as exc:
        raise unreachable(topic, exc) from None


def unreachable(topic: KafkaTopic, exc: KafkaException):
    """The client's error, named with the topic and the broker and what to check."""
    err = exc.args[0] if exc.args else exc
    text = err.str() if hasattr(err, "str") else str(err)
    reported = _REPORTED.get(topic.bootstrap_servers)
    if reported and reported not in text:
        text += f" ({reported})"
    return topic.error(
        f"the broker did not answer as expected: {text}",
        f"check that a broker runs at {topic.bootstrap_servers} (`tidegate kafka status`, or start one with "
        "`tidegate kafka start`) and that source.kafka.bootstrap_servers and its security settings are right",
    )
