"""Failing over from a lost active region, and failover requests that must not act twice
(semantics §7) — decisions over a control database, with a fake clock and no driver."""

from __future__ import annotations

import time

import pytest

from platform_support import fill
from tidegate.control.db import ProcedureBusy
from tidegate.inputs.event_log import EventLog
from tidegate.runtime.jobs.process import job_lease
from tidegate.runtime.procedures.failover import assess, begin, fail_over

JOB = "device-fleet-counts"


class FakeTime:
    def __init__(self) -> None:
        self.t = 0.0
        self.on_sleep = lambda t: None

    def monotonic(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s
        self.on_sleep(self.t)


@pytest.fixture
def pair(platform_factory, tmp_path):
    """east active and final through 100 s, west running elsewhere and final through 97 s."""
    fill(tmp_path / "event-log", 200, seed=3)
    p = platform_factory("failover", tmp_path / "event-log")
    p.controller.deploy(p.spec_file())
    db = p.controller.db
    version, spec = p.controller.spec(JOB, None)
    for region, through in (("east", 100_000_000), ("west", 97_000_000)):
        lineage = f"lin-{region}"
        db.create_lineage(
            id=lineage,
            job=JOB,
            region=region,
            version=version,
            fingerprint=spec.fingerprint,
            root=str(tmp_path / lineage),
            windowed=True,
            emitted_through_us=through,
        )
        run = db.create_run(
            job=JOB,
            region=region,
            version=version,
            fingerprint=spec.fingerprint,
            lineage=lineage,
            kind="job",
            input=str(p.event_log),
            start_mode="now",
            checkpoint="fresh",
            checkpoint_reason="first start",
            status="running",
            host=f"driver-host-{region}",
            pid=4242,
            started_at=time.time(),
            caught_up_at=time.time(),
        )
        db.acquire_lease(job_lease(JOB, region), f"run-{run}", 600, host=f"driver-host-{region}", pid=4242)
        p.config.region(region).job_dir(JOB).mkdir(parents=True)
    db.set_active_region(JOB, "east", "first region started")
    return p


def lose_east(p) -> None:
    """east's storage is gone and its driver with it (its lease lapses)."""
    import shutil

    shutil.rmtree(p.config.region("east").job_dir(JOB))
    p.controller.db.release_lease(job_lease(JOB, "east"), p.controller.db.lease(job_lease(JOB, "east")).holder)


def test_a_lost_active_region_fails_over_once_the_survivor_is_final_past_its_last_final_point(pair):
    lose_east(pair)
    clock = FakeTime()
    clock.on_sleep = lambda t: (
        pair.controller.db.update_lineage("lin-west", emitted_through_us=101_000_000) if t >= 3 else None
    )  # west catches up 3 s later, as a duplicate a few seconds behind does
    result = fail_over(pair.controller, JOB, "east", "test", sleep=clock.sleep, monotonic=clock.monotonic)
    assert result.switched and result.to_region == "west" and result.catching_up_through_us is None
    assert 3 <= result.waited_s < 5
    active = pair.controller.db.active_region(JOB)
    assert active.region == "west" and "east lost (its storage is gone)" in active.reason


def test_a_survivor_still_behind_after_the_bound_gets_the_consumers_marked_catching_up(pair):
    lose_east(pair)
    clock = FakeTime()
    result = fail_over(pair.controller, JOB, "east", "test", wait_s=30, sleep=clock.sleep, monotonic=clock.monotonic)
    assert result.switched and result.catching_up_through_us == 100_000_000 and result.waited_s >= 30
    active = pair.controller.db.active_region(JOB)
    assert active.region == "west" and "catching up through" in active.reason  # never the region that is gone


def test_a_healthy_active_region_still_gets_the_planned_switch_rules(pair):
    from tidegate.runtime.jobs.controller import ControllerError

    clock = FakeTime()
    with pytest.raises(ControllerError, match="refusing to move consumers"):
        # west stays final only through 97 s < 100 s for the whole bound
        fail_over(pair.controller, JOB, "east", "test", wait_s=30, sleep=clock.sleep, monotonic=clock.monotonic)
    assert clock.t >= 30 and pair.controller.db.active_region(JOB).region == "east"
    refusals = [op for op in pair.controller.db.operations(JOB) if op.action == "switch-active"]
    assert [op.outcome for op in refusals] == ["refused"]  # refused once, at the bound: not once a second


def test_a_present_active_region_fails_over_once_the_partner_meets_it_within_the_bound(pair):
    """East's driver was killed and keep-running restarted it: east is there again, one batch
    ahead of west. The request waits the seconds west needs, then switches by the rules."""
    clock = FakeTime()
    clock.on_sleep = lambda t: (
        pair.controller.db.update_lineage("lin-west", emitted_through_us=100_000_000) if t >= 2 else None
    )
    result = fail_over(pair.controller, JOB, "east", "test", wait_s=30, sleep=clock.sleep, monotonic=clock.monotonic)
    assert result.switched and result.to_region == "west" and 2 <= result.waited_s < 4
    assert pair.controller.db.active_region(JOB).region == "west"


def test_failing_over_a_region_consumers_already_left_is_a_no_op_that_says_so(pair):
    lose_east(pair)
    pair.controller.db.update_lineage("lin-west", emitted_through_us=100_000_000)
    assert fail_over(pair.controller, JOB, "east", "first").switched
    again = fail_over(pair.controller, JOB, "east", "second")
    assert not again.switched and "already read west" in again.reason and "nothing to fail over" in again.reason
    told = assess(pair.controller, JOB, "east", "health watch", only_if_unhealthy=True, max_delay_s=300, for_s=120)
    assert not told["act"] and "was failed over before" in told["say"]


def test_two_concurrent_failover_requests_run_one_failover(pair):
    lose_east(pair)
    pair.controller.db.update_lineage("lin-west", emitted_through_us=100_000_000)
    first = assess(pair.controller, JOB, "active", "health watch", only_if_unhealthy=True, max_delay_s=300, for_s=120)
    second = assess(pair.controller, JOB, "active", "operator", only_if_unhealthy=False, max_delay_s=300, for_s=120)
    assert first["act"] and second["act"]  # both looked before either acted
    done = begin(pair.controller, first, ttl_s=600)
    assert done["switched"] and done["to_region"] == "west"
    with pytest.raises(ProcedureBusy, match=f"failover of {JOB} in east is already running"):
        begin(pair.controller, second, ttl_s=600)
    assert pair.controller.db.active_region(JOB).region == "west"
    late = assess(pair.controller, JOB, "active", "health watch", only_if_unhealthy=True, max_delay_s=300, for_s=120)
    assert not late["act"] and "already running" in late["say"]  # the running failover owns the job


def test_a_region_that_lost_its_storage_rebuilds_its_whole_history_by_replay(pair):
    """Restored after a loss, the region replays from where its oldest output began — not from
    where it was lost — so consumers moved to it later find every row its partner held."""
    from tidegate.runtime.jobs.planning import plan_start, previous_lineage

    c = pair.controller
    version, spec = c.spec(JOB, None)
    first = pair.controller.db.lineages(JOB, "east")[0]
    log = EventLog.open(pair.event_log)
    began = min(i.first_arrival_us for i in log.describe() if i.first_arrival_us is not None) + 60_000_000
    c.db.update_lineage(first.id, output_from_us=began, emitted_through_us=began + 120_000_000)
    lose_east(pair)
    previous = previous_lineage(c, JOB, "east")
    assert previous.cut.through_us == began and not previous.checkpoint_usable
    plan = plan_start(spec, "last-stopped", clock_us=log.clock_now_us(), at_us=None, previous=previous, log=log)
    assert plan.checkpoint == "fresh" and plan.output_start_us == began
