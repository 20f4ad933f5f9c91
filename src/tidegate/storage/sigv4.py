"""One signed S3 request (AWS Signature Version 4), for what pyarrow does not expose.

``pyarrow.fs.S3FileSystem`` writes, reads and lists, but sends no conditional headers, so a
put-if-absent (``If-None-Match: *``) — the one atomic step an S3 commit rests on
(:class:`tidegate.storage.store.S3Store`) — goes through :func:`s3_request`: a path-style
request signed with the store's keys — or, with none in the environment, the host's instance
role's (:mod:`tidegate.storage.role_credentials`) — standard library only.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import urllib.error
import urllib.parse
import urllib.request

AWS_S3_ENDPOINT = "https://s3.{region}.amazonaws.com"


def s3_request(
    settings,
    method: str,
    bucket: str,
    key: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    timeout_s: float = 10.0,
    query: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    """One path-style request to ``settings``' store (an :class:`~tidegate.storage.s3.S3Settings`),
    signed with its keys (or the instance role's), with ``query`` as its query string; (status, body). HTTP errors are
    answers, not exceptions; a store that cannot be reached raises ``OSError``."""
    credentials = settings.credentials
    if credentials is None:  # none in the environment: the host's role, as the SDK's chain would find it
        from tidegate.storage.role_credentials import role_credentials

        credentials = role_credentials()
    base = settings.endpoint or AWS_S3_ENDPOINT.format(region=settings.region)
    endpoint = urllib.parse.urlsplit(base)
    path = "/" + urllib.parse.quote(f"{bucket}/{key}" if key else bucket, safe="/-_.~")
    query_string = "&".join(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
        for k, v in sorted((query or {}).items())
    )
    now = datetime.datetime.now(datetime.UTC)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    payload = hashlib.sha256(body).hexdigest()
    signed = {"host": endpoint.netloc, "x-amz-content-sha256": payload, "x-amz-date": stamp}
    if credentials.session_token:
        signed["x-amz-security-token"] = credentials.session_token
    signed.update({k.lower(): v.strip() for k, v in (headers or {}).items()})
    names = ";".join(sorted(signed))
    canonical = "\n".join(
        [method, path, query_string, *(f"{k}:{signed[k]}" for k in sorted(signed)), "", names, payload]
    )
    scope = f"{day}/{settings.region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key_bytes = ("AWS4" + credentials.secret_access_key).encode()
    for part in (day, settings.region, "s3", "aws4_request"):
        key_bytes = hmac.new(key_bytes, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key_bytes, to_sign.encode(), hashlib.sha256).hexdigest()
    signed["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={credentials.access_key_id}/{scope}, SignedHeaders={names}, Signature={signature}"
    )
    signed.pop("host")
    url = base + path + (f"?{query_string}" if query_string else "")
    request = urllib.request.Request(url, data=body or None, method=method, headers=signed)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()
