"""semantics §2 on the pure core: the golden case, and outcomes that no batching can change."""

from __future__ import annotations

import numpy as np
import pytest

from support import load_golden, random_stream
from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_time_us
from tidegate.eventtime.policy import (
    ACTION_NAMES,
    DROPPED,
    NONE,
    REASON_NAMES,
    PartitionState,
    TimePolicy,
    apply_policy,
)

GOLDEN = load_golden()


def hhmm(us: int) -> str:
    return "" if us == NONE else format_time_us(us)[11:16]


@pytest.mark.parametrize("variant", GOLDEN.variants, ids=lambda v: v.name)
def test_golden_case_matches_the_spec_table(variant):
    units = GOLDEN.devices() if variant.over else None
    result, _ = apply_policy(variant.policy, GOLDEN.event_us(), GOLDEN.arrival_us(), PartitionState(), units)
    got = [
        [ACTION_NAMES[a], REASON_NAMES[r], hhmm(s), hhmm(w)]
        for a, r, s, w in zip(result.action, result.reason, result.system_us, result.watermark_us, strict=True)
    ]
    assert got == variant.expect


@pytest.mark.parametrize("variant", GOLDEN.variants, ids=lambda v: v.name)
def test_golden_case_one_event_per_batch_gives_the_same_outcomes(variant):
    units = GOLDEN.devices() if variant.over else None
    whole, _ = apply_policy(variant.policy, GOLDEN.event_us(), GOLDEN.arrival_us(), PartitionState(), units)
    state = PartitionState()
    for i in range(len(GOLDEN.events)):
        one, state = apply_policy(
            variant.policy,
            GOLDEN.event_us()[i : i + 1],
            GOLDEN.arrival_us()[i : i + 1],
            state,
            None if units is None else units[i : i + 1],
        )
        assert (one.action[0], one.reason[0], one.system_us[0], one.watermark_us[0]) == (
            whole.action[i],
            whole.reason[i],
            whole.system_us[i],
            whole.watermark_us[i],
        ), f"event {i + 1}"


def run_in_batches(policy, stream, p, cuts, over):
    idx = stream.of_partition(p)
    state = PartitionState()
    parts = []
    for a, b in zip([0, *cuts], [*cuts, len(idx)], strict=True):
        sel = idx[a:b]
        r, state = apply_policy(
            policy, stream.event_us[sel], stream.arrival_us[sel], state, stream.key[sel] if over else None
        )
        parts.append(np.stack([r.action, r.reason, r.system_us, r.watermark_us]))
    return np.concatenate(parts, axis=1), state


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("over", [False, True], ids=["partition", "over-key"])
@pytest.mark.parametrize("actions", [("adjust", "adjust"), ("drop", "drop"), ("adjust", "drop")])
def test_outcomes_do_not_depend_on_how_the_stream_is_cut(seed, over, actions):
    rng = np.random.default_rng(1000 + seed)  # seed recorded in the test id
    policy = TimePolicy.from_durations(
        out_of_order="20s", late="2m", out_of_order_action=actions[0], late_action=actions[1]
    )
    stream = random_stream(seed, n=600)
    for p in range(3):
        n = len(stream.of_partition(p))
        whole, whole_state = run_in_batches(policy, stream, p, [], over)
        cuts = sorted(set(rng.integers(0, n, rng.integers(1, 30)).tolist()))
        cut, cut_state = run_in_batches(policy, stream, p, cuts, over)
        np.testing.assert_array_equal(whole, cut)
        assert whole_state == cut_state


@pytest.mark.parametrize("seed", range(5))
def test_every_kept_event_is_at_or_after_its_units_watermark(seed):
    """The property that makes a window final once the watermark passes its end."""
    policy = TimePolicy.from_durations(out_of_order="10s", late="1m")
    stream = random_stream(seed, n=800)
    for over in (False, True):
        idx = stream.of_partition(0)
        units = stream.key[idx] if over else np.array([None] * len(idx), dtype=object)
        r, _ = apply_policy(
            policy, stream.event_us[idx], stream.arrival_us[idx], PartitionState(), units if over else None
        )
        last_w: dict = {}
        for i in range(len(idx)):
            u = units[i]
            if r.action[i] != DROPPED and u in last_w:
                assert r.system_us[i] >= last_w[u]
            last_w[u] = r.watermark_us[i]


def test_watermark_never_goes_backwards_and_kept_events_are_within_late_of_arrival():
    policy = TimePolicy.from_durations(out_of_order="5s", late="30s")
    stream = random_stream(3, n=1500)
    idx = stream.of_partition(1)
    r, _ = apply_policy(policy, stream.event_us[idx], stream.arrival_us[idx], PartitionState())
    assert np.all(np.diff(r.watermark_us) >= 0)
    kept = r.action != DROPPED
    # S >= A − late bounds how far apart substreams can drift (semantics §2 substreams)
    assert np.all(r.system_us[kept] >= stream.arrival_us[idx][kept] - policy.late_arrival_tolerance_us)


def test_idle_partition_follows_the_broker_clock_and_never_moves_back():
    policy = TimePolicy.from_durations(late="5m")
    state = PartitionState()
    state = state.advance_idle(1_000_000_000, policy)
    assert state.arrival_watermark_us == 1_000_000_000 - 300_000_000
    assert state.advance_idle(900_000_000, policy) == state


def test_an_event_arriving_before_a_clock_already_used_is_judged_at_that_clock_not_left_behind_it():
    """A Kafka topic's clock, when the topic is silent, is this host's less the configured skew;
    should the brokers' clock lag more than that, a record may arrive before a clock a batch
    was already judged with. It counts as arriving at that clock: adjusted to the watermark
    the clock set (reason late), so no kept event is behind a watermark already passed."""
    s = 1_000_000
    policy = TimePolicy.from_durations(out_of_order="0s", late="5s")
    clock = 1_000 * s
    state = PartitionState().advance_idle(clock, policy)  # W = clock − 5 s
    events = np.array([clock - 8 * s, clock - 2 * s, clock + s], dtype=np.int64)
    arrivals = np.array([clock - 3 * s, clock - 2 * s, clock + s], dtype=np.int64)  # the first two before it
    r, after = apply_policy(policy, events, arrivals, state)
    assert [REASON_NAMES[x] for x in r.reason] == ["late", "", ""]
    assert r.system_us.tolist() == [clock - 5 * s, clock - 2 * s, clock + s]
    assert np.all(r.system_us >= state.arrival_watermark_us)
    assert after.arrival_watermark_us == clock - 4 * s
    # without a clock ahead of the arrivals nothing changes: the same events judged fresh
    fresh, _ = apply_policy(policy, events, arrivals, PartitionState())
    assert [REASON_NAMES[x] for x in fresh.reason] == ["", "", ""]
    assert fresh.system_us.tolist() == events.tolist()


def test_early_event_never_moves_the_watermark():
    policy = TimePolicy.from_durations(out_of_order="0s", late="5m")
    e = np.array([0, 3_600_000_000])  # second event an hour ahead of its arrival
    a = np.array([0, 1_000_000])
    r, state = apply_policy(policy, e, a, PartitionState())
    assert r.action[1] == DROPPED and REASON_NAMES[r.reason[1]] == "early"
    assert state.max_system_us[None] == 0
    assert r.watermark_us[1] == 0  # max(maxS − 0, A − 5m) = 0


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(late="21d"), "late_arrival_tolerance"),
        (dict(out_of_order="-1s"), "out_of_order_tolerance"),
        (dict(late_action="ignore"), "late_arrival_action"),
    ],
)
def test_bad_policy_is_refused_naming_the_field(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        TimePolicy.from_durations(**kwargs)
