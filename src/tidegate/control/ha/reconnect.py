"""Riding out a promotion: how every client of the control database follows the primary.

A client opens the database by a multi-host URL with ``target_session_attrs=read-write``
(:func:`tidegate.control.ha.topology.multi_host_url`): libpq tries each region's server and
keeps the one that accepts writes. While the primary's region is lost and the other is
not promoted yet — the promotion window, about Patroni's ``ttl`` — no server accepts
writes. Two things carry a client across it without a restart or a change of
configuration:

* :func:`follow_primary` makes the engine's every new connection (after its first, or a
  first one a standby answered) wait for a writable server for up to
  :data:`FAILOVER_WAIT_S` (or the tighter :func:`deadline` a caller set), trying again with
  backoff. Opening a connection changes nothing, so this is always safe; with
  ``pool_pre_ping`` a pooled connection to the lost server is found dead and replaced at
  checkout.
* :func:`idempotent` retries a whole operation whose connection broke under it — only for
  operations that give the same result when run twice (a lease renewal, a read). A write
  that is not idempotent reports the error: it was not acknowledged, and its caller decides.

Errors that end a wait carry libpq's message, which names hosts and ports, never a password.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

FAILOVER_WAIT_S = float(os.environ.get("TIDEGATE_CONTROL_DB_FAILOVER_S", "60"))
BACKOFF_S = (0.1, 0.2, 0.5, 1.0)  # then every second

# SQLSTATEs that say "not this server, not now": shutting down, starting up, or a standby
_TRANSIENT_STATES = {"57P01", "57P02", "57P03", "25006"}
# what a server says when it refuses this client whoever is primary: waiting will not help
_REFUSALS = ("authentication failed", "does not exist", "no pg_hba.conf entry", "permission denied")
_STANDBY_ANSWER = "session is read-only"  # libpq, when target_session_attrs=read-write meets a standby
_reached: weakref.WeakSet[Engine] = weakref.WeakSet()  # engines that have reached a primary once
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("control_db_deadline", default=None)

F = TypeVar("F", bound=Callable[..., Any])


def is_transient(exc: BaseException) -> bool:
    """True when ``exc`` means the server went away or is not the primary (now): worth
    trying again on a fresh connection. A statement timeout is not: the server answered."""
    import psycopg  # only once an error came: SQLite users never pay for importing it

    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    if isinstance(orig, psycopg.errors.QueryCanceled) or any(r in str(orig) for r in _REFUSALS):
        return False
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    state = getattr(orig, "sqlstate", None)
    if state in _TRANSIENT_STATES or (state or "").startswith("08"):
        return True
    return isinstance(orig, psycopg.OperationalError) and state is None  # no answer: connection failed or lost


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Within this block, waiting for the primary ends ``seconds`` from now (or at the
    enclosing deadline, when that comes first): a lease renewal waits no longer than its
    time to live."""
    ends = time.monotonic() + seconds
    outer = _deadline.get()
    token = _deadline.set(ends if outer is None else min(ends, outer))
    try:
        yield
    finally:
        _deadline.reset(token)


def _ends() -> float:
    ends = time.monotonic() + FAILOVER_WAIT_S
    chosen = _deadline.get()
    return ends if chosen is None else min(ends, chosen)


def _pauses() -> Iterator[float]:
    yield from BACKOFF_S
    while True:
        yield BACKOFF_S[-1]


def follow_primary(engine: Engine) -> None:
    """Make each new connection of ``engine`` wait for a writable server (see the module).

    Once the engine has reached one, and on a first connection that a standby answered: the
    URL is right and a region is up, so a promotion is under way (a driver launched in the
    window would otherwise exit before it starts). Any other first failure is told at once —
    the URL is wrong or no region is up, and waiting would only hide that."""
    import psycopg

    @event.listens_for(engine, "do_connect")
    def _connect(dialect, _record, cargs, cparams):  # noqa: ANN001, ANN202 — SQLAlchemy's hook
        ends = _ends() if engine in _reached else None
        for pause in _pauses():
            try:
                connection = dialect.connect(*cargs, **cparams)
                _reached.add(engine)
                return connection
            except psycopg.OperationalError as exc:
                if ends is None and standby_answered(exc):
                    ends = _ends()
                if not is_transient(exc) or time.monotonic() + pause > (ends or 0.0):
                    raise
            time.sleep(pause)
        raise AssertionError("unreachable")  # _pauses never ends


def standby_answered(exc: BaseException) -> bool:
    """libpq tried a server that is up but read-only (``target_session_attrs=read-write``
    refused a standby): the cluster is there, its primary is not, yet."""
    return _STANDBY_ANSWER in str(exc)


def idempotent(method: F) -> F:
    """Run ``method`` again when its connection broke in a promotion, until the wait for
    the primary ends. Only for operations whose second run gives the first one's result,
    and only on a method of an object whose ``engine`` has reached a primary before."""

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "engine", None) not in _reached:
            return method(self, *args, **kwargs)
        ends = _ends()
        pauses = _pauses()
        while True:
            try:
                return method(self, *args, **kwargs)
            except DBAPIError as exc:
                pause = next(pauses)
                if not is_transient(exc) or time.monotonic() + pause > ends:
                    raise
            time.sleep(pause)

    return run  # type: ignore[return-value]
