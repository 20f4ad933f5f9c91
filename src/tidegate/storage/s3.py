"""How Tidegate reaches an S3 store: endpoint, region, addressing, credentials, bounded retries.

One :class:`S3Settings` per store (each region has its own). It renders the same settings for
both sides of the platform:

* the JVM side: Hadoop's S3A connector inside Spark, as ``spark.hadoop.fs.s3a.*`` settings —
  per bucket (``fs.s3a.bucket.<bucket>.*``) so that one Spark session reaches two regions'
  stores, each with its own endpoint and keys;
* the Python side: a ``pyarrow.fs.S3FileSystem``.

Credentials never come from a spec or a storage root. They are read from the environment
(:meth:`S3Settings.from_env`), or left to the AWS SDK's default chain: on the Python side
botocore's (:mod:`tidegate.storage.aws`), whose current keys pyarrow is handed; in Spark the
AWS SDK for Java's (:data:`DEFAULT_CHAIN_PROVIDER`), which walks the same sources in the same
order (environment, web identity, profiles, container endpoint, instance metadata) and
refreshes them inside the JVM. The secret key is never shown: not in ``repr``, not in ``str``.

Timeouts and retries are bounded: S3A's defaults retry a refused connection for minutes, so a
store whose region is lost would stall a driver instead of failing over.

Pure: no pyspark import; pyarrow is imported only when a filesystem is asked for.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from tidegate.errors import ConfigError

ENV_PREFIX = "TIDEGATE_S3_"
DEFAULT_REGION = "us-east-1"
SIMPLE_PROVIDER = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
SESSION_PROVIDER = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
# without keys: the SDK's whole default chain, not S3A's shorter list (environment and instance
# role only), so that a web identity (EKS IRSA) or a profile reaches the store from Spark too
DEFAULT_CHAIN_PROVIDER = "software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


S3A_MIN_CONNECT_S = 15.0  # Hadoop 3.5's floor for fs.s3a.connection.establish.timeout


@dataclass(frozen=True)
class S3Credentials:
    """An access key pair (and a session token for temporary credentials). ``repr`` shows the
    key id only: the secret and the token stay out of logs and tracebacks."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.access_key_id or not self.secret_access_key:
            raise ConfigError(
                "S3 credentials need both an access key id and a secret access key",
                "set both, or neither to use the instance role",
            )

    def __str__(self) -> str:
        return f"access key {self.access_key_id}"


@dataclass(frozen=True)
class S3Settings:
    """How to reach one S3 store.

    ``endpoint`` — ``None`` for AWS S3 (found from ``region``), or the URL of an S3-compatible
    store (``http://127.0.0.1:8333``); its scheme decides TLS.
    ``path_style`` — ``bucket`` in the URL's path instead of its host name: what most
    S3-compatible stores need (the default whenever an endpoint is given).
    ``credentials`` — ``None``: the AWS SDK's default chain (environment, web identity, profile,
    container or instance role).
    ``connect_timeout_s``, ``request_timeout_s``, ``attempts`` — how long one call may take and
    how often it is tried before the store counts as unreachable.
    """

    endpoint: str | None = None
    region: str = DEFAULT_REGION
    path_style: bool | None = None
    credentials: S3Credentials | None = None
    connect_timeout_s: float = 5.0
    request_timeout_s: float = 60.0
    attempts: int = 2

    def __post_init__(self) -> None:
        if self.endpoint is not None:
            split = urlsplit(self.endpoint)
            if split.scheme not in ("http", "https") or not split.hostname:
                raise ConfigError(
                    f"S3 endpoint {self.endpoint!r} is not an http(s)://host[:port] URL",
                    "write it as http://host:port or https://host",
                )
            if split.username or split.password:
                raise ConfigError(
                    "an S3 endpoint URL carries credentials",
                    "give the keys in the environment or use the instance role, never in the URL",
                )
            if split.path.strip("/") or split.query or split.fragment:
                raise ConfigError(
                    f"S3 endpoint {self.endpoint!r} has a path",
                    "give the store's base URL only; the bucket goes in the s3a:// root",
                )
        if not self.region:
            raise ConfigError("an S3 store needs a region", f"set {ENV_PREFIX}REGION (any name for a local store)")
        if self.attempts < 1 or self.connect_timeout_s <= 0 or self.request_timeout_s <= 0:
            raise ConfigError("S3 timeouts must be positive and attempts at least 1", "")

    # -- derived ---------------------------------------------------------------------------

    @property
    def secure(self) -> bool:
        return self.endpoint is None or urlsplit(self.endpoint).scheme == "https"

    @property
    def uses_path_style(self) -> bool:
        return self.endpoint is not None if self.path_style is None else self.path_style

    def __str__(self) -> str:
        where = self.endpoint or f"AWS S3 {self.region}"
        who = self.credentials or "the AWS credential chain (environment, web identity, profile, instance role)"
        return f"{where} ({'path-style' if self.uses_path_style else 'virtual-hosted'}, {who})"

    # -- from the environment ----------------------------------------------------------------

    @classmethod
    def from_env(cls, name: str | None = None, environ: Mapping[str, str] | None = None) -> S3Settings:
        """The settings of the store ``name`` (a region, e.g. ``east``) from the environment.

        For each setting ``TIDEGATE_S3_<NAME>_<KEY>`` wins over ``TIDEGATE_S3_<KEY>``; keys:
        ``ENDPOINT``, ``REGION``, ``PATH_STYLE``, ``ACCESS_KEY_ID``, ``SECRET_ACCESS_KEY``,
        ``SESSION_TOKEN``, ``CONNECT_TIMEOUT_S``, ``REQUEST_TIMEOUT_S``, ``ATTEMPTS``. Without
        a Tidegate key pair, AWS's own ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/
        ``AWS_SESSION_TOKEN`` and ``AWS_REGION`` apply; without any, the AWS credential chain does.
        """
        env = os.environ if environ is None else environ
        scoped = f"{ENV_PREFIX}{name.upper().replace('-', '_')}_" if name else None

        def get(key: str) -> str | None:
            for prefix in filter(None, (scoped, ENV_PREFIX)):
                value = env.get(prefix + key)
                if value not in (None, ""):
                    return value.strip()
            return None

        key_id, secret, token = get("ACCESS_KEY_ID"), get("SECRET_ACCESS_KEY"), get("SESSION_TOKEN")
        if key_id is None and secret is None:
            key_id, secret = env.get("AWS_ACCESS_KEY_ID") or None, env.get("AWS_SECRET_ACCESS_KEY") or None
            token = env.get("AWS_SESSION_TOKEN") or None
        if (key_id is None) != (secret is None):
            raise ConfigError(
                f"S3 credentials for {name or 'the store'}: an access key id without its secret, or the reverse",
                "set both (…ACCESS_KEY_ID and …SECRET_ACCESS_KEY), or neither to use the instance role",
            )
        credentials = None
        if key_id:
            assert secret is not None  # both or neither: checked just above
            credentials = S3Credentials(key_id, secret, token)
        return cls(
            endpoint=get("ENDPOINT"),
            region=get("REGION") or env.get("AWS_REGION") or DEFAULT_REGION,
            path_style=_flag(get("PATH_STYLE"), "PATH_STYLE"),
            credentials=credentials,
            connect_timeout_s=_number(get("CONNECT_TIMEOUT_S"), "CONNECT_TIMEOUT_S", cls.connect_timeout_s),
            request_timeout_s=_number(get("REQUEST_TIMEOUT_S"), "REQUEST_TIMEOUT_S", cls.request_timeout_s),
            attempts=int(_number(get("ATTEMPTS"), "ATTEMPTS", cls.attempts)),
        )

    # -- the JVM side: Hadoop S3A ----------------------------------------------------------

    def hadoop_conf(self, bucket: str | None = None) -> dict[str, str]:
        """Hadoop ``fs.s3a.*`` settings; with ``bucket``, scoped to that bucket
        (``fs.s3a.bucket.<bucket>.*``) so that other buckets can name other stores.

        Holds the secret key when the credentials are explicit: hand the dict to Spark or
        Hadoop, never to a log.
        """
        prefix = f"fs.s3a.bucket.{bucket}." if bucket else "fs.s3a."
        conf = {
            "endpoint.region": self.region,
            "path.style.access": _bool(self.uses_path_style),
            "connection.ssl.enabled": _bool(self.secure),
            # a refused or silent store fails within about attempts × connect timeout; S3A
            # raises any establish timeout under 15 s to 15 s (with a warning), so say so here
            "connection.establish.timeout": f"{int(max(self.connect_timeout_s, S3A_MIN_CONNECT_S) * 1000)}ms",
            "connection.timeout": f"{int(self.request_timeout_s * 1000)}ms",
            "connection.request.timeout": f"{int(self.request_timeout_s * 1000)}ms",
            "attempts.maximum": str(self.attempts - 1),  # the SDK's retries after the first try
            "retry.limit": str(self.attempts - 1),  # S3A's own retries around the SDK's
            "retry.interval": "200ms",
        }
        if self.endpoint is not None:
            conf["endpoint"] = self.endpoint
        if self.credentials is not None:
            c = self.credentials
            conf["access.key"] = c.access_key_id
            conf["secret.key"] = c.secret_access_key
            if c.session_token:
                conf["session.token"] = c.session_token
            conf["aws.credentials.provider"] = SESSION_PROVIDER if c.session_token else SIMPLE_PROVIDER
        else:
            conf["aws.credentials.provider"] = DEFAULT_CHAIN_PROVIDER
        return {prefix + key: value for key, value in conf.items()}

    def spark_conf(self, bucket: str | None = None) -> dict[str, str]:
        """:meth:`hadoop_conf` as Spark settings (``spark.hadoop.fs.s3a.…``)."""
        return {f"spark.hadoop.{key}": value for key, value in self.hadoop_conf(bucket).items()}


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _flag(value: str | None, key: str) -> bool | None:
    if value is None:
        return None
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ConfigError(f"{ENV_PREFIX}{key}={value!r} is not true or false", "write true or false")


def _number(value: str | None, key: str, default: float) -> float:
    if value is None:
        return default
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"{ENV_PREFIX}{key}={value!r} is not a number", "write a number") from None
