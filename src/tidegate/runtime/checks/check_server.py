"""The check service's own side (:mod:`.check_service` is its folder and the client's side):
it holds the lock, takes requests one at a time, runs each as the command line runs the
command it names (``["check", …]``: ``tidegate output check …``, ``check_service.COMMANDS``) in its
warm session the way the command line hands :func:`serve`, answers it, and exits after
``idle_s`` without a request.

Requests are untrusted input. Every field of a request is checked (the command, its job,
each option and value) and a request that fails a check — or is no JSON at all — is
answered with an exit code and what was wrong, and the service goes on. Nothing a request
says makes the service write outside its own folder: result paths are relative, never hold
``..``, and never pass through a symlink.

Each request runs under the service's time limit (:func:`.check_service.request_limit_s`,
read once when the service starts): one that runs past it has its Spark jobs cancelled, is
answered with an error naming its job and the limit, and the service takes the next. One
that does not return even then (:mod:`.request_limit` says how that is told) is answered
too; the service then releases its lock and exits, so that no check waits on it — the next
one launches a fresh service or runs on its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import io
import json
import os
import re
import shutil
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from tidegate.errors import TidegateError
from tidegate.processes import this_process
from tidegate.runtime.checks.check_service import (
    CANCEL_GRACE_S,
    COMMANDS,
    POLL_S,
    private_dir,
    request_limit_s,
    service_dir,
    write_new,
)
from tidegate.runtime.checks.request_limit import run_within

MAX_REQUEST_BYTES = 64 * 1024  # a request is a command line
ANSWERED_KEPT_S = 3600.0  # an answer no client collected (it died, or no client wrote the request) is swept after this
STOPPED_EXIT = 3  # the service stopped because a request would not end past its limit
_serving_here = False  # this process is a service: its own requests never go to a service


class RequestError(TidegateError):
    """A request the service refuses: it is answered with exit 2 and this message."""


def serving_here() -> bool:
    """Whether this process is a check service (its commands run here, not forwarded)."""
    return _serving_here


def serve(home: Path, idle_s: float, run_command: Callable[[list[str]], int], *, clock=time.monotonic) -> int:
    """Hold the lock and run requests until ``idle_s`` pass without one, or ``home`` goes;
    ``run_command(argv)`` runs one as ``tidegate <argv>`` runs it (the CLI hands it over) and
    returns its exit code.

    A request still running after its limit and the grace leaves this process unable to take
    another: the lock is released and the process exits at once (``os._exit``, exit
    :data:`STOPPED_EXIT`), with no wait on that request's thread or any thread it started."""
    limit_s = request_limit_s()  # before the lock: a bad setting is the operator's error, not a request's
    code = _serve(home, idle_s, run_command, clock, limit_s)
    if code == STOPPED_EXIT:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # the Spark JVM ends with this process (it exits when its stdin closes)
    return code


def _serve(home: Path, idle_s: float, run_command: Callable[[list[str]], int], clock, limit_s: float) -> int:
    folder = private_dir(service_dir(home))
    requests = private_dir(folder / "requests")
    private_dir(folder / "results")
    handle = open(folder / "lock", "a+")
    if not _lock(handle):
        print(f"a check service already serves {home}", file=sys.stderr)
        handle.close()
        return 0
    global _serving_here
    _serving_here = True
    try:
        write_new(folder / "pid", this_process().to_text())  # check_service.serving_process reads it
        write_new(folder / "warming", "")
        _warm_up()
        (folder / "warming").unlink()
        print(
            f"check service of {home}: ready (pid {os.getpid()}); exits after {idle_s:.0f} s idle; "
            f"a request may run {limit_s:g} s",
            flush=True,
        )
        last = clock()
        while clock() - last < idle_s:
            if not folder.exists():
                print(f"{folder} is gone: stopping", flush=True)
                return 0
            pending = sorted(requests.glob("*.json"))
            if not pending:
                _sweep(folder)
                time.sleep(POLL_S)
                continue
            request = pending[0]
            request_id = request.stem if _REQUEST_ID.fullmatch(request.stem) else f"{time.time_ns()}-badname0"
            claimed = folder / f"{request_id}.claimed"
            try:
                request.rename(claimed)
            except FileNotFoundError:  # retracted by its client
                continue
            refusal = (
                None
                if request_id == request.stem
                else (f"the request file's name {request.name[:80]!r} is not <digits>-<8 hex digits>.json")
            )
            if not _answer(claimed, folder, request_id, run_command, refusal, limit_s=limit_s):
                print(
                    f"check service of {home}: request {request_id} is still running "
                    f"{CANCEL_GRACE_S:g} s after its limit; stopping, so that no check waits on it",
                    flush=True,
                )
                return STOPPED_EXIT
            last = clock()
        print(f"check service of {home}: idle for {idle_s:.0f} s, exiting", flush=True)
        return 0
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


_REQUEST_ID = re.compile(r"[0-9]{1,20}-[0-9a-f]{8}")


def _sweep(folder: Path, kept_s: float = ANSWERED_KEPT_S) -> None:
    """Remove answers no client collected within ``kept_s``."""
    now = time.time()
    for done in folder.glob("*.done"):
        with contextlib.suppress(OSError):
            if now - done.lstat().st_mtime > kept_s:
                for leftover in (done.with_suffix(".claimed"), done.with_suffix(".log"), done):
                    leftover.unlink(missing_ok=True)
                shutil.rmtree(folder / "results" / done.stem, ignore_errors=True)


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
    from tidegate.runtime.jobs.config import load_config
    from tidegate.spark.session import build_session

    # spans, not long runs: C2 never pays back; S3 regions' stores reachable from the start (static settings)
    build_session("tidegate-check-service", conf=load_config().storage_spark_conf(), quick_jvm=True)
    importlib.import_module("tidegate.validation")  # imports Great Expectations: seconds of CPU


def _answer(
    claimed: Path,
    folder: Path,
    request_id: str,
    run_command: Callable[[list[str]], int],
    refusal: str | None = None,
    *,
    limit_s: float | None = None,
) -> bool:
    """Run the claimed request within ``limit_s`` (default: the setting) and record its end; a
    request refused, a command that raised, or one past its limit is recorded as such. Whether
    the service may go on: False when the request's thread would not end (see :func:`serve`)."""
    output = io.StringIO()
    started = time.monotonic()
    shown = "(refused)"
    returned = True
    try:
        if refusal is not None:
            raise RequestError(refusal, "clients write requests through check_service.run")
        argv = request_argv(_read_request(claimed), folder, request_id)
        shown = " ".join(argv)
    except RequestError as exc:
        output.write(f"tidegate: error: the check service refused request {request_id}: {exc}\n")
        code = 2
    except Exception as exc:  # noqa: BLE001 — a check of the request itself failed: answered, not fatal
        output.write(
            f"tidegate: error: the check service could not read request {request_id}: {type(exc).__name__}: {exc}\n"
        )
        code = 2
    else:
        code, returned = run_within(
            argv,
            run_command,
            output,
            request_id=request_id,
            limit_s=request_limit_s() if limit_s is None else limit_s,
            grace_s=CANCEL_GRACE_S,
        )
        if returned:
            _release_cached_data()
    print(f"{request_id}: {shown} → exit {code} in {time.monotonic() - started:.1f} s", flush=True)
    write_new(claimed.with_suffix(".log"), output.getvalue())
    scratch = claimed.with_suffix(".done.tmp")
    write_new(scratch, json.dumps({"exit": code}))
    scratch.rename(claimed.with_suffix(".done"))
    return returned


def _read_request(claimed: Path) -> Any:
    """The JSON of a claimed request file: a regular file (never followed through a link,
    never a pipe that would block) of at most MAX_REQUEST_BYTES of UTF-8."""
    try:
        fd = os.open(claimed, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise RequestError(
            f"the request file cannot be opened ({exc.strerror}; a symlink is refused)",
            "write the request as a plain file",
        ) from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise RequestError("the request is not a plain file", "write the request as a plain file")
        data = handle.read(MAX_REQUEST_BYTES + 1)
    if len(data) > MAX_REQUEST_BYTES:
        raise RequestError(f"the request is larger than {MAX_REQUEST_BYTES} bytes", "a request is one command line")
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RequestError(f"the request is not UTF-8 (byte {exc.start})", "write it as UTF-8 JSON") from None
    except json.JSONDecodeError as exc:  # its msg names the kind of error, never the text
        raise RequestError(
            f"the request is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            'write {"argv": ["check", "<job>", "--target", "<region>", …]}',
        ) from None


def request_argv(request: Any, folder: Path, request_id: str) -> list[str]:
    """The command line a request asks for, every field checked, rebuilt as
    ``[command, job, --option=value, …]``; raises :class:`RequestError` naming the field."""
    if not isinstance(request, dict):
        raise RequestError(f"the request is a JSON {_json_kind(request)}, not an object", 'write {"argv": [...]}')
    unknown = sorted(str(key)[:40] for key in request if key != "argv")
    if unknown or "argv" not in request:
        raise RequestError(
            f"a request has exactly one field, argv{'; not ' + ', '.join(map(repr, unknown)) if unknown else ''}",
            'write {"argv": [...]}',
        )
    argv = request["argv"]
    if not isinstance(argv, list) or not 1 <= len(argv) <= 64:
        raise RequestError("argv must be a list of 1 to 64 strings", 'e.g. ["check", "fleet", "--target", "east"]')
    for i, item in enumerate(argv):
        if not isinstance(item, str):
            raise RequestError(f"argv[{i}] is a JSON {_json_kind(item)}, not a string", "give every argument as text")
        if len(item) > 4096 or any(ord(c) < 32 or ord(c) == 127 for c in item):
            raise RequestError(
                f"argv[{i}] is longer than 4096 characters or holds control characters", "give plain arguments"
            )
    command = argv[0]
    if command not in COMMANDS:
        raise RequestError(
            f"argv[0]: the check service runs {', '.join(COMMANDS)}, not {command[:40]!r}",
            "run other commands with the tidegate command line",
        )
    options = _OPTIONS[command]
    given: dict[str, list[str]] = {}
    positional: list[str] = []
    i = 1
    while i < len(argv):
        token = argv[i]
        if token.startswith("-"):
            name, eq, value = token.partition("=")
            if name not in options:
                raise RequestError(
                    f"argv[{i}]: {command} takes no option {name[:40]!r} here", f"its options: {', '.join(options)}"
                )
            if not eq:
                if i + 1 >= len(argv):
                    raise RequestError(f"argv[{i}]: {name} needs a value", f"give {name} VALUE")
                i += 1
                value = argv[i]
            repeatable, check = options[name]
            if name in given and not repeatable:
                raise RequestError(f"argv[{i}]: {name} is given twice", "give it once")
            given.setdefault(name, []).append(check(value, name, folder, request_id))
        else:
            positional.append(token)
        i += 1
    if len(positional) != 1 or not _JOB.fullmatch(positional[0]):
        raise RequestError(
            f"{command} takes one job name (lower-case letters, digits, '_' and '-'); "
            f"got {len(positional)} positional argument(s)"
            + ("" if len(positional) != 1 else " that is not such a name"),
            f"e.g. {command} fleet …",
        )
    missing = [name for name in _REQUIRED[command] if name not in given]
    if missing:
        raise RequestError(f"{command} needs {', '.join(missing)}", f"its options: {', '.join(options)}")
    return [command, positional[0], *(f"{name}={value}" for name, values in given.items() for value in values)]


def _json_kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "true/false", type(None): "null"}.get(
        type(value), "number"
    )


_JOB = re.compile(r"[a-z0-9][a-z0-9_-]{0,99}")
_REGION_OR_VIEW = re.compile(r"[a-z][a-z0-9-]{0,62}")  # a region, 'consumer' or 'pair'
_COUNT = re.compile(r"[0-9]{1,18}")
_LEAF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _target(value: str, name: str, folder: Path, request_id: str) -> str:
    if not _REGION_OR_VIEW.fullmatch(value):
        raise RequestError(f"{name}: not a region name, 'consumer' or 'pair'", "e.g. --target east")
    return value


def _count(value: str, name: str, folder: Path, request_id: str) -> str:
    if not _COUNT.fullmatch(value):
        raise RequestError(f"{name}: not a whole number", f"e.g. {name} 3")
    return value


def _time(value: str, name: str, folder: Path, request_id: str) -> str:
    from tidegate.eventtime.durations import parse_time_us

    try:
        parse_time_us(value, field=name)
    except (TidegateError, ValueError, OverflowError) as exc:
        raise RequestError(f"{name}: not an ISO-8601 time ({exc})", f"e.g. {name} 2026-01-01T12:00:00Z") from None
    return value


def _label(value: str, name: str, folder: Path, request_id: str) -> str:
    if len(value) > 200:
        raise RequestError(f"{name}: longer than 200 characters", "give a short label")
    return value


def _read_path(value: str, name: str, folder: Path, request_id: str) -> str:
    """A folder the command only reads (a batch reference): absolute, without '..'."""
    path = PurePosixPath(value)
    if not path.is_absolute() or ".." in path.parts:
        raise RequestError(f"{name}: give an absolute path without '..'", f"e.g. {name} /var/tidegate/reference")
    return value


def _written_path(value: str, name: str, folder: Path, request_id: str) -> str:
    """Where the command writes: ``results/<request id>/<name>`` in the service's own folder,
    through no symlink; the real path handed to the command."""
    path = PurePosixPath(value)
    fix = f"name results/{request_id}/<file> (the client moves it where it is wanted)"
    if path.is_absolute():
        raise RequestError(f"{name}: an absolute path; the service writes only in its own folder", fix)
    if ".." in path.parts:
        raise RequestError(f"{name}: the path contains '..'", fix)
    if len(path.parts) != 3 or path.parts[:2] != ("results", request_id) or not _LEAF.fullmatch(path.parts[2]):
        raise RequestError(f"{name}: not a path under results/{request_id}/", fix)
    results = private_dir(private_dir(folder / "results") / request_id)  # refuses a symlinked folder
    target = results / path.parts[2]
    if os.path.lexists(target):
        raise RequestError(f"{name}: {value} exists already (a symlink or an earlier result)", fix)
    return str(target)


# command → option → (may repeat, check of its value)
_Check = Callable[[str, str, Path, str], str]
_OPTIONS: dict[str, dict[str, tuple[bool, _Check]]] = {
    "check": {
        "--target": (True, _target),
        "--run": (False, _count),
        "--from": (False, _time),
        "--to": (False, _time),
        "--reference": (False, _read_path),
        "--result": (False, _written_path),
        "--label": (False, _label),
    },
    "batch-reference": {"--version": (False, _count), "--from": (False, _time), "--output": (False, _written_path)},
}
_REQUIRED = {"check": ("--target",), "batch-reference": ("--from", "--output")}


def _release_cached_data() -> None:
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is not None:
        spark.catalog.clearCache()
