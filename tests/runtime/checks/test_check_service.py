"""The warm check service (runtime/checks/check_service.py, its server side check_server.py):
requests answered by one process, and a request no service answers returned to the caller,
never left to run later."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from support import put_request
from tidegate.runtime.checks import check_server, check_service


def _hold_lock(home, seconds: float) -> subprocess.Popen:
    """A process that holds the service lock (as a service would) and takes no request."""
    folder = check_service.service_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    code = (
        "import fcntl, sys, time; h = open(sys.argv[1], 'a+'); fcntl.flock(h, fcntl.LOCK_EX); "
        "print('held', flush=True); time.sleep(float(sys.argv[2]))"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(folder / "lock"), str(seconds)], stdout=subprocess.PIPE, text=True
    )
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

    importlib.import_module("tidegate.validation")  # loaded here, so the warm-up's import is cheap

    asked = []
    monkeypatch.setattr(session, "build_session", lambda name, **kwargs: asked.append((name, kwargs)))
    check_server._warm_up()
    assert asked == [("tidegate-check-service", {"conf": {}, "quick_jvm": True})]  # no S3 region: no S3 settings


def test_the_idle_setting_is_a_duration_or_off():
    assert check_service.idle_setting({}) == 900.0
    assert check_service.idle_setting({"TIDEGATE_CHECK_SERVICE": "2m"}) == 120.0
    assert check_service.idle_setting({"TIDEGATE_CHECK_SERVICE": "off"}) is None


@pytest.mark.spark
@pytest.mark.slow
def test_one_warm_process_answers_request_after_request_then_exits_when_idle(tmp_path):
    env = dict(os.environ, TIDEGATE_HOME=str(tmp_path), TIDEGATE_CONTROL_DB=f"sqlite:///{tmp_path / 'control.db'}")
    with ThreadPoolExecutor(4) as callers:  # a procedure's warm-up and its first check, at the same moment
        launched = set(callers.map(lambda _: check_service.start(tmp_path, idle_s=8, env=env), range(4))) - {None}
    assert len(launched) == 1, launched  # one service between them, not one each
    pid = launched.pop()
    try:
        answers = []
        for _ in range(2):  # a job that is not registered: the command's own error, from the service
            served = check_service.run(
                tmp_path, ["check", "no-such-job", "--target", "east"], timeout_s=300, starting=pid
            )
            assert served is not None, (check_service.service_dir(tmp_path) / "service.log").read_text()
            answers.append(served)
        assert [(a.exit_code, "job no-such-job never ran in east" in a.output) for a in answers] == [(2, True)] * 2, [
            a.output for a in answers
        ]
        assert answers[1].seconds < answers[0].seconds or answers[1].seconds < 5  # warm: no Spark start
        assert check_service.start(tmp_path, idle_s=8, env=env) is None  # it serves: no second one
        # `tidegate output check` from a shell hands itself to the serving service; --here keeps it in the shell
        shell = [
            subprocess.run(
                [sys.executable, "-m", "tidegate.cli", "output", "check", "no-such-job", "--target", "east", *here],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            for here in ([], ["--here"])
        ]
        assert [(done.returncode, "job no-such-job never ran in east" in done.stderr) for done in shell] == [
            (2, True)
        ] * 2
        log = (check_service.service_dir(tmp_path) / "service.log").read_text()
        assert log.count("ready (pid") == 1 and log.count("→ exit 2") == 3, log
        assert "already serves" not in log, log
        deadline = time.monotonic() + 60
        while check_service.serving(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not check_service.serving(tmp_path), "the service must exit after its idle time"
        assert "idle for 8 s, exiting" in (check_service.service_dir(tmp_path) / "service.log").read_text()
    finally:
        check_service.stop(tmp_path, grace_s=2)


# -- requests are untrusted: checked field by field, answered, and the service goes on --------------------

RID = "1700000000000000000-0123abcd"


@pytest.mark.parametrize(
    "request_, problem",
    [
        ([], "a JSON array, not an object"),
        ({"argv": ["check", "fleet", "--target", "east"], "cwd": "/"}, "exactly one field, argv; not 'cwd'"),
        ({}, "exactly one field, argv"),
        ({"argv": "check fleet"}, "argv must be a list of 1 to 64 strings"),
        ({"argv": ["check", "fleet", "--target", 3]}, "argv[3] is a JSON number, not a string"),
        ({"argv": ["job", "stop", "fleet"]}, "runs check, batch-reference, not 'job'"),
        ({"argv": ["check", "fleet", "--target", "east", "--res", "x"]}, "takes no option '--res'"),
        ({"argv": ["check", "fleet", "--target", "east", "--output", "x"]}, "takes no option '--output'"),
        ({"argv": ["check", "fleet", "--target", "../east"]}, "--target: not a region name"),
        ({"argv": ["check", "fleet", "--target", "east", "--run", "-1"]}, "--run: not a whole number"),
        ({"argv": ["check", "fleet", "--target", "east", "--from", "yesterday"]}, "--from: not an ISO-8601 time"),
        ({"argv": ["check", "fleet", "--target", "east", "--label", "a\nb"]}, "holds control characters"),
        ({"argv": ["check", "fleet", "--target", "east", "--reference", "ref"]}, "absolute path without '..'"),
        ({"argv": ["check", "../fleet", "--target", "east"]}, "one job name"),
        ({"argv": ["check", "fleet", "other", "--target", "east"]}, "got 2 positional"),
        ({"argv": ["check", "fleet"]}, "check needs --target"),
        ({"argv": ["check", "fleet", "--target", "east", "--result"]}, "--result needs a value"),
        ({"argv": ["check", "fleet", "--target", "east", "--result", "/etc/cron.d/x"]}, "an absolute path"),
        ({"argv": ["check", "fleet", "--target", "east", "--result=results/../../x"]}, "contains '..'"),
        ({"argv": ["check", "fleet", "--target", "east", "--result", "results/1-00000000/r.json"]}, "not a path under"),
        (
            {"argv": ["batch-reference", "fleet", "--from", "2026-01-01T00:00:00Z", "--output", "/srv/x"]},
            "an absolute path",
        ),
        (
            {
                "argv": [
                    "batch-reference",
                    "fleet",
                    "--from",
                    "2026-01-01T00:00:00Z",
                    "--from",
                    "2026-01-01T00:00:00Z",
                    "--output",
                    f"results/{RID}/output",
                ]
            },
            "--from is given twice",
        ),
    ],
)
def test_every_field_of_a_request_is_checked_with_a_clear_error(tmp_path, request_, problem):
    with pytest.raises(check_server.RequestError) as refused:
        check_server.request_argv(request_, tmp_path, RID)
    assert problem in str(refused.value), str(refused.value)
    assert not (tmp_path / "x").exists()


def test_a_valid_request_is_rebuilt_with_its_result_in_the_services_own_folder(tmp_path):
    argv = check_server.request_argv(
        {
            "argv": [
                "check",
                "fleet",
                "--target",
                "east",
                "--target=consumer",
                "--result",
                f"results/{RID}/result.json",
                "--label",
                "-x y",
                "--from",
                "2026-01-01T00:00:00Z",
            ]
        },
        tmp_path,
        RID,
    )
    result = tmp_path / "results" / RID / "result.json"
    assert argv == [
        "check",
        "fleet",
        "--target=east",
        "--target=consumer",
        f"--result={result}",
        "--label=-x y",
        "--from=2026-01-01T00:00:00Z",
    ]
    assert oct((tmp_path / "results" / RID).stat().st_mode & 0o777) == "0o700"


def test_a_result_path_through_a_symlink_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = tmp_path / "service"
    (folder / "results").mkdir(parents=True)
    os.symlink(outside, folder / "results" / RID)  # the request's own results folder, planted as a link
    with pytest.raises(check_service.TidegateError, match="a symlink or a file"):
        check_server.request_argv(
            {"argv": ["check", "fleet", "--target", "east", "--result", f"results/{RID}/result.json"]}, folder, RID
        )
    os.unlink(folder / "results" / RID)
    (folder / "results" / RID).mkdir()
    os.symlink(outside / "cron", folder / "results" / RID / "result.json")  # the file itself, planted
    with pytest.raises(check_server.RequestError, match="exists already"):
        check_server.request_argv(
            {"argv": ["check", "fleet", "--target", "east", "--result", f"results/{RID}/result.json"]}, folder, RID
        )
    assert list(outside.iterdir()) == []


def test_the_services_folders_are_private_made_so_tightened_and_never_a_symlink(tmp_path):
    folder = check_service.private_dir(tmp_path / "checks" / "service")
    assert folder.stat().st_mode & 0o777 == 0o700
    os.chmod(folder, 0o777)
    check_service.private_dir(folder)
    assert folder.stat().st_mode & 0o777 == 0o700
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "linked")
    with pytest.raises(check_service.TidegateError, match="a symlink or a file, not the check service's folder"):
        check_service.private_dir(tmp_path / "linked")


def _never_run(argv: list[str]) -> int:
    raise AssertionError(f"a refused request ran {argv}")


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"{", "not JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
        (b'{"argv": ["check"', "not JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[1, 2]", "a JSON array, not an object"),
        (b" " * (check_server.MAX_REQUEST_BYTES + 1), "larger than"),
    ],
)
def test_a_malformed_request_is_answered_with_what_was_wrong(tmp_path, content, problem):
    folder = check_service.private_dir(tmp_path / "service")
    claimed = folder / f"{RID}.claimed"
    claimed.write_bytes(content)
    check_server._answer(claimed, folder, RID, _never_run)
    assert json.loads((folder / f"{RID}.done").read_text()) == {"exit": 2}
    log = (folder / f"{RID}.log").read_text()
    assert f"refused request {RID}: the request" in log and problem in log, log


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_request_that_is_not_a_plain_file_is_refused_without_being_followed(tmp_path, kind):
    folder = check_service.private_dir(tmp_path / "service")
    claimed = folder / f"{RID}.claimed"
    if kind == "symlink":
        secret = tmp_path / "secret.json"
        secret.write_text('{"argv": ["check", "hunter2"]}')
        os.symlink(secret, claimed)
    else:
        os.mkfifo(claimed)  # opened blocking, it would hang the service until someone writes to it
    check_server._answer(claimed, folder, RID, _never_run)
    log = (folder / f"{RID}.log").read_text()
    assert json.loads((folder / f"{RID}.done").read_text()) == {"exit": 2} and "hunter2" not in log
    assert "a symlink is refused" in log or "not a plain file" in log, log


def test_what_the_command_writes_in_the_services_folder_reaches_the_path_its_caller_asked_for(tmp_path):
    holder = _hold_lock(tmp_path, 60.0)
    folder = check_service.service_dir(tmp_path)
    wanted = tmp_path / "elsewhere" / "outcomes.json"

    def serve_one():  # the service's part: claim, check the request, write where it says, answer
        while not list((folder / "requests").glob("*.json")):
            time.sleep(0.05)
        request = next((folder / "requests").glob("*.json"))
        claimed = folder / f"{request.stem}.claimed"
        request.rename(claimed)
        argv = check_server.request_argv(json.loads(claimed.read_text()), folder, request.stem)
        result = Path(argv[-1].partition("=")[2])
        result.write_text("[]")
        (folder / f"{request.stem}.log").write_text(f"wrote {result}\n")
        answer = folder / f"{request.stem}.done.tmp"  # the answer appears whole, as the service's does
        answer.write_text('{"exit": 0}')
        answer.rename(answer.with_suffix(""))

    import threading

    threading.Thread(target=serve_one, daemon=True).start()
    try:
        served = check_service.run(
            tmp_path, ["check", "fleet", "--target", "east", "--result", str(wanted)], timeout_s=30
        )
    finally:
        holder.kill()
        holder.wait(10)
    assert served is not None and served.exit_code == 0 and served.output == f"wrote {wanted}\n"
    assert wanted.read_text() == "[]"
    assert not list((folder / "results").iterdir()) and not list(folder.glob("*.done"))


def test_the_service_loop_answers_a_malformed_request_then_a_good_one_and_stays_alive(tmp_path):
    """The real loop in its own process (its Spark warm-up skipped): a request file holding `{`,
    one that names a result outside the service's folder, then a good request."""
    env = dict(
        os.environ,
        TIDEGATE_HOME=str(tmp_path),
        TIDEGATE_CONTROL_DB=f"sqlite:///{tmp_path / 'control.db'}",
        PYTHONPATH=os.pathsep.join(sys.path),
    )
    code = (
        "import sys; from pathlib import Path; from tidegate.runtime.checks import check_server as s; "
        "from tidegate.cli.outputs import run_served; "
        "s._warm_up = lambda: None; sys.exit(s.serve(Path(sys.argv[1]), 60, run_served))"
    )
    service = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        folder = check_service.service_dir(tmp_path)
        deadline = time.monotonic() + 60
        while not check_service.serving(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert check_service.serving(tmp_path)
        assert folder.stat().st_mode & 0o777 == 0o700 and (folder / "requests").stat().st_mode & 0o777 == 0o700
        answers = {}
        for name, content in (
            ("1-0000000a", "{"),
            (
                "2-0000000b",
                json.dumps(
                    {"argv": ["check", "fleet", "--target", "east", "--result", str(tmp_path / "planted.json")]}
                ),
            ),
        ):
            put_request(folder, name, content)
            while not (folder / f"{name}.done").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            answers[name] = (
                json.loads((folder / f"{name}.done").read_text())["exit"],
                (folder / f"{name}.log").read_text(),
            )
        assert answers["1-0000000a"][0] == 2 and "the request is not JSON" in answers["1-0000000a"][1]
        assert answers["2-0000000b"][0] == 2 and "--result: an absolute path" in answers["2-0000000b"][1]
        assert not (tmp_path / "planted.json").exists()
        served = check_service.run(tmp_path, ["check", "no-such-job", "--target", "east"], timeout_s=60)
        assert served is not None and served.exit_code == 2 and "job no-such-job never ran in east" in served.output, (
            served
        )
        assert service.poll() is None, "the service must survive what it was sent"
        serving = check_service.serving_process(tmp_path)  # its pid file: the PID and when it started
        assert serving is not None and serving.pid == service.pid and serving.started_at is not None
    finally:
        service.terminate()
        output = service.communicate(timeout=30)[0]
    assert output.count("→ exit 2") == 3, output


def test_a_service_launched_moments_ago_is_waited_on_one_launched_long_ago_is_not(tmp_path, monkeypatch):
    """A launch not yet serving is still starting; after LAUNCH_WAIT_S its PID may be another
    process's, even another check service's, and a new service is launched."""
    from tidegate.processes import Recorded
    from tidegate.runtime.jobs import process

    starting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "check-service"])
    launch = check_service.private_dir(check_service.service_dir(tmp_path)) / "launch"
    launch.write_text(str(starting.pid))  # a PID alone, as an older release wrote it: its command line decides
    spawned = []
    launched = Recorded(4242, 1234.5, "check-service")
    monkeypatch.setattr(
        process, "spawn_detached", lambda args, log, env=None, marker=None: spawned.append(args) or launched
    )
    try:
        assert check_service.start(tmp_path, idle_s=5).pid == starting.pid and not spawned
        recorded = Recorded.of(starting.pid, marker="check-service")
        launch.write_text(recorded.to_text())
        assert check_service.start(tmp_path, idle_s=5) == recorded and not spawned
        # the PID is there, but it started later than the process recorded: another process's by now
        launch.write_text(Recorded(starting.pid, recorded.started_at - 60).to_text())
        assert check_service.start(tmp_path, idle_s=5) == launched and len(spawned) == 1
        long_ago = time.time() - check_service.LAUNCH_WAIT_S - 1
        os.utime(launch, (long_ago, long_ago))
        assert check_service.start(tmp_path, idle_s=5) == launched and len(spawned) == 2
        assert launch.read_text() == "4242 1234.5"
    finally:
        starting.kill()
        starting.wait()
