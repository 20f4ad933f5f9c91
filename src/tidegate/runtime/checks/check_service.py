"""A warm completeness checker: one long-lived process with Spark and Great Expectations loaded.

A check run as its own ``spark-submit`` spends most of its time starting: the JVM and
SparkContext, importing Great Expectations, and the first queries' planning (most of its
time, and several times longer beside two duplicates). The service
pays that once. It runs ``tidegate output check`` and ``tidegate job batch-reference`` requests with
the same code and arguments as the command line, in its warm session, one at a time, and
exits after ``idle_s`` without a request.

This module is the service's folder and the client's side: starting and stopping a
service, and :func:`run`, which submits a request and waits for its answer. The service's
own side — the lock held, the loop, each request checked and answered — is
:mod:`.check_server`.

Requests are files under ``$TIDEGATE_HOME/checks/service/``:

* ``lock`` — the service holds an exclusive ``flock`` on it while it serves; a free lock
  means no service;
* ``launch`` — the PID of the service last launched, written under an ``flock`` on the file,
  so that callers that find no service at the same moment launch one between them;
* ``requests/<id>.json`` — ``{"argv": [...]}``, written atomically by the client;
* ``<id>.claimed`` — the service took it (a rename: the client may retract a request the
  service has not claimed by renaming it away, and only one of the two renames succeeds);
* ``<id>.log`` and ``<id>.done`` (``{"exit": code}``) — its output and its end;
* ``results/<id>/`` — what the command writes (``check --result``, ``batch-reference
  --output``): a request names its files there, relative to the service folder, and the
  client moves them to where its caller asked for them.

The folders are private to the service's user (0700, made so and tightened if looser; a
symlinked or foreign one is refused).

:func:`run` is the client: it returns None when no service took the request (none runs,
or it exited or died before finishing it), and the caller runs the check its own way.

A request has a time limit, :func:`request_limit_s` (``TIDEGATE_CHECK_REQUEST_LIMIT_S``,
default :data:`DEFAULT_REQUEST_LIMIT_S`): the service cancels one that runs past it and
answers it with an error (:mod:`.request_limit`), so a costly check holds the queue behind
it for at most the limit and :data:`CANCEL_GRACE_S`. The client does not depend on that
alone: a request not claimed within :func:`queue_wait_s` of being written — the limit,
the grace and :data:`CLAIM_TIMEOUT_S` — is taken back and its caller runs the check itself,
whatever holds the service (a request its limit did not stop, a warm-up that never ends).
The service and its callers read the limit from their own environments; the service takes
its launcher's (:meth:`~tidegate.runtime.jobs.config.PlatformConfig.driver_environment`
keeps ``TIDEGATE_*``), so set it where Airflow and the shells that run checks read it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tidegate.errors import ConfigError, TidegateError

if TYPE_CHECKING:
    from tidegate.processes import Recorded

# What the service runs (anything else is refused): a request's argv[0] names the command by
# the service's own word, the value is how the tidegate command line spells it.
COMMANDS = {"check": ("output", "check"), "batch-reference": ("job", "batch-reference")}
SERVICE_COMMAND = ("output", "check-service")  # the CLI command that serves
LAUNCH_WAIT_S = 600.0  # a service launched this recently and not yet serving is still starting
POLL_S = 0.2
CLAIM_TIMEOUT_S = 15.0  # a live service claims a request within a poll, unless it is busy with another
# A request's time limit. A check reads one span; the slowest, one that also started the service
# (tidegate_airflow.procedures.warm_checks), takes a few minutes at most on a loaded 2-core
# machine. Ten minutes leaves room for that and still bounds what one costly request holds the
# queue for.
DEFAULT_REQUEST_LIMIT_S = 600.0
REQUEST_LIMIT_ENV = "TIDEGATE_CHECK_REQUEST_LIMIT_S"
# How long a request whose Spark jobs were cancelled at the limit has to return: a cancelled
# job fails within a second or two (Python workers are killed 2 s after their task), and the
# command then records the failure; a thread still busy after this is stuck where no Spark
# cancellation reaches (Python code, a driver-side listing) and the service stops.
CANCEL_GRACE_S = 20.0


def service_dir(home: Path) -> Path:
    return Path(home) / "checks" / "service"


def private_dir(path: Path) -> Path:
    """``path`` as a folder only this user may enter: created 0700, tightened to 0700 when
    looser; refused when it is a symlink, not a folder, or another user's."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise TidegateError(
            f"{path} is a symlink or a file, not the check service's folder",
            "remove it: the service makes its folders itself",
        )
    if info.st_uid != os.geteuid():
        raise TidegateError(
            f"{path} belongs to user {info.st_uid}, not to this one ({os.geteuid()})",
            "run the check service as the folder's owner, or remove the folder",
        )
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)  # others could plant requests, or read what checks print
    return path


def write_new(path: Path, text: str) -> None:
    """Write ``path`` afresh (mode 0600), never through a symlink planted there."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def serving(home: Path) -> bool:
    """Whether a service holds the lock of ``home``'s service directory."""
    lock = service_dir(home) / "lock"
    if not lock.exists():
        return False
    with open(lock, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def start(home: Path, idle_s: float, env: dict[str, str] | None = None) -> Recorded | None:
    """Launch a service for ``home`` (detached; it exits after ``idle_s`` idle); its process, or
    None when one already serves. A service launched moments ago that has not yet taken the
    lock (its interpreter is still starting) is not launched again: its process is returned, for
    the caller to wait on as on its own."""
    from tidegate.processes import Recorded
    from tidegate.runtime.jobs.process import spawn_detached

    if serving(home):
        return None
    folder = private_dir(service_dir(home))
    with open(folder / "launch", "a+") as guard:  # two callers at once launch one service
        fcntl.flock(guard, fcntl.LOCK_EX)
        if serving(home):
            return None
        guard.seek(0)
        launched = Recorded.from_text(guard.read(), marker=SERVICE_COMMAND[-1])
        recent = time.time() - os.fstat(guard.fileno()).st_mtime < LAUNCH_WAIT_S  # an old PID may be another's now
        if recent and launched is not None and launched.alive():
            return launched
        process = spawn_detached(
            [sys.executable, "-m", "tidegate.cli", *SERVICE_COMMAND, "--idle-exit", str(idle_s)],
            folder / "service.log",
            env=env,
            marker=SERVICE_COMMAND[-1],
        )
        guard.truncate(0)
        guard.write(process.to_text())
        return process


def start_unless_off(home: Path, env: dict[str, str] | None = None) -> tuple[float | None, Recorded | None]:
    """Start the service of ``home`` unless ``TIDEGATE_CHECK_SERVICE`` is ``off`` (see
    :func:`idle_setting`) or one serves already: (the idle setting, None when off; the
    service started, None when none was)."""
    idle_s = idle_setting()
    if idle_s is None:
        return None, None
    return idle_s, start(home, idle_s, env=env)


def stop(home: Path, grace_s: float = 10.0) -> bool:
    """Stop the service of ``home`` (and its Spark JVM) if one serves; whether one did."""
    process = serving_process(home)
    if process is None:
        return False
    process.terminate(grace_s)
    return True


def serving_process(home: Path) -> Recorded | None:
    """The process serving ``home``, as its pid file records it; None when none serves."""
    from tidegate.processes import Recorded

    pid_file = service_dir(home) / "pid"
    if not serving(home) or not pid_file.exists():
        return None
    process = Recorded.from_text(pid_file.read_text(), marker=SERVICE_COMMAND[-1])
    return process if process is not None and process.alive() else None


def idle_setting(env: Mapping[str, str] | None = None) -> float | None:
    """``TIDEGATE_CHECK_SERVICE``: how long the service waits idle before it exits (a
    duration, default 15m), or ``off``: every check runs as its own spark-submit."""
    from tidegate.eventtime.durations import parse_duration_us

    text = (os.environ if env is None else env).get("TIDEGATE_CHECK_SERVICE", "15m").strip()
    if text.lower() == "off":
        return None
    return parse_duration_us(text, field="TIDEGATE_CHECK_SERVICE") / 1_000_000


def request_limit_s(env: Mapping[str, str] | None = None) -> float:
    """``TIDEGATE_CHECK_REQUEST_LIMIT_S``: the seconds one request may run in the service
    before it is cancelled and answered with an error (default :data:`DEFAULT_REQUEST_LIMIT_S`)."""
    text = (os.environ if env is None else env).get(REQUEST_LIMIT_ENV, "").strip()
    if not text:
        return DEFAULT_REQUEST_LIMIT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < float("inf"):
        raise ConfigError(
            f"{REQUEST_LIMIT_ENV} is {text[:40]!r}, not a number of seconds above 0",
            f"give seconds, e.g. {REQUEST_LIMIT_ENV}={DEFAULT_REQUEST_LIMIT_S:.0f}, or unset it",
        )
    return seconds


def queue_wait_s(limit_s: float) -> float:
    """How long a request may wait unclaimed behind others: the request being run ends by the
    limit and the grace (:data:`CANCEL_GRACE_S`), and the service then claims the next within
    :data:`CLAIM_TIMEOUT_S`."""
    return limit_s + CANCEL_GRACE_S + CLAIM_TIMEOUT_S


@dataclass(frozen=True)
class Served:
    exit_code: int
    output: str  # what the command printed
    seconds: float  # from the request to its end


def run(home: Path, argv: list[str], *, timeout_s: float = 3600.0, starting: Recorded | None = None) -> Served | None:
    """Run ``tidegate <argv>`` in the service of ``home``. None: no service took it or it
    died before the end (nothing of the request is left behind to run later).

    ``starting``: a service just started (:func:`start`), waited for while it
    lives — on a loaded machine its imports alone can take minutes.

    A request the service has not claimed :func:`queue_wait_s` after it was written (the
    service is busy with others, or stuck) is taken back and None returned: no caller waits
    on other jobs' checks for much longer than one request's limit. A request the service
    claimed is waited on until its answer (the service ends it at its limit) or ``timeout_s``."""
    if argv[:1] and argv[0] not in COMMANDS:
        raise ValueError(f"the check service runs {', '.join(COMMANDS)}, not {argv[0]!r}")
    limit_s = request_limit_s()
    started = time.monotonic()
    while not serving(home):
        if starting is None or not starting.alive() or time.monotonic() - started > timeout_s:
            return None
        time.sleep(POLL_S)
    folder = private_dir(service_dir(home))
    request_id = f"{time.time_ns()}-{uuid.uuid4().hex[:8]}"
    requests = private_dir(folder / "requests")
    request = requests / f"{request_id}.json"
    scratch = requests / f".{request_id}.tmp"
    relocated, deliveries = _relocated(list(argv), request_id)
    write_new(scratch, json.dumps({"argv": relocated}))
    scratch.rename(request)
    claimed, done, log = (folder / f"{request_id}.{suffix}" for suffix in ("claimed", "done", "log"))
    claim_deadline = time.monotonic() + CLAIM_TIMEOUT_S
    queue_deadline = time.monotonic() + queue_wait_s(limit_s)
    while True:
        if done.exists():
            result = json.loads(done.read_text())
            output = log.read_text() if log.exists() else ""
            try:
                for written, wanted in deliveries:
                    _deliver(folder / written, wanted)
                    output = output.replace(str(folder / written), str(wanted))
            finally:
                shutil.rmtree(folder / "results" / request_id, ignore_errors=True)
                for leftover in (claimed, done, log):
                    leftover.unlink(missing_ok=True)
            return Served(int(result["exit"]), output, time.monotonic() - started)
        alive, now = serving(home), time.monotonic()
        if not claimed.exists() and (not alive or now > queue_deadline or now > claim_deadline and not _busy(folder)):
            if _retract(request, folder / f"{request_id}.retracted"):
                return None
        elif claimed.exists() and not alive and not done.exists():
            claimed.unlink(missing_ok=True)  # the service died while running it
            return None
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(
                f"the check service of {home} did not finish {' '.join(argv)} in {timeout_s:.0f} s "
                f"(its log: {folder / 'service.log'})"
            )
        time.sleep(POLL_S)


# the options whose value is a path the command writes: the service writes it in its own
# folder (results/<id>/<name>), the client moves it to where it was asked for
_WRITTEN = {"--result": "result.json", "--output": "output"}


def _relocated(argv: list[str], request_id: str) -> tuple[list[str], list[tuple[str, Path]]]:
    """``argv`` with each written path replaced by its place under ``results/<id>/``; and
    (that place, the path asked for) for each."""
    out, deliveries, i = [], [], 0
    while i < len(argv):
        name, eq, value = str(argv[i]).partition("=")
        if name in (*_WRITTEN, "--reference") and (eq or i + 1 < len(argv)):
            if not eq:
                i += 1
                value = argv[i]
            if name == "--reference":  # read by the service, which has a cwd of its own
                out.append(f"{name}={Path(value).absolute()}")
            else:
                place = f"results/{request_id}/{_WRITTEN[name]}"
                out.append(f"{name}={place}")
                deliveries.append((place, Path(value).absolute()))
        else:
            out.append(argv[i])
        i += 1
    return out, deliveries


def _deliver(written: Path, wanted: Path) -> None:
    """Move what the service wrote to where the caller asked for it (a folder's entries into
    an existing folder); nothing when the command wrote nothing."""
    if not written.exists():
        return
    wanted.parent.mkdir(parents=True, exist_ok=True)
    if written.is_dir() and wanted.is_dir():
        for entry in sorted(written.iterdir()):
            if (wanted / entry.name).exists():
                raise FileExistsError(
                    f"{wanted / entry.name} already exists: the check service's {entry.name} was left in {written}"
                )
            shutil.move(str(entry), str(wanted / entry.name))
    else:
        shutil.move(str(written), str(wanted))


def _busy(folder: Path) -> bool:
    """Whether the service is warming up or running some request (a claim not yet done)."""
    return (folder / "warming").exists() or any(
        not claim.with_suffix(".done").exists() for claim in folder.glob("*.claimed")
    )


def _retract(request: Path, to: Path) -> bool:
    try:
        request.rename(to)
    except FileNotFoundError:
        return False  # the service claimed it first
    to.unlink(missing_ok=True)
    return True
