"""An instance role's temporary credentials, for the one S3 request Tidegate signs itself.

pyarrow (reads, writes, lists) and S3A inside Spark find a role's credentials on their own,
through the AWS SDK's default chain. The conditional PUT that creates a commit record
(:mod:`tidegate.storage.sigv4`) is Tidegate's own request, so on a host with a role and no
keys in the environment it asks the places the SDK asks, in the SDK's order:

* a container's credentials endpoint — an ECS task role or EKS pod identity:
  ``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`` (on ``169.254.170.2``), or
  ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` with ``AWS_CONTAINER_AUTHORIZATION_TOKEN`` or
  ``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE``;
* the instance metadata service of an EC2 instance profile, version 2 only: a session token
  (``PUT /latest/api/token``), the role's name, then its credentials. The endpoint is
  ``AWS_EC2_METADATA_SERVICE_ENDPOINT`` (default ``http://169.254.169.254``);
  ``AWS_EC2_METADATA_DISABLED=true`` turns it off.

Credentials are kept until five minutes before they expire. A role assumed through a web
identity token (``AWS_WEB_IDENTITY_TOKEN_FILE``) needs a call to STS and is not read here:
give such a host keys, or a container credentials endpoint.
"""

from __future__ import annotations

import datetime
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping

from tidegate.errors import ConfigError

IMDS_ENDPOINT = "http://169.254.169.254"
ECS_ENDPOINT = "http://169.254.170.2"
REFRESH_BEFORE_S = 300.0  # fetched again this long before they expire
_TIMEOUT_S = 2.0  # a host without the service: given up on quickly

_lock = threading.Lock()
_cached: tuple[object, float] | None = None  # (S3Credentials, expires at, epoch seconds)


def role_credentials(environ: Mapping[str, str] | None = None, *, now: float | None = None):
    """The role's :class:`~tidegate.storage.s3.S3Credentials`, cached until shortly before they
    expire; raises :class:`ConfigError` when this host has no role to ask."""
    global _cached
    env = os.environ if environ is None else environ
    now = time.time() if now is None else now
    with _lock:
        if _cached is not None and _cached[1] - REFRESH_BEFORE_S > now:
            return _cached[0]
        answer = _from_container(env) or _from_instance(env)
        if answer is None:
            raise ConfigError(
                "S3: no keys in the environment and no instance role answered (container credentials "
                "endpoint, EC2 instance metadata)",
                "set TIDEGATE_S3_<REGION>_ACCESS_KEY_ID and _SECRET_ACCESS_KEY (or AWS_*), "
                "or run on a host with a role",
            )
        _cached = (_credentials(answer), _expiry(answer.get("Expiration"), now))
        return _cached[0]


def forget() -> None:
    """Drop the cached credentials (a role whose credentials were revoked)."""
    global _cached
    with _lock:
        _cached = None


def _from_container(env: Mapping[str, str]) -> dict | None:
    relative, full = env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"), env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI")
    if not relative and not full:
        return None
    if relative:
        url = ECS_ENDPOINT + relative
    else:
        assert full  # one of the two is set: checked just above
        url = full
    headers = {}
    token = env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN")
    token_file = env.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
    if token_file:
        with open(token_file, encoding="utf-8") as source:
            token = source.read().strip()
    if token:
        headers["Authorization"] = token
    return json.loads(_get(url, headers))


def _from_instance(env: Mapping[str, str]) -> dict | None:
    if env.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true":
        return None
    base = env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", IMDS_ENDPOINT).rstrip("/")
    try:
        token = _request(f"{base}/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "21600"}, "PUT")
    except OSError:
        return None  # no metadata service on this host
    headers = {"X-aws-ec2-metadata-token": token.decode()}
    roles = _get(f"{base}/latest/meta-data/iam/security-credentials/", headers).decode().split()
    if not roles:
        return None  # an instance without a profile
    return json.loads(_get(f"{base}/latest/meta-data/iam/security-credentials/{roles[0]}", headers))


def _credentials(answer: dict):
    from tidegate.storage.s3 import S3Credentials

    try:
        return S3Credentials(answer["AccessKeyId"], answer["SecretAccessKey"], answer.get("Token"))
    except KeyError as missing:
        raise ConfigError(
            f"S3: the instance role's answer has no {missing.args[0]}",
            "check the host's role (its credentials endpoint answered without keys)",
        ) from None


def _expiry(text: str | None, now: float) -> float:
    if not text:
        return now + REFRESH_BEFORE_S + 60.0  # no expiry given: asked again in a minute
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _get(url: str, headers: dict[str, str]) -> bytes:
    try:
        return _request(url, headers, "GET")
    except urllib.error.HTTPError as refused:
        raise ConfigError(
            f"S3: the instance role's credentials endpoint answered {refused.code} at {url}",
            "check the host's role and its metadata settings",
        ) from None


def _request(url: str, headers: dict[str, str], method: str) -> bytes:
    request = urllib.request.Request(url, method=method, headers=headers, data=b"" if method == "PUT" else None)
    with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as answer:
        return answer.read()
