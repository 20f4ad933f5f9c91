"""Named Kafka connections: brokers and the credentials that belong to them, set by the operator.

A job spec is written by a job author, not by the platform's operator, so it never carries
credentials nor decides where the platform's credentials go. The operator configures
**connections**; a connection is a name, its brokers, a security protocol, and for SASL a
mechanism, a user and where the password is read (an environment variable or a file):

* ``default`` — from ``TIDEGATE_KAFKA_BOOTSTRAP`` (or ``kafka_bootstrap`` in
  ``$TIDEGATE_CONFIG``), ``TIDEGATE_KAFKA_SECURITY_PROTOCOL``, ``TIDEGATE_KAFKA_SASL_MECHANISM``,
  ``TIDEGATE_KAFKA_SASL_USERNAME`` and ``TIDEGATE_KAFKA_SASL_PASSWORD`` (or
  ``TIDEGATE_KAFKA_SASL_PASSWORD_FILE``), ``TIDEGATE_KAFKA_SSL_CA_FILE``: the single-cluster
  setup as it always was;
* any others — the ``kafka_connections`` mapping of ``$TIDEGATE_CONFIG``::

      kafka_connections:
        payments:
          bootstrap_servers: pay-1:9093,pay-2:9093
          security_protocol: SASL_SSL          # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
          sasl_mechanism: SCRAM-SHA-512        # PLAIN (default), SCRAM-SHA-256, SCRAM-SHA-512
          sasl_username: tidegate
          sasl_password_file: /run/secrets/payments-kafka   # or sasl_password_env: A_VARIABLE
          ssl_ca_file: /etc/tidegate/payments-ca.pem     # TLS: the CA (PEM) the brokers' certificates
                                                         # chain to; without it, the system's CAs

A spec's ``source.kafka`` names a connection (``connection: payments``: its brokers), or
brokers that are all brokers of one connection (that connection's credentials), or other
brokers, which get no credentials at all (``PLAINTEXT``). :func:`resolve` decides which.

Other brokers must be **allowed hosts**: ``kafka_hosts`` of ``$TIDEGATE_CONFIG`` (a list), or
``TIDEGATE_KAFKA_HOSTS`` (comma-separated), which replaces it; each a ``host:port`` pattern
(``*.kafka.example.com:9092`` for any name in that domain, ``host:*`` for any port)::

      kafka_hosts: [kafka-1.lab.example.com:9092, "*.streams.example.com:9092"]

Without them, a spec could make the controller, drivers and executors connect to any
host:port their network reaches (a cloud metadata service, an internal port): the spec is
refused when it is deployed and when a job is started, before any client connects.

A :class:`KafkaConnection` holds no password: it says where the password is, and
:meth:`KafkaConnection.password` reads it only when a client connects. So a connection,
its ``repr`` and every error about it can be shown anywhere.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tidegate.errors import ConfigError

DEFAULT = "default"
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
BOOTSTRAP_ENV = "TIDEGATE_KAFKA_BOOTSTRAP"
PROTOCOL_ENV = "TIDEGATE_KAFKA_SECURITY_PROTOCOL"
MECHANISM_ENV = "TIDEGATE_KAFKA_SASL_MECHANISM"
SASL_USERNAME_ENV = "TIDEGATE_KAFKA_SASL_USERNAME"
SASL_PASSWORD_ENV = "TIDEGATE_KAFKA_SASL_PASSWORD"
SASL_PASSWORD_FILE_ENV = "TIDEGATE_KAFKA_SASL_PASSWORD_FILE"
SSL_CA_FILE_ENV = "TIDEGATE_KAFKA_SSL_CA_FILE"
HOSTS_ENV = "TIDEGATE_KAFKA_HOSTS"
FIELDS = ("bootstrap_servers", "security_protocol", "sasl_mechanism", "sasl_username", "sasl_password_env",
          "sasl_password_file", "ssl_ca_file")  # fmt: skip
_NAME = re.compile(r"[a-z][a-z0-9_-]*")
_DEFAULT_PORT = "9092"  # what Kafka clients assume when a broker is named without one
_HOST_PATTERN = re.compile(
    r"(?P<host>(?:\*\.)?[a-z0-9_-]+(?:\.[a-z0-9_-]+)*|\[[0-9a-f:.]+\]):(?P<port>[0-9]{1,5}|\*)", re.A
)
# a broker as :func:`brokers` writes it, as a job spec may name one (tidegate.jobspec.source)
_BROKER = re.compile(r"(?P<host>[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?|\[[0-9a-f:.]+\]):(?P<port>[1-9][0-9]{0,4})", re.A)
_ASK_OPERATOR = (
    "ask the operator to add a Kafka connection for these brokers (kafka_connections in $TIDEGATE_CONFIG) "
    f"or to allow the host (kafka_hosts in $TIDEGATE_CONFIG, or {HOSTS_ENV})"
)


def brokers(servers: str) -> frozenset[str]:
    """``host:port`` of every broker in a bootstrap list, compared as clients reach them
    (host in lower case, the default port written out)."""
    out = set()
    for item in servers.split(","):
        item = item.strip().lower()
        if item:
            host, sep, port = item.rpartition(":")
            out.add(item if sep and port.isascii() and port.isdigit() else f"{item}:{_DEFAULT_PORT}")
    return frozenset(out)


@dataclass(frozen=True)
class KafkaConnection:
    """One cluster the operator configured: its brokers and how a client authenticates to
    them. Holds where the password is, never the password."""

    name: str
    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_username: str | None = field(default=None, repr=False)
    password_env: str | None = None  # the variable holding the password
    password_file: str | None = None  # or the file
    ssl_ca_file: str | None = None  # TLS: the CAs (PEM) brokers' certificates must chain to; None: the system's

    def __post_init__(self) -> None:
        where = f"Kafka connection {self.name!r}"
        if not _NAME.fullmatch(self.name):
            raise ConfigError(f"Kafka connection name {self.name!r} is not a plain name",
                              "use lower-case letters, digits, '-' and '_', starting with a letter")  # fmt: skip
        if not brokers(self.bootstrap_servers):
            raise ConfigError(f"{where} names no brokers", "set its bootstrap_servers, host:port,…")
        if self.security_protocol not in PROTOCOLS:
            raise ConfigError(f"{where}: security_protocol {self.security_protocol!r} is unknown",
                              "use one of " + ", ".join(PROTOCOLS))  # fmt: skip
        if self.sasl_mechanism not in MECHANISMS:
            raise ConfigError(f"{where}: sasl_mechanism {self.sasl_mechanism!r} is not supported",
                              "use one of " + ", ".join(MECHANISMS))  # fmt: skip
        if self.sasl and not self.sasl_username:
            raise ConfigError(f"{where} uses {self.security_protocol} but has no user",
                              "set its SASL user, or use PLAINTEXT / SSL")  # fmt: skip
        if not self.sasl and (self.sasl_username or self.password_file):
            raise ConfigError(
                f"{where} has SASL credentials but security protocol {self.security_protocol}, "
                "which would never send them",
                "set its security protocol to SASL_SSL (or SASL_PLAINTEXT), or remove the credentials",
            )
        if self.ssl_ca_file and not self.tls:
            raise ConfigError(f"{where} names ssl_ca_file but security protocol {self.security_protocol}, "
                              "which does not use TLS",
                              "set its security protocol to SSL or SASL_SSL, or remove ssl_ca_file")  # fmt: skip

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def ca_file(self) -> str | None:
        """The CA file clients verify the brokers with, checked readable now (None: the system's
        CAs). The error names the file, which is the operator's setting, not a secret."""
        if not self.ssl_ca_file:
            return None
        path = Path(self.ssl_ca_file).expanduser()
        try:
            head = path.read_bytes()[:4096]
        except OSError as e:
            raise ConfigError(f"Kafka connection {self.name!r}: ssl_ca_file {str(path)!r} cannot be read "
                              f"({e.strerror})", "point ssl_ca_file at the brokers' CA certificate(s), "
                              "PEM-encoded") from None  # fmt: skip
        if b"-----BEGIN CERTIFICATE-----" not in head:
            raise ConfigError(f"Kafka connection {self.name!r}: ssl_ca_file {str(path)!r} holds no PEM certificate",
                              "give the CA certificate(s) in PEM form (-----BEGIN CERTIFICATE-----)")  # fmt: skip
        return str(path)

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def brokers(self) -> frozenset[str]:
        return brokers(self.bootstrap_servers)

    def password(self, env: Mapping[str, str] | None = None) -> str:
        """The SASL password, read now from its variable or file. Errors name where it
        should be, never what is there."""
        env = os.environ if env is None else env
        if self.password_file:
            try:
                return Path(self.password_file).read_text().rstrip("\r\n")
            except OSError as exc:
                raise ConfigError(f"Kafka connection {self.name!r}: its password file {self.password_file} cannot be "
                                  f"read ({exc.strerror or type(exc).__name__})",
                                  "make the file readable by the drivers' user, or fix the path") from None  # fmt: skip
        variable = self.password_env or SASL_PASSWORD_ENV
        if variable not in env:
            raise ConfigError(f"Kafka connection {self.name!r}: its password variable {variable} is not set here",
                              f"set {variable} in the environment of the drivers and Spark executors")  # fmt: skip
        return env[variable]


def load_connections(
    env: Mapping[str, str] | None = None, file_settings: Mapping[str, Any] | None = None, cwd: Path | None = None
) -> dict[str, KafkaConnection]:
    """The connections the operator configured: ``kafka_connections`` of ``$TIDEGATE_CONFIG``
    (``file_settings`` when the caller has read that file already) and ``default`` from the
    ``TIDEGATE_KAFKA_*`` variables."""
    env = os.environ if env is None else env
    if file_settings is None:
        file_settings = _read_config_file(env.get("TIDEGATE_CONFIG"), cwd or Path.cwd())
    given = file_settings.get("kafka_connections") or {}
    if not isinstance(given, Mapping):
        raise ConfigError("config kafka_connections: expected a mapping of connection name to settings",
                          "e.g. kafka_connections: {payments: {bootstrap_servers: pay-1:9093, …}}")  # fmt: skip
    out: dict[str, KafkaConnection] = {}
    for name, settings in given.items():
        out[str(name)] = _from_file(str(name), settings)
    default = _default(env, given.get(DEFAULT) or {}, file_settings.get("kafka_bootstrap"))
    if default is not None:
        out[DEFAULT] = default
    return out


def resolve(
    connection: str,
    bootstrap_servers: str,
    connections: Mapping[str, KafkaConnection],
    where: str,
    allowed_hosts: Sequence[str] = (),
) -> tuple[str, KafkaConnection | None]:
    """The brokers a spec's ``source.kafka`` reaches and the connection whose credentials go
    with them: the named connection; else the one connection all the named brokers belong
    to; else none (no credentials), when every broker is one of ``allowed_hosts``
    (:func:`load_allowed_hosts`); with neither, the ``default`` connection."""
    if connection:
        if connection not in connections:
            raise ConfigError(f"{where}.connection: Kafka connection {connection!r} is not configured",
                              _configured(connections))  # fmt: skip
        return connections[connection].bootstrap_servers, connections[connection]
    if not bootstrap_servers:
        if DEFAULT not in connections:
            raise ConfigError(f"{where} names neither a connection nor brokers, and no default Kafka connection "
                              "is configured",
                              f"name one with connection: ({_names(connections)}) or bootstrap_servers: host:9092; "
                              f"the operator sets the default with {BOOTSTRAP_ENV}")  # fmt: skip
        return connections[DEFAULT].bootstrap_servers, connections[DEFAULT]
    conn = for_brokers(bootstrap_servers, connections, where)
    if conn is None:
        check_allowed(bootstrap_servers, allowed_hosts, connections, where)
    return bootstrap_servers, conn


def check_allowed(
    bootstrap_servers: str, allowed_hosts: Sequence[str], connections: Mapping[str, KafkaConnection], where: str
) -> None:
    """Refuse brokers outside ``allowed_hosts`` (brokers of no connection): a spec may reach
    only the hosts the operator knows. The error names the first such broker, as the spec
    wrote it, never a connection's settings nor the allowed hosts."""
    outside = sorted(b for b in brokers(bootstrap_servers) if not host_allowed(b, allowed_hosts))
    if outside:
        more = f" (and {len(outside) - 1} more)" if len(outside) > 1 else ""
        named = (
            f"name one of the operator's connections instead (connection: {_names(connections)}), or "
            if connections
            else ""
        )
        raise ConfigError(f"{where}.bootstrap_servers names {outside[0][:80]!r}{more}, which is neither a broker of "
                          "a Kafka connection nor an allowed Kafka host", named + _ASK_OPERATOR)  # fmt: skip


def host_allowed(broker: str, allowed_hosts: Sequence[str]) -> bool:
    """Whether ``broker`` (``host:port`` as :func:`brokers` writes it) matches a pattern of
    ``allowed_hosts``: the same host, or any name under ``*.domain``; the same port, or ``*``.
    A broker that is not plainly ``host:port`` matches nothing: a version stored before specs'
    brokers were checked may hold ``plaintext://evil:9092/x.lab.example.com``, which ends like
    an allowed domain and which a client parsing a protocol and a port may read as ``evil:9092``."""
    m = _BROKER.fullmatch(broker)
    if m is None or int(m["port"]) > 65_535:
        return False
    host, port = m["host"], m["port"]
    for pattern in allowed_hosts:
        want_host, _, want_port = pattern.rpartition(":")
        if want_port not in ("*", port):
            continue
        if host == want_host or (want_host.startswith("*.") and host.endswith(want_host[1:])):
            return True
    return False


def load_allowed_hosts(
    env: Mapping[str, str] | None = None, file_settings: Mapping[str, Any] | None = None, cwd: Path | None = None
) -> tuple[str, ...]:
    """The hosts a spec may name besides the brokers of connections: ``TIDEGATE_KAFKA_HOSTS``
    (comma-separated), else ``kafka_hosts`` of ``$TIDEGATE_CONFIG`` (``file_settings`` when the
    caller has read that file already); each checked, in lower case."""
    env = os.environ if env is None else env
    if env.get(HOSTS_ENV, "").strip():
        return tuple(_host_pattern(item, HOSTS_ENV) for item in env[HOSTS_ENV].split(",") if item.strip())
    if file_settings is None:
        file_settings = _read_config_file(env.get("TIDEGATE_CONFIG"), cwd or Path.cwd())
    given = file_settings.get("kafka_hosts") or []
    items = given.split(",") if isinstance(given, str) else given
    if not isinstance(items, list):
        raise ConfigError("config kafka_hosts: expected a list of host:port patterns",
                          'e.g. kafka_hosts: [kafka-1.example.com:9092, "*.streams.example.com:9092"]')  # fmt: skip
    return tuple(_host_pattern(str(item), "config kafka_hosts") for item in items if str(item).strip())


def _host_pattern(text: str, where: str) -> str:
    pattern = text.strip().lower()
    if not _HOST_PATTERN.fullmatch(pattern) or (
        pattern.rpartition(":")[2] != "*" and not 1 <= int(pattern.rpartition(":")[2]) <= 65_535
    ):
        raise ConfigError(f"{where}: {pattern[:80]!r} is not a host:port pattern",
                          "write host:port, *.domain:port (any name in the domain) or host:* (any port), "
                          "e.g. kafka-1.example.com:9092")  # fmt: skip
    return pattern


def for_brokers(
    bootstrap_servers: str, connections: Mapping[str, KafkaConnection], where: str
) -> KafkaConnection | None:
    """The one connection every broker of ``bootstrap_servers`` belongs to, or None (then a
    client connects with no credentials). Brokers shared with a connection and others too,
    or brokers of two connections, are refused: which credentials to use is the operator's
    choice, through a connection name."""
    wanted = brokers(bootstrap_servers)
    if not wanted:  # "," would be a subset of every connection's brokers and get its credentials
        raise ConfigError(f"{where}.bootstrap_servers names no broker",
                          "name brokers as host:port, or a connection with connection: instead")  # fmt: skip
    holding = [c for c in connections.values() if wanted <= c.brokers]
    if len(holding) == 1:
        return holding[0]
    if len(holding) > 1:
        raise ConfigError(f"{where}.bootstrap_servers are brokers of several Kafka connections "
                          f"({', '.join(sorted(c.name for c in holding))})",
                          "name the one to use with connection: instead of bootstrap_servers")  # fmt: skip
    overlapping = sorted(c.name for c in connections.values() if wanted & c.brokers)
    if overlapping:
        raise ConfigError(f"{where}.bootstrap_servers mix brokers of Kafka connection {overlapping[0]!r} with "
                          "brokers of no connection",
                          f"name the connection (connection: {overlapping[0]}) instead of bootstrap_servers, "
                          "or list only brokers outside it (they get no credentials)")  # fmt: skip
    return None


def _configured(connections: Mapping[str, KafkaConnection]) -> str:
    if not connections:
        return (
            "no Kafka connection is configured: the operator configures them (kafka_connections in "
            f"$TIDEGATE_CONFIG, or {BOOTSTRAP_ENV} for 'default'); or name brokers with bootstrap_servers"
        )
    return f"use one of the configured connections: {_names(connections)}"


def _names(connections: Mapping[str, KafkaConnection]) -> str:
    return ", ".join(sorted(connections)) or "none configured"


def _from_file(name: str, settings: Any) -> KafkaConnection:
    where = f"config kafka_connections.{name}"
    if not isinstance(settings, Mapping):
        raise ConfigError(f"{where}: expected a mapping of settings", "keys: " + ", ".join(FIELDS))
    unknown = sorted(set(settings) - set(FIELDS))
    if unknown:
        hint = (
            " (a password never goes in this file: use sasl_password_env or sasl_password_file)"
            if any("password" in str(k) for k in unknown)
            else ""
        )
        raise ConfigError(
            f"{where}: unknown setting(s) {', '.join(map(str, unknown))}{hint}", "use " + ", ".join(FIELDS)
        )
    if settings.get("sasl_password_env") and settings.get("sasl_password_file"):
        raise ConfigError(f"{where} names both sasl_password_env and sasl_password_file", "keep one of them")
    user = _text(settings.get("sasl_username"))
    return KafkaConnection(
        name=name,
        bootstrap_servers=_text(settings.get("bootstrap_servers")) or "",
        security_protocol=(_text(settings.get("security_protocol")) or ("SASL_SSL" if user else "PLAINTEXT")).upper(),
        sasl_mechanism=(_text(settings.get("sasl_mechanism")) or "PLAIN").upper(),
        sasl_username=user,
        password_env=_text(settings.get("sasl_password_env")),
        password_file=_text(settings.get("sasl_password_file")),
        ssl_ca_file=_text(settings.get("ssl_ca_file")),
    )


def _default(env: Mapping[str, str], given: Mapping[str, Any], file_bootstrap: Any) -> KafkaConnection | None:
    """``default``: the ``TIDEGATE_KAFKA_*`` variables over ``kafka_connections.default``."""
    servers = env.get(BOOTSTRAP_ENV) or _text(given.get("bootstrap_servers")) or _text(file_bootstrap)
    if not servers:
        return None
    user = env.get(SASL_USERNAME_ENV) or _text(given.get("sasl_username"))
    password_file = env.get(SASL_PASSWORD_FILE_ENV) or _text(given.get("sasl_password_file"))
    protocol = env.get(PROTOCOL_ENV) or _text(given.get("security_protocol")) or ("SASL_SSL" if user else "PLAINTEXT")
    return KafkaConnection(
        name=DEFAULT,
        bootstrap_servers=servers,
        security_protocol=protocol.upper(),
        sasl_mechanism=(env.get(MECHANISM_ENV) or _text(given.get("sasl_mechanism")) or "PLAIN").upper(),
        sasl_username=user,
        password_env=None if password_file else (_text(given.get("sasl_password_env")) or SASL_PASSWORD_ENV),
        password_file=password_file,
        ssl_ca_file=env.get(SSL_CA_FILE_ENV) or _text(given.get("ssl_ca_file")),
    )


def _text(value: Any) -> str | None:
    return None if value is None or str(value).strip() == "" else str(value).strip()


def _read_config_file(name: str | None, cwd: Path) -> Mapping[str, Any]:
    """The Kafka part of ``$TIDEGATE_CONFIG`` (:func:`tidegate.runtime.jobs.config.load_config`
    checks the whole file)."""
    if not name:
        return {}
    path = Path(name).expanduser()
    path = path if path.is_absolute() else cwd / path
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError:
        raise ConfigError(f"TIDEGATE_CONFIG names {path}, which cannot be read", "fix the path or unset it") from None
    return data if isinstance(data, Mapping) else {}
