"""A store with no keys of its own signs with what botocore's credential chain finds
(tidegate.storage.aws): environment keys with a session token, a container's credentials
endpoint, IMDSv2 — and pyarrow's reads and writes sign with the same keys as the commit records.

There is no cloud here, so a role's side is a loopback server speaking the protocols as AWS
documents them (a container credentials endpoint, IMDSv2), handing out the keys of a real
SeaweedFS store (tests/s3.py) with a session token: the store's identity is a static key pair,
which ignores the token, so the tests check that it is sent and signed, and that the store
accepts the requests that carry it.
"""

from __future__ import annotations

import dataclasses
import datetime
import http.server
import json
import threading
import time

import pytest

from s3 import BUCKETS
from tidegate.errors import ConfigError
from tidegate.storage import aws
from tidegate.storage.store import S3Store

CONTAINER_TOKEN = "container-secret"
IMDS_TOKEN = "imds-session-token"
ROLE = "tidegate-driver"


class RoleService(http.server.ThreadingHTTPServer):
    """A container credentials endpoint (``/ecs/credentials``) and IMDSv2 on loopback; each answer
    carries a new session token. ``answers`` counts credential answers, ``untokened`` the
    instance metadata GETs without a session token (IMDSv1)."""

    def __init__(self, keys, expires_in_s: float = 3600.0, imds_v2: bool = True) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.keys, self.expires_in_s, self.imds_v2 = keys, expires_in_s, imds_v2
        self.answers, self.untokened = 0, 0
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def credentials(self) -> bytes:
        self.answers += 1
        expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=self.expires_in_s)
        return json.dumps(
            {
                "Code": "Success",
                "AccessKeyId": self.keys.access_key_id,
                "SecretAccessKey": self.keys.secret_access_key,
                "Token": f"session-token-{self.answers}",
                "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        ).encode()


class _Handler(http.server.BaseHTTPRequestHandler):
    server: RoleService

    def log_message(self, *args) -> None:
        pass

    def do_PUT(self) -> None:
        if self.server.imds_v2 and self.path == "/latest/api/token":
            return self._send(200, IMDS_TOKEN.encode())
        self._send(404, b"")  # an instance metadata service without IMDSv2

    def do_GET(self) -> None:
        if self.path == "/ecs/credentials":
            if self.headers.get("Authorization") != CONTAINER_TOKEN:
                return self._send(401, b"")
            return self._send(200, self.server.credentials())
        if self.headers.get("X-aws-ec2-metadata-token") != IMDS_TOKEN:
            self.server.untokened += 1
            return self._send(401, b"")
        if self.path == "/latest/meta-data/iam/security-credentials/":
            return self._send(200, ROLE.encode())
        if self.path == f"/latest/meta-data/iam/security-credentials/{ROLE}":
            return self._send(200, self.server.credentials())
        self._send(404, b"")

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def east(s3_stores):
    return s3_stores["east"]


@pytest.fixture
def no_credentials(monkeypatch, tmp_path):
    """An environment in which botocore's chain finds nothing until a test says where to look."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
        "AWS_EC2_METADATA_SERVICE_ENDPOINT",
        "AWS_EC2_METADATA_V1_DISABLED",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    aws.forget()
    yield monkeypatch
    aws.forget()


def keyless_store(server) -> S3Store:
    return S3Store(dataclasses.replace(server.settings(), credentials=None))


def sent_tokens(store: S3Store) -> list[str | None]:
    """The session token of every conditional PUT ``store``'s client sends from now on."""
    sent: list[str | None] = []

    def record(request, **_):
        token = request.headers.get("X-Amz-Security-Token")
        sent.append(token.decode() if isinstance(token, bytes) else token)

    aws.client(store.settings, attempts=1).meta.events.register("before-send.s3.PutObject", record)
    return sent


def prefix() -> str:
    return f"{BUCKETS['east']}/chain-{time.time_ns()}"


def test_environment_keys_with_a_session_token_sign_the_commit_record_and_pyarrow_alike(east, no_credentials):
    no_credentials.setenv("AWS_ACCESS_KEY_ID", east.credentials.access_key_id)
    no_credentials.setenv("AWS_SECRET_ACCESS_KEY", east.credentials.secret_access_key)
    no_credentials.setenv("AWS_SESSION_TOKEN", "env-session-token")
    store = keyless_store(east)
    sent = sent_tokens(store)
    record = f"{prefix()}/_commits/0.json"

    assert store.put_if_absent(record, b'{"batch": 0}') is True
    assert sent == ["env-session-token"]  # signed with the token, and the store took it
    assert store.read_bytes(record) == b'{"batch": 0}'  # pyarrow, with the same keys
    assert aws.current_credentials(store.settings).session_token == "env-session-token"


def test_a_container_endpoint_s_credentials_reach_the_store_and_are_kept_until_they_near_expiry(east, no_credentials):
    service = RoleService(east.credentials)
    no_credentials.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", service.endpoint + "/ecs/credentials")
    no_credentials.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", CONTAINER_TOKEN)
    store = keyless_store(east)
    sent = sent_tokens(store)
    root = prefix()

    store.write_bytes(f"{root}/output/part-0.parquet", b"rows")
    assert store.put_if_absent(f"{root}/_commits/0.json", b'{"batch": 0}') is True
    assert store.put_if_absent(f"{root}/_commits/0.json", b'{"batch": 0, "again": true}') is False
    assert store.exists(f"{root}/output") and store.read_bytes(f"{root}/output/part-0.parquet") == b"rows"
    assert sent == ["session-token-1", "session-token-1"]
    assert service.answers == 1  # one answer for pyarrow and botocore, kept for the hour it is valid


def test_credentials_about_to_expire_are_fetched_again_and_pyarrow_gets_the_new_ones(east, no_credentials):
    # within botocore's mandatory refresh window (10 minutes): asked again at every use
    service = RoleService(east.credentials, expires_in_s=300)
    no_credentials.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", service.endpoint + "/ecs/credentials")
    no_credentials.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", CONTAINER_TOKEN)
    store = keyless_store(east)
    path = f"{prefix()}/doc.json"

    store.write_bytes(path, b"1")
    first = store.filesystem
    store.write_bytes(path, b"2")
    assert service.answers >= 3 and store.filesystem is not first  # made again with the new token
    assert store.read_bytes(path) == b"2"


def test_a_container_endpoint_over_plain_http_off_loopback_is_refused_by_the_chain(east, no_credentials):
    no_credentials.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://192.0.2.10/ecs/credentials")
    no_credentials.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", CONTAINER_TOKEN)
    store = keyless_store(east)
    with pytest.raises(ConfigError) as refused:
        store.put_if_absent(f"{prefix()}/_commits/0.json", b"{}")
    assert "192.0.2.10" in str(refused.value)  # refused before any request: TEST-NET-1 routes nowhere
    with pytest.raises(ConfigError):
        store.read_bytes(f"{prefix()}/x")


def test_the_instance_role_is_read_through_imdsv2(east, no_credentials):
    service = RoleService(east.credentials)
    no_credentials.delenv("AWS_EC2_METADATA_DISABLED")
    no_credentials.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", service.endpoint)
    store = keyless_store(east)
    record = f"{prefix()}/_commits/0.json"
    assert store.put_if_absent(record, b'{"batch": 0}') is True and store.read_bytes(record) == b'{"batch": 0}'
    assert service.answers == 1 and service.untokened == 0


def test_an_instance_metadata_service_without_imdsv2_gives_no_credentials_even_if_told_v1_is_allowed(
    east, no_credentials
):
    service = RoleService(east.credentials, imds_v2=False)
    no_credentials.delenv("AWS_EC2_METADATA_DISABLED")
    no_credentials.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", service.endpoint)
    no_credentials.setenv("AWS_EC2_METADATA_V1_DISABLED", "false")
    with pytest.raises(ConfigError) as refused:
        keyless_store(east).put_if_absent(f"{prefix()}/_commits/0.json", b"{}")
    assert "IMDSv1 has been disabled" in str(refused.value) and "ACCESS_KEY_ID" in refused.value.fix
    assert service.untokened == 0 and service.answers == 0  # no IMDSv1 request was made


def test_a_host_with_no_keys_and_no_role_is_told_what_to_set(east, no_credentials):
    with pytest.raises(ConfigError) as refused:
        keyless_store(east).read_bytes(f"{prefix()}/x")
    assert "ACCESS_KEY_ID" in refused.value.fix
