"""The control database across two regions: losing either loses nothing acknowledged.

One cluster for the session (``ha_cluster``), east primary at first; the tests run in order
and each leaves a primary with a synchronous standby behind it. Each site runs in a network
namespace of its own, so a partition is real: the links between sites are cut
(:meth:`LocalCluster.cut_off`), every process keeps running, and this process — the client —
still reaches every site::

    east: PG primary ─sync─▶ west: PG standby        witness: etcd only
          etcd ◀──────────────────▶ etcd ◀───────────────────▶ etcd

    1. kill -9 east (PG, Patroni, etcd) under a writer  → west promoted by west + witness
    2. east comes back                                    → rewound, west's synchronous standby
    3. the primary's region (west) cut off from both      → it demotes itself, east promoted;
                                                            never two writable primaries
    4. the partition heals                                → west rewound, east's synchronous
                                                            standby; what east acknowledged stays
    5. east cut off under a writer                        → west promoted, east acknowledges
                                                            nothing; healed, east is west's
                                                            standby with every write west took

Tests 3–5 start from whichever region is primary, so they also run alone (``-k partition``).
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from sqlalchemy import select

from support import wait_for
from tidegate.control import schema as S
from tidegate.control.db import ControlDB, ControlDBError

pytestmark = pytest.mark.slow

LEASE = "job:fleet:east"


class Writer:
    """Writes operation rows and renews a lease in a loop, through the multi-host URL,
    remembering which writes were acknowledged and when each started and returned."""

    def __init__(self, db: ControlDB, holder: str, ttl_s: float) -> None:
        self.db, self.holder, self.ttl_s = db, holder, ttl_s
        self.acked: list[tuple[int, float, float]] = []  # (n, sent, returned) on time.monotonic
        self.renewals: list[tuple[bool, float]] = []
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.stopping.set()
        self.thread.join(120)

    def _loop(self) -> None:
        n = 0
        while not self.stopping.is_set():
            n += 1
            sent = time.monotonic()
            try:
                self.db.record_operation("ha-write", "ok", detail=str(n))
                self.acked.append((n, sent, time.monotonic()))
                self.renewals.append((self.db.renew_lease(LEASE, self.holder, self.ttl_s), time.monotonic()))
            except Exception as exc:  # the promotion window: not acknowledged, try the next one
                self.errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
            time.sleep(0.02)

    def first_ack_after(self, moment: float) -> float | None:
        """Seconds from ``moment`` to the first write sent after it that was acknowledged."""
        later = [returned for _n, sent, returned in self.acked if sent >= moment]
        return min(later) - moment if later else None


def in_recovery(cluster, region: str) -> bool | None:
    """Whether ``region``'s PostgreSQL is a standby (None when it does not answer)."""
    url = cluster.site_url(region).replace("postgresql+psycopg://", "postgresql://")
    try:
        with psycopg.connect(url, connect_timeout=1, autocommit=True) as con:
            return bool(con.execute("SELECT pg_is_in_recovery()").fetchone()[0])
    except psycopg.Error:
        return None


def written(cluster, region: str) -> set[int]:
    db = ControlDB(cluster.site_url(region), create=False)
    try:
        with db.engine.connect() as c:
            rows = c.execute(select(S.operations.c.detail).where(S.operations.c.action == "ha-write"))
            return {int(r.detail) for r in rows}
    finally:
        db.dispose()


def replayed(cluster, standby: str, n: int) -> bool:
    """Whether write ``n`` is visible on ``standby``: a synchronous commit returns once the
    standby has flushed it, and the standby shows it once it has replayed it, a moment later."""
    return bool(wait_for(lambda: n in written(cluster, standby), 10, f"write {n} replayed on {standby}"))


def test_losing_the_primarys_region_loses_nothing_acknowledged_and_clients_follow_the_new_primary(
    ha_cluster, record_property
):
    cluster = ha_cluster
    assert cluster.primary() == "east"
    db = ControlDB(cluster.url())  # the one URL every process is given: no change follows
    epoch = db.acquire_lease(LEASE, "run-1", ttl_s=30)
    assert epoch >= 1
    with Writer(db, "run-1", ttl_s=30) as writer:
        wait_for(lambda: len(writer.acked) >= 20, 30, "writes acknowledged by east")
        killed_at = time.monotonic()
        cluster.kill_site("east")
        gone_at = time.monotonic()  # a write sent before this may have reached east before it died
        wait_for(lambda: writer.first_ack_after(gone_at), 60, "a write acknowledged after east was lost")
        wait_for(lambda: len([a for a in writer.acked if a[1] > gone_at]) >= 20, 30, "writes on the new primary")
    failover_s = writer.first_ack_after(gone_at) + (gone_at - killed_at)
    record_property("failover_s", round(failover_s, 2))
    print(f"kill -9 of east → first acknowledged write on west: {failover_s:.2f} s")

    assert cluster.primary() == "west"
    acknowledged = {n for n, _sent, _returned in writer.acked}
    assert acknowledged <= written(cluster, "west"), "an acknowledged write was lost with east"
    # the renewal that hit the promotion window waited for west and kept the lease: its TTL outlasts the window
    assert all(kept for kept, _at in writer.renewals), "a renewal within the lease's time to live lost it"
    assert any(at > killed_at for _kept, at in writer.renewals)
    # epochs are rows replicated before they were granted: the new primary continues them
    assert db.epoch(LEASE) == epoch and db.holds(LEASE, "run-1", epoch)
    db.release_lease(LEASE, "run-1")
    assert db.acquire_lease(LEASE, "run-2", ttl_s=30) == epoch + 1
    assert abs(db.clock() - time.time()) < 5  # lease time is the new primary's clock now
    db.dispose()


def test_the_lost_region_comes_back_as_the_new_primarys_synchronous_standby(ha_cluster):
    cluster = ha_cluster
    assert cluster.primary() == "west"
    cluster.start_site("east")
    cluster.wait_for_sync_standby("east", 90)
    assert in_recovery(cluster, "east") is True and in_recovery(cluster, "west") is False
    db = ControlDB(cluster.url())
    db.record_operation("ha-write", "ok", detail="-1")  # acknowledged once east has it too
    db.dispose()
    assert replayed(cluster, "east", -1)
    assert (cluster.status("east") or {}).get("timeline") == (cluster.status("west") or {}).get("timeline")


def test_a_process_whose_first_connection_meets_the_promotion_window_waits_for_the_new_primary(ha_cluster):
    """A driver launched just as the primary's region is lost opens its first connection in
    the window: a standby answers it, so it waits for the promotion instead of exiting."""
    cluster = ha_cluster
    lost = cluster.wait_for_primary(None, 60)
    kept = other(lost)
    cluster.kill_site(lost)
    wait_for(lambda: (cluster.status(kept) or {}).get("role") == "replica", 10, f"{kept} still a standby")
    started = time.monotonic()
    db = ControlDB(cluster.url())  # a brand-new engine: its very first connection
    waited_s = time.monotonic() - started
    db.record_operation("ha-first-connection", "ok", detail="-2")
    assert in_recovery(cluster, kept) is False
    print(f"first connection in the promotion window: waited {waited_s:.1f} s for {kept}")
    db.dispose()
    assert waited_s > 1  # the promotion came after it asked (ttl 20 s): it waited, not failed
    # a URL no region answers is still told at once: nothing there to wait for
    started = time.monotonic()
    with pytest.raises(ControlDBError, match="cannot open the control database"):
        ControlDB(cluster.url().replace(f":{cluster.sites[kept].pg_port}", ":1"))
    assert time.monotonic() - started < 10
    cluster.start_site(lost)
    assert_rejoined_as_standby(cluster, lost)


class PrimaryWatch:
    """Asks both regions ten times a second whether they are in recovery, from this
    process (which a partition between the sites does not cut off)."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.seen: list[tuple[float, bool | None, bool | None]] = []  # (at, east in recovery, west in recovery)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> PrimaryWatch:
        self.started = time.monotonic()
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.stopping.set()
        self.thread.join(10)

    def _loop(self) -> None:
        while not self.stopping.is_set():
            self.seen.append((time.monotonic(), in_recovery(self.cluster, "east"), in_recovery(self.cluster, "west")))
            time.sleep(0.1)

    def assert_never_two_primaries(self, promoted: str) -> None:
        both = [at - self.started for at, east, west in self.seen if east is False and west is False]
        assert not both, f"east and west were both primaries {len(both)} times, first {both[0]:.1f} s after the cut"
        column = 1 if promoted == "east" else 2
        assert any(row[column] is False for row in self.seen), f"the watcher never saw {promoted} promoted"


def other(region: str) -> str:
    return "west" if region == "east" else "east"


def assert_rejoined_as_standby(cluster, standby: str) -> None:
    """``standby`` streams from the other region as its synchronous standby, in recovery, on
    the primary's timeline (an old primary rewound onto it)."""
    primary = other(standby)
    cluster.wait_for_primary(primary, 60)
    cluster.wait_for_sync_standby(standby, 90)
    assert in_recovery(cluster, standby) is True and in_recovery(cluster, primary) is False
    timelines = {name: (cluster.status(name) or {}).get("timeline") for name in (primary, standby)}
    assert timelines[standby] == timelines[primary], f"diverged timelines after the partition healed: {timelines}"


def test_a_partition_cutting_off_the_primarys_region_demotes_it_and_two_primaries_never_accept_writes(ha_cluster):
    cluster = ha_cluster
    old = cluster.wait_for_primary(None, 60)
    new = other(old)
    cluster.wait_for_sync_standby(new, 90)
    with PrimaryWatch(cluster) as watch:
        cluster.cut_off(old)  # its Patroni reaches only its own etcd member; its PostgreSQL keeps running
        try:
            wait_for(lambda: cluster.primary() == new, 60, f"{new} promoted by {new} + witness")
            # the old primary, still running but cut off, must not acknowledge a write; the new one must
            db = ControlDB(cluster.url())
            db.record_operation("ha-write", "ok", detail="-2")
            db.dispose()
            assert not _acknowledges_a_write(cluster, old, within_s=3)
        finally:
            cluster.reconnect(old)
            time.sleep(1)
    watch.assert_never_two_primaries(new)


def test_after_the_partition_heals_the_old_primary_is_a_standby_and_what_the_new_one_acknowledged_stays(
    ha_cluster,
):
    cluster = ha_cluster
    primary = cluster.wait_for_primary(None, 60)
    standby = other(primary)
    assert_rejoined_as_standby(cluster, standby)  # the healed old primary: rewound, never promoted again
    db = ControlDB(cluster.url())
    db.record_operation("ha-write", "ok", detail="-3")
    db.dispose()
    assert -2 in written(cluster, primary), "a write acknowledged during the partition was lost when it healed"
    assert replayed(cluster, standby, -2) and replayed(cluster, standby, -3)


def test_a_partition_isolating_the_primarys_region_under_a_writer_loses_nothing_the_other_region_acknowledged(
    ha_cluster, record_property
):
    """The primary's region cut from the other region and from the witness while a client
    that still reaches both keeps writing: the other region is promoted, the isolated one
    acknowledges nothing, and once healed it follows the new primary with every write."""
    cluster = ha_cluster
    old = cluster.wait_for_primary(None, 60)
    new = other(old)
    cluster.wait_for_sync_standby(new, 90)
    db = ControlDB(cluster.url())
    with PrimaryWatch(cluster) as watch, Writer(db, "run-partition", ttl_s=30) as writer:
        wait_for(lambda: len(writer.acked) >= 20, 30, f"writes acknowledged by {old}")
        cut_at = time.monotonic()
        cluster.cut(old, new)
        cluster.cut(old, "witness")  # old is alone: its etcd member has no quorum
        try:
            wait_for(lambda: cluster.primary() == new, 60, f"{new} promoted by {new} + witness")
            wait_for(lambda: writer.first_ack_after(time.monotonic() - 0.5), 60, f"writes acknowledged by {new}")
            during = {n for n, sent, _returned in writer.acked if sent > cut_at}
            assert not _acknowledges_a_write(cluster, old, within_s=3), f"{old} acknowledged a write, cut off"
        finally:
            cluster.reconnect(old)
        healed_at = time.monotonic()
        assert_rejoined_as_standby(cluster, old)
        record_property("partition_heal_s", round(time.monotonic() - healed_at, 2))
    db.dispose()
    watch.assert_never_two_primaries(new)
    assert during, f"no write acknowledged by {new} during the partition"
    acknowledged = {n for n, _sent, _returned in writer.acked}
    assert acknowledged <= written(cluster, new), f"an acknowledged write is missing on {new}"
    last = max(acknowledged)
    assert replayed(cluster, old, last) and acknowledged <= written(cluster, old), (
        f"an acknowledged write is missing on {old}, the healed old primary"
    )


def _acknowledges_a_write(cluster, region: str, *, within_s: float) -> bool:
    """Whether ``region`` returns from a committed INSERT within ``within_s`` (a standby
    refuses; a primary cut off from its synchronous standby holds the commit)."""
    url = cluster.site_url(region).replace("postgresql+psycopg://", "postgresql://")
    done = threading.Event()

    def write() -> None:
        try:
            with psycopg.connect(url, connect_timeout=2, autocommit=True) as con:
                con.execute("INSERT INTO operations (at, action, outcome) VALUES (0, 'ha-split', 'written')")
                done.set()
        except psycopg.Error:
            pass

    threading.Thread(target=write, daemon=True).start()
    return done.wait(within_s)
