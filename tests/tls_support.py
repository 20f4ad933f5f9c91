"""Listeners a test makes on loopback to stand where a Kafka broker should: a real TLS server
(Python's ``ssl`` with a self-signed certificate made now), one that answers a Kafka request
with a TLS alert (as Java's TLS listeners do), one that never answers, one that answers HTTP.

Each runs in a daemon thread, records what it received, and closes when the ``with`` ends.
"""

from __future__ import annotations

import datetime
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


class Listener:
    """A loopback listener; ``received``: the bytes each connection sent before it was answered."""

    def __init__(self, answer: Callable[[socket.socket, Listener], None]) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self.connections = 0
        self._answer = answer
        self._closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            try:
                self._answer(conn, self)
            except (OSError, ssl.SSLError):
                pass

    def close(self) -> None:
        self._closed.set()
        self.sock.close()


@contextmanager
def listening(answer: Callable[[socket.socket, Listener], None]) -> Iterator[Listener]:
    listener = Listener(answer)
    try:
        yield listener
    finally:
        listener.close()


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for localhost and its key, made now: with ``cryptography`` when it is
    installed, else the ``openssl`` command."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        if shutil.which("openssl") is None:
            raise RuntimeError("neither the cryptography package nor openssl is installed") from None
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost"],
                       check=True, capture_output=True)  # fmt: skip
        return cert, key
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    made = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(private.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(private, hashes.SHA256()))  # fmt: skip
    cert.write_bytes(made.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))  # fmt: skip
    return cert, key


@contextmanager
def tls_listener(folder: Path) -> Iterator[Listener]:
    """A real TLS server (OpenSSL through Python's ``ssl``): at bytes that are no TLS record it
    closes the connection without a word; to a ClientHello it answers a ServerHello."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*self_signed(folder))

    def answer(conn: socket.socket, listener: Listener) -> None:
        conn.settimeout(5)
        first = conn.recv(5, socket.MSG_PEEK)
        listener.received.append(first)
        with context.wrap_socket(conn, server_side=True) as tls:
            tls.recv(1)

    with listening(answer) as listener:
        yield listener


@contextmanager
def alert_listener() -> Iterator[Listener]:
    """What a Java TLS listener (a Kafka broker's SSL port) answers a plaintext request: a
    fatal TLS alert, whose first four bytes read as a frame of 352,518,912 bytes."""

    def answer(conn: socket.socket, listener: Listener) -> None:
        listener.received.append(conn.recv(4096))
        conn.sendall(bytes.fromhex("15030300020250"))

    with listening(answer) as listener:
        yield listener


@contextmanager
def silent_listener() -> Iterator[Listener]:
    """Accepts, reads, never answers, keeps the connection open."""
    held = threading.Event()

    def answer(conn: socket.socket, listener: Listener) -> None:
        listener.received.append(conn.recv(4096))
        held.wait(30)

    with listening(answer) as listener:
        try:
            yield listener
        finally:
            held.set()


@contextmanager
def http_listener() -> Iterator[Listener]:
    """An HTTP server's answer to anything: ``HTTP`` reads as a frame of 1.2 GB."""

    def answer(conn: socket.socket, listener: Listener) -> None:
        listener.received.append(conn.recv(4096))
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    with listening(answer) as listener:
        yield listener
