"""A single-node Kafka broker (KRaft: broker and controller in one JVM) on loopback.

For tests and for a laptop: ``tidegate kafka start|stop|status``, and the session fixture
of ``tests/kafka``. It runs the broker jars bootstrap fetched (:mod:`tidegate.jvm.deps`)
with ``java -cp``: ``kafka.tools.StorageTool format`` once, with a generated cluster id,
then ``kafka.Kafka`` as a detached process whose pid (with its start time: a PID alone is
reused) and ports are kept in ``<data dir>/broker.json``. Topics are never created implicitly
(``auto.create.topics.enable=false``): a job on a topic that does not exist fails, naming it.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from tidegate.errors import ConfigError, TidegateError
from tidegate.jvm.deps import BROKER, jars
from tidegate.jvm.java import java_binary  # the one lookup of java: JAVA_HOME, else PATH
from tidegate.processes import Recorded, start_time

STATE_FILE = "broker.json"
BROKER_MAIN = "kafka.Kafka"  # the broker's main class, on its command line
DEFAULT_PORT = 9092
_LOG4J = """\
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka.server.KafkaRaftServer
logger.kafka.level = INFO
"""


class BrokerError(TidegateError):
    """The local broker could not be started, found or stopped."""


@dataclass(frozen=True)
class BrokerState:
    pid: int
    port: int
    controller_port: int
    data_dir: str
    sasl_port: int | None = None  # a SASL/PLAIN listener, when started with users
    started_at: float | None = None  # when process pid started; None in a state file of an older release

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def process(self) -> Recorded:
        return Recorded(self.pid, self.started_at, marker=BROKER_MAIN)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _java() -> str:
    java = java_binary()
    if java is None:
        raise ConfigError("java not found: the Kafka broker runs on Java 17", "apt-get install openjdk-17-jdk-headless")
    return str(java)


def _properties(data: Path, port: int, controller_port: int, sasl_port: int | None, users: dict[str, str]) -> str:
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data / "logs"),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "log.retention.check.interval.ms": "1000",
    }
    if sasl_port is not None:  # a second listener that authenticates (SASL/PLAIN over plain TCP)
        settings["listeners"] += f",SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
        settings["advertised.listeners"] += f",SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
        settings["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
        settings["sasl.enabled.mechanisms"] = "PLAIN"
        accounts = " ".join(f'user_{u}="{p}"' for u, p in users.items())
        settings["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = (
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {accounts};"
        )
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def read_state(data_dir: Path) -> BrokerState | None:
    """The broker started from ``data_dir``, if its process still runs."""
    path = Path(data_dir) / STATE_FILE
    if not path.is_file():
        return None
    state = BrokerState(**json.loads(path.read_text()))
    return state if state.process.alive() else None


def new_cluster_id() -> str:
    """A random cluster id as Kafka writes them (a UUID in URL-safe base64), never one that
    starts with "-": the storage tool's argument parser takes that for an option (1 in 64)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def start(
    data_dir: Path, *, port: int | None = None, sasl_users: dict[str, str] | None = None, wait_s: float = 60.0
) -> BrokerState:
    """Start a broker storing its data under ``data_dir`` (formatted on first use) and wait
    until it answers; an already running one from the same directory is returned as it is.
    With ``sasl_users`` (user → password) it also listens for SASL/PLAIN clients."""
    data = Path(data_dir).resolve()
    running = read_state(data)
    if running is not None:
        return running
    data.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    controller_port = free_port()
    sasl_port = free_port() if sasl_users else None
    config = data / "server.properties"
    config.write_text(_properties(data, port, controller_port, sasl_port, sasl_users or {}))
    (data / "log4j2.properties").write_text(_LOG4J.format(log=data / "broker.log"))
    java = [_java(), "-Xms128m", "-Xmx512m", "-XX:+UseSerialGC",
            f"-Dlog4j2.configurationFile={data / 'log4j2.properties'}", f"-Dkafka.logs.dir={data}",
            "-cp", os.pathsep.join(map(str, jars(BROKER)))]  # fmt: skip
    if not (data / "logs" / "meta.properties").is_file():
        cluster_id = new_cluster_id()
        done = subprocess.run([*java, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)],
                              capture_output=True, text=True)  # fmt: skip
        if done.returncode != 0:
            raise BrokerError(f"formatting the broker's storage under {data} failed: {done.stderr.strip()[-1500:]}",
                              "remove the directory and start again")  # fmt: skip
    with open(data / "broker.out", "ab") as out:
        proc = subprocess.Popen([*java, BROKER_MAIN, str(config)], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    state = BrokerState(proc.pid, port, controller_port, str(data), sasl_port, start_time(proc.pid))
    (data / STATE_FILE).write_text(json.dumps(asdict(state)))
    _wait_ready(state, proc, wait_s)
    return state


def _wait_ready(state: BrokerState, proc: subprocess.Popen, wait_s: float) -> None:
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + wait_s
    admin = AdminClient({"bootstrap.servers": state.bootstrap, "log_level": "0"})
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BrokerError(f"the Kafka broker exited at start (code {proc.returncode})",
                              f"see {Path(state.data_dir) / 'broker.out'} and broker.log there")  # fmt: skip
        try:
            meta = admin.list_topics(timeout=1.0)
            if meta.brokers:
                return
        except Exception:  # not listening yet
            pass
        time.sleep(0.2)
    stop(Path(state.data_dir))
    raise BrokerError(f"the Kafka broker did not answer on {state.bootstrap} within {wait_s:.0f} s",
                      f"see {Path(state.data_dir) / 'broker.log'}")  # fmt: skip


def stop(data_dir: Path, *, grace_s: float = 20.0) -> bool:
    """Stop the broker of ``data_dir`` (SIGTERM, then SIGKILL after ``grace_s``); False if none ran."""
    state = read_state(Path(data_dir))
    if state is None:
        return False
    state.process.signal_group(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and state.process.alive():
        _reap(state.pid)
        time.sleep(0.1)
    if state.process.alive():
        state.process.signal_group(signal.SIGKILL)
    _reap(state.pid)
    (Path(data_dir) / STATE_FILE).unlink(missing_ok=True)
    return True


def _reap(pid: int) -> None:
    try:  # our own child (tests, demo): collect it so it does not linger as a zombie
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
