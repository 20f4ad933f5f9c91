"""An S3 store as the AWS SDK for Python (botocore) reaches it: one credential chain, one client.

Credentials: a store's own keys when :class:`~tidegate.storage.s3.S3Settings` has them, otherwise
botocore's default chain — the one every AWS SDK walks, in its order: environment keys (with
a session token), a web identity token (EKS IRSA, ``AWS_WEB_IDENTITY_TOKEN_FILE``), the shared
config and credentials files (profiles, SSO, ``credential_process``, assumed roles), a
container's credentials endpoint (ECS task role, EKS pod identity; plain HTTP only to loopback
or AWS's link-local hosts, as botocore allows) and the EC2 instance metadata service, IMDSv2
only: the fallback to IMDSv1 is turned off. botocore refreshes temporary credentials before
they expire; :func:`current_credentials` is their value now, which pyarrow is handed (it never
looks for credentials itself), so that reads, writes and commit records sign as one identity.

Requests: :func:`client` is a botocore S3 client for a store, path-style or virtual-hosted as
its settings say, sending one call at most ``attempts`` times — once, for a conditional PUT
(:meth:`tidegate.storage.store.S3Store.put_if_absent` says why).

botocore is imported when a client or credentials are first asked for.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlsplit

from tidegate.errors import ConfigError
from tidegate.storage.s3 import ENV_PREFIX, S3Credentials, S3Settings

_lock = threading.Lock()  # botocore's sessions are not thread-safe; its clients are
_sessions: dict[str, Any] = {}  # region → botocore Session (its credential chain resolved once)
_clients: dict[tuple[S3Settings, int], Any] = {}


def current_credentials(settings: S3Settings) -> S3Credentials:
    """The keys that sign for ``settings``' store now: its own, or those of botocore's chain
    (refreshed by botocore before they expire); a :class:`ConfigError` when the chain finds none."""
    if settings.credentials is not None:
        return settings.credentials
    frozen = _chain(settings.region).get_frozen_credentials()
    return S3Credentials(frozen.access_key, frozen.secret_key, frozen.token)


def arrow_filesystem(
    settings: S3Settings, *, allow_bucket_creation: bool = False, credentials: S3Credentials | None = None
):
    """A ``pyarrow.fs.S3FileSystem`` for ``settings``' store, with its bounded retries, signing
    with ``credentials`` (default: :func:`current_credentials`) — never
    with keys pyarrow looked for itself. Temporary keys expire: a filesystem kept for long
    is made again with new ones (:class:`tidegate.storage.store.S3Store` does)."""
    from pyarrow import fs

    keys = credentials or current_credentials(settings)

    options: dict = {
        "allow_bucket_creation": allow_bucket_creation,
        "region": settings.region,
        "connect_timeout": settings.connect_timeout_s,
        "request_timeout": settings.request_timeout_s,
        "retry_strategy": fs.AwsStandardS3RetryStrategy(max_attempts=settings.attempts),
        "force_virtual_addressing": not settings.uses_path_style,
    }
    if settings.endpoint is not None:
        split = urlsplit(settings.endpoint)
        options["endpoint_override"] = split.netloc
        options["scheme"] = split.scheme
    options["access_key"] = keys.access_key_id
    options["secret_key"] = keys.secret_access_key
    if keys.session_token:
        options["session_token"] = keys.session_token
    return fs.S3FileSystem(**options)


def client(settings: S3Settings, attempts: int | None = None):
    """A botocore S3 client for ``settings``' store (kept: clients are thread-safe and slow to
    make) that sends one call at most ``attempts`` times (default: the settings')."""
    attempts = settings.attempts if attempts is None else attempts
    with _lock:
        made = _clients.get((settings, attempts))
        if made is None:
            made = _clients[(settings, attempts)] = _make_client(settings, attempts)
        return made


def forget() -> None:
    """Drop every resolved chain and client: the environment they were found in has changed."""
    with _lock:
        _sessions.clear()
        _clients.clear()


def _make_client(settings: S3Settings, attempts: int):
    from botocore.config import Config

    config = Config(
        region_name=settings.region,
        signature_version="s3v4",
        s3={"addressing_style": "path" if settings.uses_path_style else "virtual"},
        connect_timeout=settings.connect_timeout_s,
        read_timeout=settings.request_timeout_s,
        retries={"mode": "standard", "total_max_attempts": attempts},
        # checksums only where S3 demands one: S3-compatible stores refuse some of the newer ones
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    keys: dict[str, str | None] = {}
    if settings.credentials is not None:
        c = settings.credentials
        keys = {"aws_access_key_id": c.access_key_id, "aws_secret_access_key": c.secret_access_key}
        keys["aws_session_token"] = c.session_token
    else:
        _resolved(_session(settings.region))  # no credentials: said here, not on the first call
    return _session(settings.region).create_client("s3", endpoint_url=settings.endpoint, config=config, **keys)


def _chain(region: str):
    with _lock:
        return _resolved(_session(region))


def _session(region: str):
    """The botocore session of ``region`` (call under the lock)."""
    session = _sessions.get(region)
    if session is None:
        from botocore.session import Session

        session = Session()
        session.set_config_variable("region", region)
        session.set_config_variable("ec2_metadata_v1_disabled", True)  # IMDSv2 or nothing
        _sessions[region] = session
    return session


def _resolved(session):
    """The session's credentials, found once and refreshed by botocore (call under the lock)."""
    from botocore.exceptions import BotoCoreError

    try:
        found = session.get_credentials()
    except (BotoCoreError, ValueError) as refused:  # ValueError: a container endpoint botocore will not ask
        raise ConfigError(
            f"S3: the AWS credential chain failed: {refused}",
            "fix the source it names (an environment variable, a profile, a role's endpoint), or give the store "
            f"keys: {ENV_PREFIX}<REGION>_ACCESS_KEY_ID and _SECRET_ACCESS_KEY",
        ) from None
    if found is None:
        raise ConfigError(
            "S3: no credentials in the environment and none found by the AWS credential chain (profiles, "
            "web identity, container credentials endpoint, EC2 instance metadata)",
            f"set {ENV_PREFIX}<REGION>_ACCESS_KEY_ID and _SECRET_ACCESS_KEY (or AWS_*), or run on a host with a role",
        )
    return found
