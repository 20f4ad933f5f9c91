"""Live traffic for the drill benchmark: where the events come from while the drills run.

Two sources, one interface — a job's ``source`` section, what the batch path reads, how many
events have arrived so far, and the generator's last words when it stopped:

* :class:`EventLogTraffic` — the embedded event log, fed by ``tidegate event-log generate`` in real time;
* :class:`KafkaTraffic` — a local single-node broker (the pinned jars) and a topic with the
  broker's append time as arrival time, fed by ``tidegate kafka generate`` at the same rate.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tidegate.inputs.event_log import EventLog
from tidegate.processes import Recorded
from tidegate.runtime.procedures.faults import kill_group

GENERATED_S = 2 * 3600  # longer than any run of the benchmark: the traffic never runs dry


class EventLogTraffic:
    name = "embedded log"

    def __init__(self, work: Path, rate: float) -> None:
        self.event_log = work / "event-log"
        self.log_file = work / "generator.log"
        EventLog.create(self.event_log, partitions=3, clock="wall")
        self.process = _generator(
            [
                sys.executable,
                "-m",
                "tidegate.cli",
                "event-log",
                "generate",
                str(self.event_log),
                "--mode",
                "realtime",
                "--rate",
                str(rate),
                "--duration",
                "2h",
                "--devices",
                "8",
                "--seed",
                "5",
                "--late-fraction",
                "0.01",
                "--early-fraction",
                "0.002",
                "--malformed-fraction",
                "0.005",
            ],
            self.log_file,
        )

    def source(self) -> dict:
        return {"event_log": str(self.event_log)}

    def platform_env(self) -> dict[str, str]:
        """What the platform's operator configures for this source (the event log: nothing)."""
        return {}

    @property
    def batch_input(self):
        return self.event_log

    def appended(self) -> int:
        log = EventLog.open(self.event_log)
        return sum(log.end_offset(partition) for partition in range(log.partitions))

    def running(self) -> bool:
        return self.process.poll() is None

    def tail(self) -> str:
        return self.log_file.read_text(errors="replace").replace("\r", "\n")[-2000:]

    def stop(self) -> None:
        kill_group(Recorded.of(self.process.pid))


class KafkaTraffic(EventLogTraffic):
    name = "Kafka"

    def __init__(self, work: Path, rate: float) -> None:
        from tidegate.inputs.kafka import broker
        from tidegate.inputs.kafka.client import KafkaTopic
        from tidegate.inputs.kafka.topics import create_topic

        self.broker_dir = work / "kafka"
        self.event_log = (
            work / "no-event-log"
        )  # the job names its topic: the platform's default event log is never read
        self.log_file = work / "generator.log"
        state = broker.start(self.broker_dir, port=None)
        self.topic = KafkaTopic(state.bootstrap, "drills")
        create_topic(self.topic, 3)
        self.process = _generator(
            [
                sys.executable,
                "-m",
                "tidegate.cli",
                "kafka",
                "generate",
                self.topic.topic,
                "--bootstrap",
                self.topic.bootstrap_servers,
                "--rate",
                str(rate),
                "--events",
                str(int(rate * GENERATED_S)),
                "--devices",
                "8",
                "--seed",
                "5",
            ],
            self.log_file,
        )

    def source(self) -> dict:
        return {"kafka": {"bootstrap_servers": self.topic.bootstrap_servers, "topic": self.topic.topic}}

    def platform_env(self) -> dict[str, str]:
        """The broker as the operator's connection ``default``: a spec may name only known brokers."""
        return {"TIDEGATE_KAFKA_BOOTSTRAP": self.topic.bootstrap_servers}

    @property
    def batch_input(self):
        return self.topic

    def appended(self) -> int:
        from tidegate.inputs.kafka.log import KafkaLog

        return sum(KafkaLog(self.topic).snapshot().end_offsets)

    def stop(self) -> None:
        from tidegate.inputs.kafka import broker

        try:
            super().stop()
        finally:
            broker.stop(self.broker_dir)


def start(kind: str, work: Path, rate: float) -> EventLogTraffic:
    return {"event_log": EventLogTraffic, "kafka": KafkaTraffic}[kind](work, rate)


def _generator(command: list[str], log_file: Path) -> subprocess.Popen:
    with log_file.open("wb") as log:  # a pipe nobody reads would fill and stall it
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
