"""One check service request under its time limit: run in a thread of its own, its Spark jobs
in a job group of their own, cancelled and answered with an error when it runs past the limit.

The service runs one request at a time, so a request that does not end holds back the checks
of every other job queued behind it. :func:`run_within` bounds that:

* the request runs in a daemon thread while the service's own thread watches the clock; its
  Spark jobs run in the job group ``tidegate-check-<request id>`` with ``interruptOnCancel``
  (a task blocked in the JVM is interrupted, not only flagged);
* at the limit the group is cancelled together with its future jobs — a check that loses one
  target's query goes on to the next target (:func:`~.completeness.check_all`), and each of
  those queries would otherwise start afresh — and the request has ``grace_s`` to return;
* the request is answered with :class:`RequestOverran` (exit 2, the last line of its output),
  which names the job, the limit and what to do;
* a thread still busy after the grace is stuck where no Spark cancellation reaches (Python
  code, a listing or a plan in the driver's JVM): this process cannot run another request, so
  the caller (:func:`.check_server.serve`) answers it, releases the service's lock and exits.
  The next check launches a new service, or runs on its own.

What this cannot stop is code that holds the interpreter's lock without a pause (a C call
that never returns): the watching thread then never runs. The clients bound their own wait
(:func:`.check_service.queue_wait_s`), so other jobs' checks still go on without the service.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
from collections.abc import Callable

from tidegate.errors import TidegateError
from tidegate.runtime.checks.check_service import COMMANDS, REQUEST_LIMIT_ENV

OVERRAN_EXIT = 2  # an error Tidegate raises on purpose exits 2 (tidegate.cli.dispatch)


class RequestOverran(TidegateError):
    """A request ran past the check service's limit per request."""


def overran(argv: list[str], limit_s: float, *, service_stopped: bool) -> RequestOverran:
    """The error answering ``argv`` (``[command, job, …]``, checked) that ran past ``limit_s``."""
    command, job = argv[0], argv[1]
    what = "check" if command == "check" else "batch reference"
    problem = (
        f"the {what} of job {job} ran past the check service's limit of {limit_s:g} s per request "
        f"and its Spark jobs were cancelled"
    )
    if service_stopped:
        problem += (
            "; it was still running after that, so the service stopped "
            "(the next check starts a new one, or runs on its own)"
        )
    return RequestOverran(
        problem,
        f"check a shorter span of {job} (--from/--to) or find what makes it slow "
        f"(the size of its output and reference; `tidegate {' '.join(COMMANDS[command])} {job} … --here` "
        f"runs it outside the service); if {what}s this large are expected, raise "
        f"{REQUEST_LIMIT_ENV} (seconds) where the service is started and where "
        f"checks are asked for",
    )


def run_within(
    argv: list[str],
    run_command: Callable[[list[str]], int],
    output: io.StringIO,
    *,
    request_id: str,
    limit_s: float,
    grace_s: float,
) -> tuple[int, bool]:
    """``run_command(argv)`` with what it prints in ``output``, for at most ``limit_s``: its exit
    code, and whether it returned (False: its thread is still busy ``grace_s`` after its Spark
    jobs were cancelled, and this process must not take another request)."""
    group = f"tidegate-check-{request_id}"
    result: dict[str, int] = {}
    grouped = threading.Event()

    def work() -> None:
        context = _spark_context()
        if context is not None:
            with contextlib.suppress(Exception):  # no group: the cancellation then takes every job
                context.setJobGroup(group, " ".join(argv)[:200], interruptOnCancel=True)
                grouped.set()
        try:
            result["exit"] = _exit_code(run_command, argv, output)
        finally:
            if grouped.is_set():
                with contextlib.suppress(Exception):  # the JVM may be gone; the thread ends anyway
                    context._jsc.sc().clearJobGroup()

    worker = threading.Thread(target=work, name=f"check-request-{request_id}", daemon=True)
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        worker.start()
        worker.join(limit_s)
        past_limit = worker.is_alive()
        if past_limit:
            _cancel(group, grouped.is_set())
            worker.join(grace_s)
    if not past_limit:
        return result.get("exit", 1), True  # no exit: the thread raised past _exit_code, its traceback is in output
    returned = not worker.is_alive()
    output.write(f"tidegate: error: {overran(argv, limit_s, service_stopped=not returned)}\n")
    return OVERRAN_EXIT, returned


def _exit_code(run_command: Callable[[list[str]], int], argv: list[str], output: io.StringIO) -> int:
    """``run_command``'s exit code; a command that raised is reported in ``output``, not fatal."""
    try:
        return int(run_command(list(argv)) or 0)
    except SystemExit as exc:  # argparse refusing the arguments
        return exc.code if isinstance(exc.code, int) else 2
    except Exception as exc:  # noqa: BLE001 — reported to the client, the service goes on
        output.write(f"tidegate: error: {type(exc).__name__}: {exc}\n")
        return 1


def _spark_context():
    """This process's SparkContext, or None — without importing pyspark (a service whose
    requests never started Spark has none)."""
    pyspark = sys.modules.get("pyspark")
    return None if pyspark is None else pyspark.SparkContext._active_spark_context


def _cancel(group: str, grouped: bool) -> None:
    """Cancel the request's Spark jobs, running and to come. PySpark's ``cancelJobGroup`` ends
    only the running ones, so the JVM's ``cancelJobGroupAndFutureJobs`` is called. A request
    that started Spark itself has no group: the service runs one request at a time, so every
    job of the context is its own."""
    context = _spark_context()
    if context is None:
        return
    with contextlib.suppress(Exception):  # a JVM that is gone runs nothing; the grace then tells
        if grouped:
            context._jsc.sc().cancelJobGroupAndFutureJobs(group, "the check service's limit per request")
        else:
            context.cancelAllJobs()
