"""Appending to a Kafka topic as producers do: what the traffic generator and the demo write with.

:class:`TopicWriter` offers the embedded log's ``append`` (keys and payloads to one
partition), so :func:`tidegate.inputs.event_log.generator.generate` writes device traffic to a topic in
its ``realtime`` mode unchanged: the broker stamps each record's arrival (append time),
as a wall-clock event log does.
"""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka import KafkaException, Producer

from tidegate.inputs.event_log import AppendResult
from tidegate.inputs.kafka.client import TIMEOUT_S, KafkaTopic
from tidegate.inputs.kafka.topics import admin, describe_append_time_topic, unreachable


class TopicWriter:
    clock_mode = "wall"  # arrivals are stamped by the broker when records are appended

    def __init__(self, topic: KafkaTopic) -> None:
        self.topic = topic
        client = admin(topic)
        self.partitions = describe_append_time_topic(topic, client)
        self._producer = Producer(topic.client_config() | {"linger.ms": "5", "acks": "all",
                                                            "enable.idempotence": "true"})  # fmt: skip

    @property
    def root(self) -> str:
        return str(self.topic)

    def append(self, partition: int, keys: Sequence[str | None], payloads: Sequence[str]) -> AppendResult:
        """Append to ``partition`` and wait until the broker acknowledged every record."""
        failures: list[str] = []

        def delivered(err, _msg) -> None:
            if err is not None:
                failures.append(err.str())

        try:
            for key, payload in zip(keys, payloads, strict=True):
                while True:
                    try:
                        self._producer.produce(self.topic.topic, payload.encode("utf-8"),
                                               None if key is None else key.encode("utf-8"), partition=partition,
                                               on_delivery=delivered)  # fmt: skip
                        break
                    except BufferError:  # the local queue is full: let it drain
                        self._producer.poll(0.05)
            left = self._producer.flush(TIMEOUT_S)
        except KafkaException as exc:
            raise unreachable(self.topic, exc) from None
        if failures or left:
            raise self.topic.error(
                f"{len(failures) + left} of {len(payloads)} records to partition {partition} were not acknowledged"
                + (f": {failures[0]}" if failures else f" within {TIMEOUT_S:.0f} s"),
                "check the broker and send them again",
            )
        return AppendResult(partition, -1, len(payloads), None, None)  # offsets and times are the broker's
