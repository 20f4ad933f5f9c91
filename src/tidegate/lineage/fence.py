"""Fencing: at most one driver of a job and region commits (semantics §6, node failure).

A lease alone does not stop a driver that was paused (a long GC, SIGSTOP, a frozen VM)
from waking up after its successor took over and writing on: it still believes it holds
the lease until its next heartbeat says otherwise. So every commit proves the lease
instead of trusting it:

* The control database grants each holder of a job's lease a **fencing epoch** that grows
  with every change of holder (:meth:`ControlDB.acquire_lease`).
* A driver **claims** its lineage's storage with that epoch before its query starts: the
  epoch goes into ``<lineage>/.fence`` unless a higher one is already there.
* Every commit — an output, quarantine or audit folder made visible, a state version,
  the metrics — runs inside :meth:`LineageFence.commit`, which holds an exclusive lock on
  ``.fence`` across the check and the rename: the driver must still be within its own
  lease time (counted on its monotonic clock from the last renewal it saw succeed), the
  database must still say it holds the lease under its epoch, and ``.fence`` must still
  carry its epoch. A successor writes its higher epoch under the same lock before it
  writes anything, so an old driver's commit either finished before the successor
  claimed the lineage or is refused.

Every batch's output is deterministic (same input, same state, same bytes), so a commit
that finished just before the hand-over is the one the successor would have made.

The fence lives beside the lineage it guards: the sink commits through it (with
:data:`NO_FENCE` where nothing competes: the batch path, tests), the driver claims it.

**On an object store** there is no lock to hold across a check and a write. There
``.fence/`` holds one object per claimed epoch, each created with put-if-absent; the
highest epoch present is the lineage's, and a commit checks the same three things (its
lease time, the database, the highest epoch) right before it creates the batch's commit
record. What a lock gave on disk — a stale commit finished before the successor's claim or
refused — is given there by the record itself: it is created once per batch
(:mod:`tidegate.lineage.commits`), every attempt of a batch writes the same rows, and no
file of a batch without a record is ever removed, so a stale driver that passes the checks
and then sleeps can only commit, late, the batch its successor would have committed.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePath

from tidegate.errors import TidegateError
from tidegate.lineage.layout import JobPaths
from tidegate.storage.store import LOCAL, Store

CLAIM_WAIT_S = 30.0


class Fenced(TidegateError):
    """This driver's lease passed to another run: it must commit nothing more."""


class LeaseClock:
    """How long the driver may still assume it holds its lease, on its monotonic clock.

    ``renewed(sent_at)`` after each successful renewal, with the monotonic time the
    request was *sent* (the database extended the lease at or after that moment)."""

    def __init__(self, ttl_s: float, margin_s: float = 1.0, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.margin_s = margin_s
        self.monotonic = monotonic
        self.last_renewed: float | None = None

    def renewed(self, sent_at: float) -> None:
        self.last_renewed = sent_at if self.last_renewed is None else max(self.last_renewed, sent_at)

    def remaining_s(self) -> float:
        if self.last_renewed is None:
            return 0.0
        return self.last_renewed + self.ttl_s - self.margin_s - self.monotonic()

    def expired(self) -> bool:
        return self.remaining_s() <= 0


class LineageFence:
    """The fence of one lineage's storage for the driver holding ``epoch``.

    ``holds_lease()``: the database's word that the lease is still this driver's under
    ``epoch`` (may raise when the database cannot be reached: then nothing is committed).
    """

    def __init__(
        self,
        root: PurePath,
        epoch: int,
        who: str,
        lease_clock: LeaseClock,
        holds_lease: Callable[[], bool],
        store: Store = LOCAL,
    ) -> None:
        self.root: PurePath = Path(root) if store.is_local else root
        self.epoch = epoch
        self.who = who
        self.lease_clock = lease_clock
        self.holds_lease = holds_lease
        self.store = store

    @property
    def path(self) -> PurePath:
        return JobPaths(self.root, self.store).fence

    def claim(self) -> None:
        """Write this driver's epoch into the lineage, unless a later driver's is there."""
        if not self.store.is_local:
            self._claim_on_store()
            return
        with self._locked(CLAIM_WAIT_S) as fd:
            current = _read(fd)
            if current.get("epoch", 0) > self.epoch:
                raise Fenced(
                    f"{self.who} holds fencing epoch {self.epoch}, but {current.get('holder')} already claimed "
                    f"{self.root} with epoch {current['epoch']}",
                    "this driver is stale; the job runs under its newer driver (tidegate job status)",
                )
            _write(fd, {"epoch": self.epoch, "holder": self.who, "claimed_at": time.time(), "pid": os.getpid()})

    @contextmanager
    def commit(self, what: str) -> Iterator[None]:
        """Hold the fence while ``what`` is made visible; raise :class:`Fenced` instead when
        this driver may no longer commit."""
        if self.lease_clock.expired():
            raise Fenced(
                f"{self.who} did not renew its lease within its time to live; {what} not committed",
                "the driver stops itself; its successor (or the supervisor's restart) continues the job",
            )
        if not self.store.is_local:
            self._check_epoch(self._highest_on_store(), what)
            self._check_lease(what)
            yield
            return
        with self._locked(max(0.0, self.lease_clock.remaining_s())) as fd:
            self._check_epoch(_read(fd), what)
            self._check_lease(what)
            yield

    def _check_epoch(self, current: dict, what: str) -> None:
        if current.get("epoch") != self.epoch:
            raise Fenced(
                f"{self.who} (epoch {self.epoch}) lost {self.root} to {current.get('holder')} "
                f"(epoch {current.get('epoch')}); {what} not committed",
                "this driver is stale and stops; the job runs under its newer driver",
            )

    def _check_lease(self, what: str) -> None:
        try:
            holds = self.holds_lease()
        except Exception as exc:  # no proof of the lease, no commit
            raise Fenced(
                f"{self.who} could not confirm its lease ({type(exc).__name__}: {exc}); {what} not committed",
                "check the control database; the batch runs again once it answers",
            ) from exc
        if not holds:
            raise Fenced(
                f"{self.who} no longer holds its lease under epoch {self.epoch}; {what} not committed",
                "this driver is stale and stops; the job runs under its newer driver",
            )

    # -- on an object store: one object per claimed epoch, the highest wins -------------------
    def _claim_on_store(self) -> None:
        current = self._highest_on_store()
        if current.get("epoch", 0) > self.epoch:
            raise Fenced(
                f"{self.who} holds fencing epoch {self.epoch}, but {current.get('holder')} already claimed "
                f"{self.root} with epoch {current['epoch']}",
                "this driver is stale; the job runs under its newer driver (tidegate job status)",
            )
        # an epoch is granted to one holder only, so finding our own key there is a re-claim
        self.store.put_json_if_absent(
            self.path / f"{self.epoch:020d}.json",
            {"epoch": self.epoch, "holder": self.who, "claimed_at": time.time(), "pid": os.getpid()},
        )
        after = self._highest_on_store()
        if after.get("epoch") != self.epoch:  # a successor claimed meanwhile
            self._check_epoch(after, "the claim")

    def _highest_on_store(self) -> dict:
        """The highest claimed epoch: one listing decides. Its object is read only when it is
        another driver's, to name its holder: the key says the epoch, and ours is ours."""
        epochs = [e for e in self.store.list(self.path) if e.name.endswith(".json") and e.name[:-5].isdigit()]
        if not epochs:
            return {}
        top = max(epochs, key=lambda e: int(e.name[:-5]))
        epoch = int(top.name[:-5])
        if epoch == self.epoch:
            return {"epoch": epoch, "holder": self.who}
        return self.store.read_json(top.path, {}) or {"epoch": epoch}

    @contextmanager
    def _locked(self, wait_s: float) -> Iterator[int]:
        Path(self.root).mkdir(parents=True, exist_ok=True)  # local only: a Path already
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise Fenced(
                            f"{self.who} could not lock {self.path} within {wait_s:.0f} s",
                            "another driver of this lineage holds it: is an old driver paused? "
                            "the supervisor kills lost drivers on its host",
                        ) from None
                    time.sleep(0.01)
            yield fd
        finally:
            os.close(fd)  # also releases the lock


class NoFence:
    """Commits of a job run outside the control plane (tests, the batch path, the demo)."""

    @contextmanager
    def commit(self, what: str) -> Iterator[None]:
        yield


NO_FENCE = NoFence()


def _read(fd: int) -> dict:
    os.lseek(fd, 0, os.SEEK_SET)
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    try:
        return json.loads(data) if data.strip() else {}
    except ValueError:
        return {}  # a torn write of the fence itself: the claim that follows rewrites it


def _write(fd: int, doc: dict) -> None:
    data = json.dumps(doc, sort_keys=True).encode()
    os.lseek(fd, 0, os.SEEK_SET)
    os.ftruncate(fd, 0)
    os.write(fd, data)
    os.fsync(fd)
