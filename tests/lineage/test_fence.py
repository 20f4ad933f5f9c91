"""Fencing without Spark: a driver whose lease passed on commits nothing (semantics §6)."""

from __future__ import annotations

import threading
import time

import pytest

from tidegate.lineage.fence import Fenced, LeaseClock, LineageFence
from tidegate.lineage.layout import FENCE_FILE


class FakeMonotonic:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def fence(root, epoch: int, holds=lambda: True, ttl_s: float = 15.0, clock=None) -> LineageFence:
    lease_clock = LeaseClock(ttl_s, monotonic=clock or time.monotonic)
    lease_clock.renewed(lease_clock.monotonic())
    return LineageFence(root, epoch, f"run-{epoch}", lease_clock, holds)


def test_a_commit_of_the_epoch_that_claimed_the_lineage_goes_through(tmp_path):
    a = fence(tmp_path, 1)
    a.claim()
    done = []
    with a.commit("output/batch_id=0"):
        done.append(True)
    assert done == [True]
    assert '"epoch": 1' in (tmp_path / FENCE_FILE).read_text()


def test_once_a_successor_claimed_the_lineage_the_old_driver_commits_nothing(tmp_path):
    a, b = fence(tmp_path, 1), fence(tmp_path, 2)
    a.claim()
    b.claim()
    ran = []
    with pytest.raises(Fenced) as err:
        with a.commit("output/batch_id=7"):
            ran.append(True)
    assert ran == []
    assert "epoch 1" in str(err.value) and "epoch 2" in str(err.value) and "batch_id=7 not committed" in str(err.value)
    with pytest.raises(Fenced):  # and it cannot take the lineage back either
        a.claim()


def test_a_driver_past_its_lease_time_refuses_to_commit_without_asking_anyone(tmp_path):
    clock = FakeMonotonic()
    asked = []
    a = fence(tmp_path, 1, holds=lambda: asked.append(1) or True, ttl_s=15, clock=clock)
    a.claim()
    clock.t += 14.5  # within the TTL but past its safety margin
    with pytest.raises(Fenced) as err:
        with a.commit("state 3"):
            pass
    assert "within its time to live" in str(err.value) and asked == []


def test_the_database_saying_the_lease_is_gone_or_not_answering_refuses_the_commit(tmp_path):
    fence(tmp_path, 1, holds=lambda: False).claim()
    with pytest.raises(Fenced, match="no longer holds its lease"):
        with fence(tmp_path, 1, holds=lambda: False).commit("state 3"):
            pass

    def unreachable() -> bool:
        raise ConnectionError("server closed the connection")

    with pytest.raises(Fenced, match="could not confirm its lease"):
        with fence(tmp_path, 1, holds=unreachable).commit("state 3"):
            pass


def test_a_successor_claiming_during_a_commit_waits_for_it_then_fences_the_next_one(tmp_path):
    #   A: |--commit batch 4 (holds the fence)--|            A: commit batch 5 -> refused
    #   B:        claim epoch 2 ...waits........|claimed|
    a, b = fence(tmp_path, 1), fence(tmp_path, 2)
    a.claim()
    inside, claimed = threading.Event(), []

    def successor() -> None:
        inside.wait()
        b.claim()
        claimed.append(time.monotonic())

    thread = threading.Thread(target=successor)
    thread.start()
    with a.commit("output/batch_id=4"):
        inside.set()
        time.sleep(0.3)
        finished = time.monotonic()
    thread.join(10)
    assert claimed and claimed[0] >= finished
    with pytest.raises(Fenced):
        with a.commit("output/batch_id=5"):
            pass
