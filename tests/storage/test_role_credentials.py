"""A commit record created with an instance role's credentials (tidegate.storage.role_credentials).

There is no cloud here, so the role's side is a loopback server speaking the metadata
services' protocols as AWS documents them — IMDSv2 (a session token, then the role's name,
then its credentials) and a container credentials endpoint — and handing out the keys of a
real SeaweedFS store (tests/s3.py); the conditional PUTs are made against that real store.
Its answers carry no session token: the store's identity is a static key pair, which takes
none (a real role's answer has one, sent as ``x-amz-security-token``).
"""

from __future__ import annotations

import dataclasses
import datetime
import http.server
import json
import threading
import time

import pytest

from tidegate.errors import ConfigError
from tidegate.storage import role_credentials
from tidegate.storage.seaweedfs import free_ports
from tidegate.storage.store import S3Store

TOKEN = "imds-session-token"
ROLE = "tidegate-driver"


class MetadataService(http.server.ThreadingHTTPServer):
    """IMDSv2 and a container credentials endpoint on loopback; ``answers`` counts credential answers."""

    def __init__(self, keys, expires_in_s: float = 3600.0, container_token: str | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.keys, self.expires_in_s, self.container_token = keys, expires_in_s, container_token
        self.answers = 0
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
                "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        ).encode()


class _Handler(http.server.BaseHTTPRequestHandler):
    server: MetadataService

    def log_message(self, *args) -> None:
        pass

    def do_PUT(self) -> None:
        if self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            return self._send(200, TOKEN.encode())
        self._send(400, b"")

    def do_GET(self) -> None:
        if self.path == "/ecs/credentials":
            if self.server.container_token and self.headers.get("Authorization") != self.server.container_token:
                return self._send(401, b"")
            return self._send(200, self.server.credentials())
        if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:  # IMDSv2: no token, no answer
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


@pytest.fixture(autouse=True)
def no_cached_role():
    role_credentials.forget()
    yield
    role_credentials.forget()


@pytest.fixture
def east(s3_stores):
    return s3_stores["east"]


def keyless_store(server) -> S3Store:
    return S3Store(dataclasses.replace(server.settings(), credentials=None))


def test_with_no_keys_a_commit_record_is_created_once_with_the_instance_roles_credentials(east, monkeypatch):
    service = MetadataService(east.credentials)
    for name in (
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_EC2_METADATA_DISABLED",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", service.endpoint)
    store = keyless_store(east)
    record = f"tidegate-east/role-{time.time_ns()}/_commits/0.json"

    assert store.put_if_absent(record, b'{"batch": 0}') is True
    assert store.put_if_absent(record, b'{"batch": 0, "again": true}') is False  # the store decided once
    assert east.settings().arrow_filesystem().open_input_stream(record).read() == b'{"batch": 0}'
    assert service.answers == 1  # kept until shortly before they expire, not asked per request


def test_credentials_about_to_expire_are_fetched_again(east, monkeypatch):
    service = MetadataService(east.credentials, expires_in_s=role_credentials.REFRESH_BEFORE_S - 60)
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", service.endpoint)
    env = {"AWS_EC2_METADATA_SERVICE_ENDPOINT": service.endpoint}
    role_credentials.role_credentials(env)
    role_credentials.role_credentials(env)
    assert service.answers == 2


def test_a_container_endpoint_is_asked_first_with_its_authorization_token(east, tmp_path):
    service = MetadataService(east.credentials, container_token="container-secret")
    token_file = tmp_path / "token"
    token_file.write_text("container-secret\n")
    env = {
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": service.endpoint + "/ecs/credentials",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(token_file),
        "AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:9",
    }  # never reached
    found = role_credentials.role_credentials(env)
    assert found.access_key_id == east.credentials.access_key_id and service.answers == 1
    assert east.credentials.secret_access_key not in repr(found)


def test_a_host_with_no_keys_and_no_role_is_told_what_to_set():
    closed = free_ports(1)[0]  # nothing listens there
    with pytest.raises(ConfigError) as refused:
        role_credentials.role_credentials({"AWS_EC2_METADATA_SERVICE_ENDPOINT": f"http://127.0.0.1:{closed}"})
    assert "ACCESS_KEY_ID" in refused.value.fix and "no instance role answered" in str(refused.value)
    with pytest.raises(ConfigError):
        role_credentials.role_credentials({"AWS_EC2_METADATA_DISABLED": "true"})
