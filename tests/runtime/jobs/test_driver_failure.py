"""Why a driver whose batch failed says it ended: a stale driver — paused while its successor
took the lease over and cleared the staging it was writing into — fails on its own write
before any fence. That failure is the lost lease, and the run must say so (semantics §6)."""

from __future__ import annotations

from types import SimpleNamespace as NS

from tidegate.control.db import ControlDB
from tidegate.runtime.jobs.driver import Driver, _own_message

LEASE = "job:fleet:east"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def driver(db, holder: str, epoch: int) -> Driver:
    d = Driver.__new__(Driver)
    d.db, d.lease, d.holder, d.fence = db, LEASE, holder, NS(epoch=epoch)
    return d


def test_a_driver_whose_lease_was_granted_to_another_run_counts_its_failure_as_the_lost_lease(control_url):
    clock = Clock()
    db = ControlDB(control_url, now=clock)
    first = db.acquire_lease(LEASE, "run-1", ttl_s=15)
    stale = driver(db, "run-1", first)
    assert not stale._lease_passed()  # its own lease: a failure is its own
    clock.now += 16  # paused past its time to live: expired, but no one took it over yet
    assert not stale._lease_passed()
    second = db.acquire_lease(LEASE, "run-2", ttl_s=15)
    assert second > first
    assert stale._lease_passed() and not driver(db, "run-2", second)._lease_passed()


def test_a_database_that_cannot_be_asked_leaves_the_failure_as_it_is(control_url):
    db = ControlDB(control_url)
    d = driver(NS(epoch=lambda lease: (_ for _ in ()).throw(ConnectionError("down"))), "run-1", 1)
    assert not d._lease_passed()
    assert not driver(db, "run-1", 1)._lease_passed()  # never granted: nobody else holds it


def test_the_failure_is_named_by_its_own_message_not_by_spark_s_query_dump():
    failure = (
        "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):\n"
        '  File "files.py", line 225, in write_table\n'
        "FileNotFoundError: [Errno 2] Failed to open local file '/x/.tmp-batch-2/part'\n\n"
        "=== Streaming Query ===\nIdentifier: tidegate-x\nCurrent State: TERMINATED\n"
    )
    assert _own_message(failure) == "FileNotFoundError: [Errno 2] Failed to open local file '/x/.tmp-batch-2/part'"
