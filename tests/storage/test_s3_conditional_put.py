"""A commit record's conditional PUT is sent once: when its answer is lost, the SDK does not
send it again into a 412 that would make the commit delete the files its own record lists.

A loopback proxy in front of a real SeaweedFS store (tests/s3.py) forwards every request and,
while told to, drops the answer to each PUT: the PUT lands, its sender sees the connection
closed — a timeout's effect, without the wait.
"""

from __future__ import annotations

import dataclasses
import http.client
import http.server
import threading
import time
from pathlib import PurePosixPath
from urllib.parse import urlsplit

import pytest

from s3 import BUCKETS
from tidegate.lineage.commits import CommittedFile, commit_batch, read_record
from tidegate.storage import aws
from tidegate.storage.store import S3Store


class AnswerLosingProxy(http.server.ThreadingHTTPServer):
    """Forwards to ``target``; while ``lose_puts``, a PUT is forwarded and its answer dropped.
    ``puts`` counts the PUTs that reached the store through it."""

    def __init__(self, target: str) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        self.target = urlsplit(target)
        self.lose_puts, self.puts = True, 0
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Forward(http.server.BaseHTTPRequestHandler):
    server: AnswerLosingProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() != "expect"}  # Host kept: it is signed
        store = http.client.HTTPConnection(self.server.target.hostname, self.server.target.port, timeout=30)
        store.request(self.command, self.path, body=body, headers=headers)
        answer = store.getresponse()
        data = answer.read()
        store.close()
        if self.command == "PUT":
            self.server.puts += 1
            if self.server.lose_puts:
                self.close_connection = True  # landed; its answer never comes back
                return
        self.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in ("connection", "transfer-encoding", "content-length"):
                self.send_header(name, value)
        # a HEAD's length is the object's, not its empty body's
        self.send_header("Content-Length", answer.getheader("Content-Length") or str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _forward


@pytest.fixture
def proxied(s3_stores):
    """(a store reached through an answer-losing proxy, the same store reached directly)."""
    east = s3_stores["east"]
    proxy = AnswerLosingProxy(east.endpoint)
    settings = east.settings()
    yield S3Store(dataclasses.replace(settings, endpoint=proxy.endpoint)), S3Store(settings), proxy
    proxy.shutdown()
    aws.forget()


def test_a_conditional_put_whose_answer_is_lost_is_not_sent_again(proxied):
    through_proxy, _direct, proxy = proxied
    assert through_proxy.settings.attempts == 2  # what the store's other calls are allowed
    record = f"{BUCKETS['east']}/put-once-{time.time_ns()}/_commits/0.json"
    with pytest.raises(OSError):
        through_proxy.put_if_absent(record, b'{"attempt": "a"}')
    assert proxy.puts == 1
    # the SDK's own retries would have sent it again (and met the 412 of the first)
    with pytest.raises(Exception, match="Connection was closed"):
        aws.client(through_proxy.settings).put_object(
            Bucket=BUCKETS["east"], Key=record.partition("/")[2] + "-retried", Body=b"{}", IfNoneMatch="*"
        )
    assert proxy.puts == 3


def test_a_commit_whose_answer_was_lost_keeps_its_files_when_retried(proxied):
    through_proxy, direct, proxy = proxied
    base = PurePosixPath(f"{BUCKETS['east']}/commit-{time.time_ns()}/output")
    files = [CommittedFile(hour=0, path="date=0/batch=7/part-a-00000.parquet", rows=3)]
    direct.write_bytes(base / files[0].path, b"rows of attempt a")

    with pytest.raises(OSError):  # the record landed; the driver cannot know
        commit_batch(through_proxy, base, 7, files, epoch=1, attempt="a")
    proxy.lose_puts = False
    # the driver retries the step: the 412 is on its own record, so it won, and its files stay
    assert commit_batch(through_proxy, base, 7, files, epoch=1, attempt="a") is True
    assert direct.read_bytes(base / files[0].path) == b"rows of attempt a"
    assert read_record(direct, base, 7)["attempt"] == "a"

    # another attempt of the same batch finds a record that is not its own: it lost
    direct.write_bytes(base / "date=0/batch=7/part-b-00000.parquet", b"rows of attempt b")
    other = [CommittedFile(hour=0, path="date=0/batch=7/part-b-00000.parquet", rows=3)]
    assert commit_batch(direct, base, 7, other, epoch=1, attempt="b") is False
    assert not direct.exists(base / other[0].path) and direct.exists(base / files[0].path)
