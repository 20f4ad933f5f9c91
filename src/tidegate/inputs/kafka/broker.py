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
import contextlib
import json
import os
import secrets
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
    ssl_port: int | None = None  # a TLS listener, when started with tls
    sasl_ssl_port: int | None = None  # SASL/PLAIN over TLS, when started with users and tls
    ca_file: str | None = None  # the PEM certificate the TLS listeners present, for clients to trust

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def process(self) -> Recorded:
        return Recorded(self.pid, self.started_at, marker=BROKER_MAIN)


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """``n`` different ports free now: each socket is held open until all are taken, so the
    kernel cannot hand one port out twice (a broker with two listeners on one port never starts)."""
    with contextlib.ExitStack() as held:
        ports = []
        for _ in range(n):
            s = held.enter_context(socket.socket())
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
        return ports


def _java() -> str:
    java = java_binary()
    if java is None:
        raise ConfigError("java not found: the Kafka broker runs on Java 17", "apt-get install openjdk-17-jdk-headless")
    return str(java)


def _properties(
    data: Path, port: int, controller_port: int, sasl_port: int | None, users: dict[str, str], tls: dict[str, str]
) -> str:
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
        "quota.window.num": "2",  # a client quota is measured over 2 s, not 11: a quota set bites at once
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
    if tls:  # TLS listeners: SSL, and SASL_SSL with the same users
        protocols = ["SSL", "SASL_SSL"] if sasl_port is not None else ["SSL"]
        for protocol in protocols:
            listener = f"{protocol}://127.0.0.1:{tls[protocol]}"
            settings["listeners"] += f",{listener}"
            settings["advertised.listeners"] += f",{listener}"
            settings["listener.security.protocol.map"] += f",{protocol}:{protocol}"
        if sasl_port is not None:
            settings["listener.name.sasl_ssl.plain.sasl.jaas.config"] = settings[
                "listener.name.sasl_plaintext.plain.sasl.jaas.config"
            ]
        settings |= {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": tls["keystore"],
                     "ssl.keystore.password": tls["password"], "ssl.key.password": tls["password"]}  # fmt: skip
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def make_keystore(folder: Path) -> tuple[Path, Path, str]:
    """A key and self-signed certificate for 127.0.0.1 and localhost, made by the JDK's
    ``keytool``: the PKCS12 keystore the broker's TLS listeners use, the certificate in PEM for
    clients to trust (their CA file), and the keystore's random password."""
    keytool = Path(_java()).with_name("keytool")
    folder.mkdir(parents=True, exist_ok=True)
    keystore, pem, password = folder / "broker.p12", folder / "ca.pem", secrets.token_urlsafe(18)
    keystore.unlink(missing_ok=True)
    for args in (
        ["-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048", "-validity", "3650",
         "-dname", "CN=localhost", "-ext", "SAN=ip:127.0.0.1,dns:localhost", "-storetype", "PKCS12",
         "-keystore", str(keystore), "-storepass", password, "-keypass", password],
        ["-exportcert", "-rfc", "-alias", "broker", "-keystore", str(keystore), "-storepass", password,
         "-file", str(pem)],
    ):  # fmt: skip
        done = subprocess.run([str(keytool), *args], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise BrokerError(f"keytool could not make the broker's TLS key: {done.stderr.strip()[-800:]}",
                              "check that the JDK's keytool runs (it comes with Java 17)")  # fmt: skip
    return keystore, pem, password


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
    data_dir: Path,
    *,
    port: int | None = None,
    sasl_users: dict[str, str] | None = None,
    tls: bool = False,
    wait_s: float = 60.0,
) -> BrokerState:
    """Start a broker storing its data under ``data_dir`` (formatted on first use) and wait
    until it answers; an already running one from the same directory is returned as it is.
    With ``sasl_users`` (user → password) it also listens for SASL/PLAIN clients; with ``tls``
    it also listens for TLS clients (``SSL``, and ``SASL_SSL`` with users) with a certificate
    :func:`make_keystore` makes, whose PEM is the state's ``ca_file``."""
    data = Path(data_dir).resolve()
    running = read_state(data)
    if running is not None:
        return running
    data.mkdir(parents=True, exist_ok=True)
    ports = iter([p for p in free_ports(5) if p != port])  # every listener its own port
    port = port or next(ports)
    controller_port = next(ports)
    sasl_port = next(ports) if sasl_users else None
    listeners: dict[str, str] = {}
    ca_file = None
    if tls:
        keystore, pem, password = make_keystore(data / "tls")
        listeners = {"SSL": str(next(ports)), "SASL_SSL": str(next(ports)), "keystore": str(keystore),
                     "password": password}  # fmt: skip
        ca_file = str(pem)
    config = data / "server.properties"
    config.write_text(_properties(data, port, controller_port, sasl_port, sasl_users or {}, listeners))
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
    state = BrokerState(
        proc.pid, port, controller_port, str(data), sasl_port, start_time(proc.pid),
        int(listeners["SSL"]) if tls else None, int(listeners["SASL_SSL"]) if tls and sasl_users else None, ca_file,
    )  # fmt: skip
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


def set_consumer_quota(state: BrokerState, client_id: str, bytes_per_s: int) -> None:
    """Let clients named ``client_id`` fetch at most ``bytes_per_s`` from the broker: beyond it the
    broker answers with a throttle time and holds their connection (Kafka's ``ConfigCommand``)."""
    command = [_java(), "-Xmx128m", "-cp", os.pathsep.join(map(str, jars(BROKER))), "kafka.admin.ConfigCommand",
               "--bootstrap-server", state.bootstrap, "--alter", "--add-config", f"consumer_byte_rate={bytes_per_s}",
               "--entity-type", "clients", "--entity-name", client_id]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise BrokerError(f"setting the fetch quota of client {client_id!r} failed: {done.stderr.strip()[-1500:]}",
                          "check that the broker runs and answers on its port")  # fmt: skip


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
