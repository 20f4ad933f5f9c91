"""A warm completeness checker: one long-lived process with Spark and Great Expectations loaded.

A check run as its own ``spark-submit`` spends most of its time starting: the JVM and
SparkContext, importing Great Expectations, and the first queries' planning (about 50 of
70 s on a quiet 2-core machine, several times that beside two duplicates). The service
pays that once. It runs ``tidegate check`` and ``tidegate batch-reference`` requests with
the same code and arguments as the command line (which hands :func:`serve` the way it runs
them), in its warm session, one at a time, and exits after ``idle_s`` without a request.

Requests are files under ``$TIDEGATE_HOME/checks/service/``:

* ``lock`` — the service holds an exclusive ``flock`` on it while it serves; a free lock
  means no service;
* ``requests/<id>.json`` — ``{"argv": [...]}``, written atomically by the client;
* ``<id>.claimed`` — the service took it (a rename: the client may retract a request the
  service has not claimed by renaming it away, and only one of the two renames succeeds);
* ``<id>.log`` and ``<id>.done`` (``{"exit": code}``) — its output and its end.

:func:`run` is the client: it returns None when no service took the request (none runs,
or it exited or died before finishing it), and the caller runs the check its own way.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

COMMANDS = ("check", "batch-reference")  # what the service runs; anything else is refused
POLL_S = 0.2
_serving_here = False  # this process is a service: its own requests never go to a service
CLAIM_TIMEOUT_S = 15.0  # a live service claims a request within a poll, unless it is busy with another


def service_dir(home: Path) -> Path:
    return Path(home) / "checks" / "service"


def serving_here() -> bool:
    """Whether this process is a check service (its commands run here, not forwarded)."""
    return _serving_here


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


def start(home: Path, idle_s: float, env: dict[str, str] | None = None) -> int | None:
    """Launch a service for ``home`` (detached; it exits after ``idle_s`` idle); its PID, or
    None when one already serves."""
    from tidegate.runtime.process import spawn_detached

    if serving(home):
        return None
    folder = service_dir(home)
    return spawn_detached([sys.executable, "-m", "tidegate.cli", "check-service", "--idle-exit", str(idle_s)],
                          folder / "service.log", env=env)


def start_unless_off(home: Path, env: dict[str, str] | None = None) -> tuple[float | None, int | None]:
    """Start the service of ``home`` unless ``TIDEGATE_CHECK_SERVICE`` is ``off`` (see
    :func:`idle_setting`) or one serves already: (the idle setting, None when off; the PID of
    the service started, None when none was)."""
    idle_s = idle_setting()
    if idle_s is None:
        return None, None
    return idle_s, start(home, idle_s, env=env)


def stop(home: Path, grace_s: float = 10.0) -> bool:
    """Stop the service of ``home`` (and its Spark JVM) if one serves; whether one did."""
    from tidegate.runtime.process import terminate

    if not serving(home):
        return False
    pid = int((service_dir(home) / "pid").read_text())
    terminate(pid, grace_s)
    return True


def idle_setting(env: Mapping[str, str] | None = None) -> float | None:
    """``TIDEGATE_CHECK_SERVICE``: how long the service waits idle before it exits (a
    duration, default 15m), or ``off``: every check runs as its own spark-submit."""
    from tidegate.eventtime.durations import parse_duration_us

    text = (os.environ if env is None else env).get("TIDEGATE_CHECK_SERVICE", "15m").strip()
    if text.lower() == "off":
        return None
    return parse_duration_us(text, field="TIDEGATE_CHECK_SERVICE") / 1_000_000


@dataclass(frozen=True)
class Served:
    exit_code: int
    output: str  # what the command printed
    seconds: float  # from the request to its end


def run(home: Path, argv: list[str], *, timeout_s: float = 3600.0, starting: int | None = None) -> Served | None:
    """Run ``tidegate <argv>`` in the service of ``home``. None: no service took it or it
    died before the end (nothing of the request is left behind to run later).

    ``starting``: the PID of a service just started (:func:`start`), waited for while it
    lives — on a loaded machine its imports alone can take minutes."""
    from tidegate.runtime.process import pid_alive

    if argv[:1] and argv[0] not in COMMANDS:
        raise ValueError(f"the check service runs {', '.join(COMMANDS)}, not {argv[0]!r}")
    started = time.monotonic()
    while not serving(home):
        if starting is None or not pid_alive(starting) or time.monotonic() - started > timeout_s:
            return None
        time.sleep(POLL_S)
    folder = service_dir(home)
    request_id = f"{time.time_ns()}-{uuid.uuid4().hex[:8]}"
    requests = folder / "requests"
    requests.mkdir(parents=True, exist_ok=True)
    request = requests / f"{request_id}.json"
    scratch = requests / f".{request_id}.tmp"
    scratch.write_text(json.dumps({"argv": list(argv)}))
    scratch.rename(request)
    claimed, done, log = (folder / f"{request_id}.{suffix}" for suffix in ("claimed", "done", "log"))
    claim_deadline = time.monotonic() + CLAIM_TIMEOUT_S
    while True:
        if done.exists():
            result = json.loads(done.read_text())
            output = log.read_text() if log.exists() else ""
            for leftover in (claimed, done, log):
                leftover.unlink(missing_ok=True)
            return Served(int(result["exit"]), output, time.monotonic() - started)
        alive = serving(home)
        if not claimed.exists() and (not alive or time.monotonic() > claim_deadline and not _busy(folder)):
            if _retract(request, folder / f"{request_id}.retracted"):
                return None
        elif claimed.exists() and not alive and not done.exists():
            claimed.unlink(missing_ok=True)  # the service died while running it
            return None
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"the check service of {home} did not finish {' '.join(argv)} in {timeout_s:.0f} s "
                               f"(its log: {folder / 'service.log'})")
        time.sleep(POLL_S)


def _busy(folder: Path) -> bool:
    """Whether the service is warming up or running some request (a claim not yet done)."""
    return (folder / "warming").exists() or any(not claim.with_suffix(".done").exists()
                                                for claim in folder.glob("*.claimed"))


def _retract(request: Path, to: Path) -> bool:
    try:
        request.rename(to)
    except FileNotFoundError:
        return False  # the service claimed it first
    to.unlink(missing_ok=True)
    return True


def serve(home: Path, idle_s: float, run_command: Callable[[list[str]], int], *, clock=time.monotonic) -> int:
    """Hold the lock and run requests until ``idle_s`` pass without one, or ``home`` goes;
    ``run_command(argv)`` runs one as ``tidegate <argv>`` runs it (the CLI hands it over) and
    returns its exit code."""
    folder = service_dir(home)
    requests = folder / "requests"
    requests.mkdir(parents=True, exist_ok=True)
    handle = open(folder / "lock", "a+")
    if not _lock(handle):
        print(f"a check service already serves {home}", file=sys.stderr)
        handle.close()
        return 0
    global _serving_here
    _serving_here = True
    try:
        (folder / "pid").write_text(str(os.getpid()))
        (folder / "warming").touch()
        _warm_up()
        (folder / "warming").unlink()
        print(f"check service of {home}: ready (pid {os.getpid()}); exits after {idle_s:.0f} s idle", flush=True)
        last = clock()
        while clock() - last < idle_s:
            if not folder.exists():
                print(f"{folder} is gone: stopping", flush=True)
                return 0
            pending = sorted(requests.glob("*.json"))
            if not pending:
                time.sleep(POLL_S)
                continue
            request = pending[0]
            claimed = folder / f"{request.stem}.claimed"
            try:
                request.rename(claimed)
            except FileNotFoundError:  # retracted by its client
                continue
            _answer(claimed, run_command)
            last = clock()
        print(f"check service of {home}: idle for {idle_s:.0f} s, exiting", flush=True)
        return 0
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def _lock(handle, tries: int = 10) -> bool:
    """Take the service lock; a client probing it (:func:`serving`) holds it for an instant,
    a service for as long as it lives — so a few tries tell the two apart."""
    for _ in range(tries):
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            time.sleep(0.1)
    return False


def _warm_up() -> None:
    """What every check needs, loaded before the first request: the session and GX."""
    from tidegate.spark.session import build_session

    build_session("tidegate-check-service", quick_jvm=True)  # spans, not long runs: C2 never pays back
    import tidegate.validation  # noqa: F401  (imports Great Expectations: seconds of CPU)


def _answer(claimed: Path, run_command: Callable[[list[str]], int]) -> None:
    argv = json.loads(claimed.read_text())["argv"]
    output = io.StringIO()
    started = time.monotonic()
    if not argv or argv[0] not in COMMANDS:
        output.write(f"tidegate: error: the check service runs {', '.join(COMMANDS)}, not {argv[:1]}\n")
        code = 2
    else:
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            try:
                code = int(run_command(list(argv)) or 0)
            except SystemExit as exc:  # argparse refusing the arguments
                code = exc.code if isinstance(exc.code, int) else 2
            except Exception as exc:  # noqa: BLE001 — reported to the client, the service goes on
                output.write(f"tidegate: error: {type(exc).__name__}: {exc}\n")
                code = 1
    _release_cached_data()
    log = claimed.with_suffix(".log")
    log.write_text(output.getvalue())
    print(f"{' '.join(argv)} → exit {code} in {time.monotonic() - started:.1f} s", flush=True)
    scratch = claimed.with_suffix(".done.tmp")
    scratch.write_text(json.dumps({"exit": code}))
    scratch.rename(claimed.with_suffix(".done"))


def _release_cached_data() -> None:
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is not None:
        spark.catalog.clearCache()
