"""The check service under load (runtime/checks/request_limit.py, check_server.py, check_service.py):
a request has a time limit, the error names its job, and no other job's check waits on a
costly one for much longer than that limit.

Each service here is the real loop in its own process, serving a small command table: a job
whose check sleeps in a Spark task, one whose check sleeps in Python, and one that counts
with Spark and answers at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from support import put_request
from tidegate.errors import ConfigError
from tidegate.runtime.checks import check_service
from tidegate.runtime.checks.check_server import STOPPED_EXIT

SERVICE = """
import sys, time
from pathlib import Path
from tidegate.runtime.checks import check_server

def run(argv):
    job = argv[1]
    if job == "sleeps-in-spark":  # a Spark task that would take 10 minutes: only a cancelled job ends it
        from pyspark.sql import SparkSession
        SparkSession.builder.getOrCreate().range(1).selectExpr(
            "reflect('java.lang.Thread', 'sleep', 600000L)").collect()
    elif job == "sleeps-in-python":  # no Spark job to cancel
        time.sleep(600)
    elif job == "counts":
        from pyspark.sql import SparkSession
        print("counted", SparkSession.builder.getOrCreate().range(1000).count())
    print("checked", job)
    return 0

home, warm, grace_s = Path(sys.argv[1]), sys.argv[2] == "warm", float(sys.argv[3])
if not warm:
    check_server._warm_up = lambda: None
check_server.CANCEL_GRACE_S = grace_s
sys.exit(check_server.serve(home, 120, run))
"""


def _service(home, *, limit_s: float, grace_s: float, warm: bool = False) -> subprocess.Popen:
    """The service loop in its own process, serving requests with a limit of ``limit_s``;
    returned once it is ready (warmed up when ``warm``: Spark and Great Expectations loaded)."""
    env = dict(
        os.environ,
        TIDEGATE_HOME=str(home),
        TIDEGATE_CONTROL_DB=f"sqlite:///{home / 'control.db'}",
        PYTHONPATH=os.pathsep.join(sys.path),
        TIDEGATE_CHECK_REQUEST_LIMIT_S=str(limit_s),
    )
    service = subprocess.Popen(
        [sys.executable, "-c", SERVICE, str(home), "warm" if warm else "cold", str(grace_s)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    folder = check_service.service_dir(home)
    deadline = time.monotonic() + 300
    while not (check_service.serving(home) and not (folder / "warming").exists()):
        assert service.poll() is None and time.monotonic() < deadline, service.communicate(timeout=30)[0]
        time.sleep(0.1)
    return service


def _claimed(home, count: int = 1, within_s: float = 30) -> None:
    """Wait until the service has claimed ``count`` requests."""
    folder = check_service.service_dir(home)
    deadline = time.monotonic() + within_s
    while len(list(folder.glob("*.claimed"))) < count:
        assert time.monotonic() < deadline, "the service claimed no request"
        time.sleep(0.05)


def _in_thread(call) -> tuple[threading.Thread, dict]:
    answer: dict = {}
    thread = threading.Thread(target=lambda: answer.update(value=call()), daemon=True)
    thread.start()
    return thread, answer


def _stop(service: subprocess.Popen) -> str:
    if service.poll() is None:
        service.terminate()
    return service.communicate(timeout=60)[0]


def test_the_limit_is_ten_minutes_unless_the_operator_sets_seconds():
    assert check_service.request_limit_s({}) == check_service.DEFAULT_REQUEST_LIMIT_S == 600.0
    assert check_service.request_limit_s({"TIDEGATE_CHECK_REQUEST_LIMIT_S": "1800"}) == 1800.0
    assert check_service.request_limit_s({"TIDEGATE_CHECK_REQUEST_LIMIT_S": " "}) == 600.0
    # a caller behind a request waits for its limit, its cancellation's grace and one claim
    assert check_service.queue_wait_s(600.0) == 600.0 + check_service.CANCEL_GRACE_S + check_service.CLAIM_TIMEOUT_S


@pytest.mark.parametrize("text", ["10m", "0", "-5", "nan", "inf"])
def test_a_limit_that_is_not_seconds_above_zero_is_refused_with_what_to_give(text):
    with pytest.raises(
        ConfigError, match="not a number of seconds above 0 — give seconds, e.g. TIDEGATE_CHECK_REQUEST_LIMIT_S=600"
    ):
        check_service.request_limit_s({"TIDEGATE_CHECK_REQUEST_LIMIT_S": text})


@pytest.mark.spark
@pytest.mark.slow
def test_a_check_past_the_limit_is_cancelled_and_named_and_the_next_jobs_check_is_answered(tmp_path, monkeypatch):
    """
    limit 3 s   |0        3 s        ~4 s
    sleeps-in-spark   [======X cancelled → answered exit 2, naming the job and the limit
    counts                 (queued) ····[= answered exit 0]
    """
    monkeypatch.setenv("TIDEGATE_CHECK_REQUEST_LIMIT_S", "3")
    service = _service(tmp_path, limit_s=3, grace_s=20, warm=True)
    try:
        costly, costly_answer = _in_thread(
            lambda: check_service.run(tmp_path, ["check", "sleeps-in-spark", "--target", "east"], timeout_s=120)
        )
        _claimed(tmp_path)
        queued_at = time.monotonic()
        other = check_service.run(tmp_path, ["check", "counts", "--target", "east"], timeout_s=120)
        waited_s = time.monotonic() - queued_at
        costly.join(120)
        slow = costly_answer["value"]
        assert slow is not None and slow.exit_code == 2, slow
        last_line = slow.output.strip().splitlines()[-1]  # what the Airflow task's failure shows
        assert (
            "the check of job sleeps-in-spark ran past the check service's limit of 3 s per request "
            "and its Spark jobs were cancelled"
        ) in last_line and "TIDEGATE_CHECK_REQUEST_LIMIT_S" in last_line
        assert slow.seconds < 3 + 20, "the Spark task sleeps 10 minutes: only its cancellation ends it this soon"
        assert other is not None and other.exit_code == 0 and "counted 1000\nchecked counts" in other.output, other
        assert waited_s < 3 + 20, waited_s
        assert service.poll() is None and check_service.serving(tmp_path), "the service must go on serving"
    finally:
        log = _stop(service)
    assert "sleeps-in-spark --target=east → exit 2" in log and "counts --target=east → exit 0" in log, log


def test_a_check_stuck_in_python_past_the_limit_is_answered_and_the_service_steps_aside(tmp_path):
    """A request its Spark cancellation cannot end: the service answers it, releases its lock
    and exits; the request queued behind it is taken back by its client, which runs it itself."""
    service = _service(tmp_path, limit_s=1, grace_s=0.5)
    try:
        stuck, stuck_answer = _in_thread(
            lambda: check_service.run(tmp_path, ["check", "sleeps-in-python", "--target", "east"], timeout_s=30)
        )
        _claimed(tmp_path)
        started = time.monotonic()
        queued = check_service.run(tmp_path, ["check", "counts", "--target", "east"], timeout_s=30)
        assert queued is None and time.monotonic() - started < 1 + 0.5 + 5
        assert service.wait(30) == STOPPED_EXIT
        stuck.join(30)
        answer = stuck_answer["value"]
        assert answer is not None and answer.exit_code == 2, answer
        assert (
            "the check of job sleeps-in-python ran past the check service's limit of 1 s per request" in answer.output
            and "the service stopped" in answer.output
        ), answer.output
        folder = check_service.service_dir(tmp_path)
        assert not check_service.serving(tmp_path) and not list((folder / "requests").glob("*.json"))
    finally:
        log = _stop(service)
    assert "is still running 0.5 s after its limit; stopping" in log, log


def test_a_caller_queued_behind_a_long_request_falls_back_within_the_limit_and_a_margin(tmp_path, monkeypatch):
    """The client's own bound, whatever the service does: here the service allows a request a
    minute, the caller a second (with margins of half a second each)."""
    monkeypatch.setenv("TIDEGATE_CHECK_REQUEST_LIMIT_S", "1")
    monkeypatch.setattr(check_service, "CANCEL_GRACE_S", 0.5)
    monkeypatch.setattr(check_service, "CLAIM_TIMEOUT_S", 0.5)
    service = _service(tmp_path, limit_s=60, grace_s=1)
    folder = check_service.service_dir(tmp_path)
    try:
        put_request(folder, "1-0000000a", json.dumps({"argv": ["check", "sleeps-in-python", "--target", "east"]}))
        _claimed(tmp_path)
        assert not (folder / "1-0000000a.done").exists(), (folder / "1-0000000a.log").read_text()
        started = time.monotonic()
        queued = check_service.run(tmp_path, ["check", "counts", "--target", "east"], timeout_s=30)
        waited_s = time.monotonic() - started
        assert queued is None, queued
        # at its own bound, far short of the minute the service gives the request it holds
        # (the margin is for a loaded machine: the client polls, and renames its request back)
        assert check_service.queue_wait_s(1) == 2.0 <= waited_s < 15.0, waited_s
        assert not list((folder / "requests").glob("*.json")), "a request taken back must not run later"
        assert service.poll() is None  # still on the long request: nothing waited for it
    finally:
        _stop(service)
