"""Before a client connects in plaintext: does the listener speak Kafka, or TLS?

Kafka's Java client reads the first four bytes of any answer as the size of a frame and
allocates it: a TLS listener's alert (``15 03 03 00 02``) reads as 352,518,912 bytes, 336 MiB
per connection, enough to run a driver or an executor out of memory (Tidegate's own JVM
reader reads frames the same way); librdkafka refuses it with an obscure "invalid response
size". So before a job reads a topic in plaintext (``PLAINTEXT`` or ``SASL_PLAINTEXT``),
:func:`check_plaintext_listeners` asks each broker of its bootstrap list, over a plain socket:

1. Kafka's ``ApiVersions`` request (v0, the one every broker answers before any
   authentication), reading at most 8 bytes of the answer: a TLS record (a first byte of
   0x14-0x17, then 0x03) is a TLS listener; a size no ``ApiVersions`` answer has, or another
   correlation id, is not a Kafka listener; a size and our correlation id is a broker.
2. When the listener closed the connection without a byte (OpenSSL does, at a record that is
   not TLS), a TLS ClientHello on a new connection (made by Python's ``ssl`` in memory, with no
   certificate, name or secret of ours), reading at most 5 bytes: a TLS record back is a TLS
   listener.

A listener that does not answer within :data:`PROBE_TIMEOUT_S`, or refuses the connection,
is left to the client, which reports a broker that is down with the topic and the broker.
Nothing is sent but these requests: no credentials, no topic name.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from tidegate.inputs.kafka.client import KafkaLogError, KafkaTopic
from tidegate.inputs.kafka.connections import brokers

PROBE_TIMEOUT_S = 2.0  # per broker, both steps together
PLAINTEXT_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT")  # what the probe guards; SSL and SASL_SSL expect TLS
KAFKA = "kafka"
TLS = "tls"
NOT_KAFKA = "not-kafka"
NO_ANSWER = "no-answer"  # silent, refused or closed: the client says so when it connects
_API_VERSIONS = 18
_CORRELATION_ID = 0x7467  # "tg"
_MAX_ANSWER_BYTES = 1 << 20  # an ApiVersions answer is a few hundred bytes
_TLS_RECORD_TYPES = range(0x14, 0x18)  # change_cipher_spec, alert, handshake, application_data


def api_versions_request() -> bytes:
    """``ApiVersions`` v0 with client id ``tidegate-probe``: size, api key, version,
    correlation id, client id."""
    client = b"tidegate-probe"
    body = struct.pack(">hhih", _API_VERSIONS, 0, _CORRELATION_ID, len(client)) + client
    return struct.pack(">i", len(body)) + body


def classify(answer: bytes, closed: bool) -> str:
    """What the first bytes of an answer to :func:`api_versions_request` say the listener is
    (``closed``: the listener closed the connection after them)."""
    if _tls_record(answer):
        return TLS
    if len(answer) >= 4 and not 4 <= struct.unpack(">i", answer[:4])[0] <= _MAX_ANSWER_BYTES:
        return NOT_KAFKA  # what a Java client would try to allocate
    if len(answer) >= 8:
        return KAFKA if struct.unpack(">i", answer[4:8])[0] == _CORRELATION_ID else NOT_KAFKA
    return NOT_KAFKA if answer and closed else NO_ANSWER


def _tls_record(answer: bytes) -> bool:
    """A TLS record's header: its content type, then the major version 3 (when it came)."""
    return bool(answer) and answer[0] in _TLS_RECORD_TYPES and answer[1:2] in (b"", b"\x03")


def probe(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> str:
    """:data:`KAFKA`, :data:`TLS`, :data:`NOT_KAFKA` or :data:`NO_ANSWER` for the listener at
    ``host:port``, in at most about ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    answer, closed = _exchange(host, port, api_versions_request(), 8, deadline)
    kind = classify(answer, closed)
    if kind == NO_ANSWER and closed and time.monotonic() < deadline:
        hello, _ = _exchange(host, port, _client_hello(), 5, deadline)
        return TLS if _tls_record(hello) else NO_ANSWER
    return kind


def check_plaintext_listeners(
    topics: Iterable[KafkaTopic], env: Mapping[str, str] | None = None, timeout_s: float = PROBE_TIMEOUT_S
) -> None:
    """Refuse a topic read in plaintext whose broker speaks TLS, or does not speak Kafka,
    before any Kafka client connects to it. The brokers are probed at once."""
    wanted = []
    for topic in topics:
        conn = topic.credentials(env)
        if (conn.security_protocol if conn else "PLAINTEXT") in PLAINTEXT_PROTOCOLS:
            wanted += [(topic, conn, broker) for broker in sorted(brokers(topic.bootstrap_servers))]
    if not wanted:
        return
    with ThreadPoolExecutor(max_workers=min(8, len(wanted)), thread_name_prefix="kafka-probe") as pool:
        kinds = list(pool.map(lambda w: probe(*_address(w[2]), timeout_s), wanted))
    for (topic, conn, broker), kind in zip(wanted, kinds, strict=True):
        via = f"connection {conn.name!r}" if conn else "no connection (plaintext)"
        where = f"Kafka topic {topic.topic!r}, broker {broker[:80]} ({via})"
        if kind == TLS:
            raise KafkaLogError(
                f"{where}: this listener speaks TLS: the operator's connection must set security.protocol SSL or "
                "SASL_SSL",
                "ask the operator to configure a connection for these brokers with security_protocol SSL or SASL_SSL "
                "(kafka_connections in $TIDEGATE_CONFIG, or TIDEGATE_KAFKA_SECURITY_PROTOCOL for 'default'), "
                "or name the brokers' plaintext listener",
            )
        if kind == NOT_KAFKA:
            raise KafkaLogError(f"{where}: this listener does not speak Kafka (its answer to an ApiVersions "
                                "request is no Kafka frame)",
                                "name the port of the brokers' Kafka listener (ask the operator)")  # fmt: skip


def _address(broker: str) -> tuple[str, int]:
    host, _, port = broker.rpartition(":")
    return host.strip("[]"), int(port)


def _exchange(host: str, port: int, request: bytes, limit: int, deadline: float) -> tuple[bytes, bool]:
    """Send ``request``, read at most ``limit`` bytes before ``deadline``: (bytes, whether
    the listener closed the connection). Refused, unreachable or silent: (b"", False)."""
    answer = b""
    try:
        with socket.create_connection((host, port), timeout=max(0.05, deadline - time.monotonic())) as sock:
            sock.sendall(request)
            while len(answer) < limit:
                sock.settimeout(max(0.05, deadline - time.monotonic()))
                chunk = sock.recv(limit - len(answer))
                if not chunk:
                    return answer, True
                answer += chunk
    except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError):
        return answer, True
    except (OSError, OverflowError, ValueError):  # refused, unreachable, unknown host, timed out, no such port
        return answer, False
    return answer, False


def _client_hello() -> bytes:
    """The first flight of a TLS client, made in memory: no certificate, no server name."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()
