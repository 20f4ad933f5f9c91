"""The warm check service (runtime/checks/check_service.py): requests answered by one process,
and a request no service answers returned to the caller, never left to run later."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tidegate.runtime.checks import check_service


def _hold_lock(home, seconds: float) -> subprocess.Popen:
    """A process that holds the service lock (as a service would) and takes no request."""
    folder = check_service.service_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    code = ("import fcntl, sys, time; h = open(sys.argv[1], 'a+'); fcntl.flock(h, fcntl.LOCK_EX); "
            "print('held', flush=True); time.sleep(float(sys.argv[2]))")
    holder = subprocess.Popen([sys.executable, "-c", code, str(folder / "lock"), str(seconds)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_without_a_service_a_request_returns_none_at_once_and_leaves_nothing(tmp_path):
    assert not check_service.serving(tmp_path)
    started = time.monotonic()
    assert check_service.run(tmp_path, ["check", "job", "--target", "east"]) is None
    assert time.monotonic() - started < 1.0
    assert not list((tmp_path / "checks").rglob("*.json"))


def test_a_request_the_service_never_claims_is_taken_back_when_the_service_goes(tmp_path):
    holder = _hold_lock(tmp_path, 1.0)
    try:
        assert check_service.serving(tmp_path)
        assert check_service.run(tmp_path, ["check", "job", "--target", "east"], timeout_s=30) is None
    finally:
        holder.wait(10)
    assert not check_service.serving(tmp_path)
    folder = check_service.service_dir(tmp_path)
    assert not list((folder / "requests").glob("*.json")), "a retracted request must not be run later"


def test_a_request_claimed_by_a_service_that_dies_returns_none(tmp_path):
    holder = _hold_lock(tmp_path, 60.0)
    folder = check_service.service_dir(tmp_path)

    def claim_then_die():  # the service's claim, then its death mid-check
        while not list((folder / "requests").glob("*.json")):
            time.sleep(0.05)
        request = next((folder / "requests").glob("*.json"))
        request.rename(folder / f"{request.stem}.claimed")
        holder.kill()

    import threading

    threading.Thread(target=claim_then_die, daemon=True).start()
    assert check_service.run(tmp_path, ["check", "job", "--target", "east"], timeout_s=30) is None
    assert not list(folder.glob("*.claimed"))


def test_only_checks_and_batch_references_are_served(tmp_path):
    with pytest.raises(ValueError, match="runs check, batch-reference, not 'job'"):
        check_service.run(tmp_path, ["job", "stop", "x"])


def test_the_services_spark_starts_quick_it_checks_spans_not_long_runs(monkeypatch):
    import tidegate.spark.session as session
    import tidegate.validation  # noqa: F401  (loaded here, so the warm-up's import is cheap)

    asked = []
    monkeypatch.setattr(session, "build_session", lambda name, **kwargs: asked.append((name, kwargs)))
    check_service._warm_up()
    assert asked == [("tidegate-check-service", {"quick_jvm": True})]


def test_the_idle_setting_is_a_duration_or_off():
    assert check_service.idle_setting({}) == 900.0
    assert check_service.idle_setting({"TIDEGATE_CHECK_SERVICE": "2m"}) == 120.0
    assert check_service.idle_setting({"TIDEGATE_CHECK_SERVICE": "off"}) is None


@pytest.mark.spark
@pytest.mark.slow
def test_one_warm_process_answers_request_after_request_then_exits_when_idle(tmp_path):
    env = dict(os.environ, TIDEGATE_HOME=str(tmp_path), TIDEGATE_CONTROL_DB=f"sqlite:///{tmp_path / 'control.db'}")
    pid = check_service.start(tmp_path, idle_s=8, env=env)
    assert pid is not None
    try:
        answers = []
        for _ in range(2):  # a job that is not registered: the command's own error, from the service
            served = check_service.run(tmp_path, ["check", "no-such-job", "--target", "east"],
                                       timeout_s=300, starting=pid)
            assert served is not None, (check_service.service_dir(tmp_path) / "service.log").read_text()
            answers.append(served)
        assert [(a.exit_code, "job no-such-job never ran in east" in a.output) for a in answers] == [(2, True)] * 2, \
            [a.output for a in answers]
        assert answers[1].seconds < answers[0].seconds or answers[1].seconds < 5  # warm: no Spark start
        assert check_service.start(tmp_path, idle_s=8, env=env) is None  # it serves: no second one
        # `tidegate check` from a shell hands itself to the serving service; --here keeps it in the shell
        shell = [subprocess.run([sys.executable, "-m", "tidegate.cli", "check", "no-such-job", "--target", "east",
                                 *here], env=env, capture_output=True, text=True, timeout=300)
                 for here in ([], ["--here"])]
        assert [(done.returncode, "job no-such-job never ran in east" in done.stderr)
                for done in shell] == [(2, True)] * 2
        log = (check_service.service_dir(tmp_path) / "service.log").read_text()
        assert log.count("ready (pid") == 1 and log.count("→ exit 2") == 3, log
        deadline = time.monotonic() + 60
        while check_service.serving(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not check_service.serving(tmp_path), "the service must exit after its idle time"
        assert "idle for 8 s, exiting" in (check_service.service_dir(tmp_path) / "service.log").read_text()
    finally:
        check_service.stop(tmp_path, grace_s=2)
