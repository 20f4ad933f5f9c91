"""The per-event time policy of semantics §2, vectorised over one partition's events.

Contract, in one sentence: after the policy has kept an event at system time S in a
unit, every later kept event of that unit has S' >= W, the unit's watermark, and
``W >= S - out_of_order_tolerance``.

Events of one partition are processed in arrival (offset) order. The outcome of each
event — kept, adjusted (with reason) or dropped (with reason) — depends only on the
unit's earlier events, never on how the stream was cut into batches: the state carried
between calls (:class:`PartitionState`) is exactly what the next event needs.

Why the whole thing vectorises: an out-of-order adjustment sets ``S = maxS - ooo``,
which never raises ``maxS``; and an event dropped for being out of order has
``S0 < maxS``. So ``maxS`` is the running maximum of the pre-adjustment time ``S0`` over
the events that survive the early and late rules — a cumulative max, no loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

import numpy as np

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_duration, parse_duration_us, to_micros

Action = Literal["adjust", "drop"]
ACTIONS = ("adjust", "drop")

NONE = np.iinfo(np.int64).min  # "no value yet" for times held in int64 arrays
MAX_LATE_US = 20 * 86_400 * 1_000_000
DEFAULT_LATE_US = 5 * 1_000_000
EARLY_WINDOW_US = 5 * 60 * 1_000_000

# outcome codes, as stored in int8 columns
KEPT, ADJUSTED, DROPPED = 0, 1, 2
ACTION_NAMES = ("kept", "adjusted", "dropped")
NO_REASON, EARLY, LATE, OUT_OF_ORDER, LATE_AND_OUT_OF_ORDER = 0, 1, 2, 3, 4
REASON_NAMES = ("", "early", "late", "out_of_order", "late+out_of_order")


@dataclass(frozen=True)
class TimePolicy:
    """Tolerances and actions of one job. Durations in microseconds.

    ``early_arrival_window_us=None`` switches the early rule off (used only to show
    what semantics §2's golden case looks like without it; jobs always have it).
    """

    out_of_order_tolerance_us: int = 0
    out_of_order_action: Action = "adjust"
    late_arrival_tolerance_us: int = DEFAULT_LATE_US
    late_arrival_action: Action = "adjust"
    early_arrival_window_us: int | None = EARLY_WINDOW_US

    def __post_init__(self) -> None:
        if self.out_of_order_tolerance_us < 0:
            raise ConfigError("policy.out_of_order_tolerance is negative", "use a duration of 0s or more, e.g. 2m")
        if not 0 <= self.late_arrival_tolerance_us <= MAX_LATE_US:
            raise ConfigError(
                f"policy.late_arrival_tolerance is {format_duration(self.late_arrival_tolerance_us)}",
                "it must be between 0s and 20d",
            )
        if self.early_arrival_window_us is not None and self.early_arrival_window_us < 0:
            raise ConfigError("policy.early_arrival_window is negative", "use 5m (the default)")
        for name in ("out_of_order_action", "late_arrival_action"):
            if getattr(self, name) not in ACTIONS:
                raise ConfigError(f"policy.{name} is {getattr(self, name)!r}", "use 'adjust' (the default) or 'drop'")

    @classmethod
    def from_durations(
        cls,
        *,
        out_of_order: str | timedelta = "0s",
        late: str | timedelta = "5s",
        early: str | timedelta | None = "5m",
        out_of_order_action: Action = "adjust",
        late_action: Action = "adjust",
    ) -> TimePolicy:
        def us(value: str | timedelta, name: str) -> int:
            return to_micros(value) if isinstance(value, timedelta) else parse_duration_us(value, field=name)

        return cls(
            out_of_order_tolerance_us=us(out_of_order, "policy.out_of_order_tolerance"),
            out_of_order_action=out_of_order_action,
            late_arrival_tolerance_us=us(late, "policy.late_arrival_tolerance"),
            late_arrival_action=late_action,
            early_arrival_window_us=None if early is None else us(early, "policy.early_arrival_window"),
        )

    def describe(self) -> str:
        early = "off" if self.early_arrival_window_us is None else format_duration(self.early_arrival_window_us)
        return (
            f"out-of-order {format_duration(self.out_of_order_tolerance_us)} ({self.out_of_order_action}), "
            f"late {format_duration(self.late_arrival_tolerance_us)} ({self.late_arrival_action}), early {early}"
        )


@dataclass(frozen=True)
class PartitionState:
    """What the policy carries from one batch of a partition to the next.

    ``arrival_watermark_us``: the partition's arrival term, max(A − late) over its events
    and over the broker-clock estimates taken while it was idle (NONE before any).
    ``max_system_us``: maxS per unit key (``None`` is the key of the single unit of a job
    without ``over``).
    """

    arrival_watermark_us: int = int(NONE)
    last_arrival_us: int = int(NONE)
    max_system_us: Mapping[object, int] = field(default_factory=dict)

    def unit_watermark_us(self, unit: object, policy: TimePolicy) -> int:
        """W of one unit: max(arrival term, maxS − ooo); a unit never seen follows its partition."""
        max_s = self.max_system_us.get(unit, int(NONE))
        own = int(NONE) if max_s == NONE else max_s - policy.out_of_order_tolerance_us
        return max(self.arrival_watermark_us, own)

    def advance_idle(self, estimated_arrival_us: int, policy: TimePolicy) -> PartitionState:
        """semantics §2 idle units: W := max(W, estimated arrival − late), the estimate being the
        broker's clock reading recorded with the input position (so replays repeat it)."""
        if estimated_arrival_us == NONE:
            return self
        term = estimated_arrival_us - policy.late_arrival_tolerance_us
        if term <= self.arrival_watermark_us:
            return self
        return PartitionState(term, self.last_arrival_us, self.max_system_us)


@dataclass(frozen=True)
class PolicyResult:
    """Per-event outcome arrays, aligned with the input. ``system_us`` is NONE when dropped."""

    action: np.ndarray  # int8: KEPT / ADJUSTED / DROPPED
    reason: np.ndarray  # int8: NO_REASON / EARLY / LATE / OUT_OF_ORDER / LATE_AND_OUT_OF_ORDER
    system_us: np.ndarray  # int64
    watermark_us: np.ndarray  # int64: the unit's watermark right after this event (step 4)

    @property
    def kept(self) -> np.ndarray:
        return self.action != DROPPED


def apply_policy(
    policy: TimePolicy,
    event_us: np.ndarray,
    arrival_us: np.ndarray,
    state: PartitionState,
    units: np.ndarray | None = None,
) -> tuple[PolicyResult, PartitionState]:
    """Run semantics §2 over one partition's events, given in arrival order.

    ``units`` holds each event's substream key (``over``); ``None`` means one unit for
    the whole partition. Returns the outcomes and the state for the next batch.
    """
    event_us = np.asarray(event_us, dtype=np.int64)
    arrival_us = np.asarray(arrival_us, dtype=np.int64)
    n = len(event_us)
    if len(arrival_us) != n:
        raise ValueError("event_us and arrival_us differ in length")
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return PolicyResult(empty.astype(np.int8), empty.astype(np.int8), empty, empty), state
    if n > 1 and np.any(np.diff(arrival_us) < 0):
        raise ValueError("events of a partition must be given in arrival order")
    ooo = policy.out_of_order_tolerance_us
    late_us = policy.late_arrival_tolerance_us

    # step 1 — early: dropped; its event time must never reach maxS or W
    if policy.early_arrival_window_us is None:
        early = np.zeros(n, dtype=bool)
    else:
        early = (event_us - arrival_us) > policy.early_arrival_window_us
    # step 2 — late. An event that arrived before the clock an earlier batch was judged with
    # (the brokers' clock lagged this host's by more than the configured skew: see
    # tidegate.inputs.kafka.log) counts as arriving at that clock, so it is adjusted up to the
    # watermark the clock set, never left behind it.
    judged_arrival = arrival_us
    if state.arrival_watermark_us != NONE:
        judged_arrival = np.maximum(arrival_us, state.arrival_watermark_us + late_us)
    late = ~early & ((judged_arrival - event_us) > late_us)
    s0 = np.where(late, judged_arrival - late_us, event_us)
    late_dropped = late & (policy.late_arrival_action == "drop")
    eligible = ~early & ~late_dropped

    # step 3 — out of order, against maxS of the unit before this event
    codes, unit_keys = _unit_codes(units, n)
    init = np.array([state.max_system_us.get(k, int(NONE)) for k in unit_keys], dtype=np.int64)
    prev_max, max_after = _running_max_per_unit(np.where(eligible, s0, NONE), codes, init)
    has_prev = prev_max != NONE
    floor = np.where(has_prev, prev_max - ooo, NONE)
    out_of_order = eligible & has_prev & (s0 < floor)
    ooo_dropped = out_of_order & (policy.out_of_order_action == "drop")
    system = np.where(out_of_order & ~ooo_dropped, floor, s0)

    dropped = early | late_dropped | ooo_dropped
    action = np.where(dropped, DROPPED, np.where(late | out_of_order, ADJUSTED, KEPT)).astype(np.int8)
    reason = np.select(
        [early, late & out_of_order, late, out_of_order],
        [EARLY, LATE_AND_OUT_OF_ORDER, LATE, OUT_OF_ORDER],
        NO_REASON,
    ).astype(np.int8)
    system = np.where(dropped, NONE, system)

    # step 4 — every event, kept or dropped: W := max(W, maxS − ooo, A − late)
    arrival_term = np.maximum.accumulate(np.maximum(arrival_us - late_us, state.arrival_watermark_us))
    own_term = np.where(max_after != NONE, max_after - ooo, NONE)
    watermark = np.maximum(arrival_term, own_term)

    new_max = dict(state.max_system_us)
    last_of_unit = _last_index_per_code(codes, len(unit_keys))
    for code, key in enumerate(unit_keys):
        if max_after[last_of_unit[code]] != NONE:
            new_max[key] = int(max_after[last_of_unit[code]])
    new_state = PartitionState(
        arrival_watermark_us=int(arrival_term[-1]),
        last_arrival_us=int(arrival_us[-1]),
        max_system_us=new_max,
    )
    return PolicyResult(action, reason, system.astype(np.int64), watermark.astype(np.int64)), new_state


def _unit_codes(units: np.ndarray | None, n: int) -> tuple[np.ndarray, list]:
    if units is None:
        return np.zeros(n, dtype=np.int64), [None]
    values = np.asarray(units, dtype=object)
    keys: dict = {}
    codes = np.fromiter((keys.setdefault(v, len(keys)) for v in values), dtype=np.int64, count=n)
    return codes, list(keys)


def _last_index_per_code(codes: np.ndarray, n_codes: int) -> np.ndarray:
    last = np.full(n_codes, -1, dtype=np.int64)
    last[codes] = np.arange(len(codes))  # later indices overwrite earlier ones
    return last


def _running_max_per_unit(values: np.ndarray, codes: np.ndarray, init: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-unit running max of ``values`` (NONE = absent), seeded by ``init`` per unit.

    Returns (max of the unit strictly before each event, max including it). Done with
    one cumulative max over values ranked per unit, so it costs O(n log n), not a loop.
    """
    n = len(values)
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    sorted_vals = values[order]
    # seed each unit's run with its initial maxS, as a virtual first element
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    seeded_vals = np.insert(sorted_vals, starts, init[sorted_codes[starts]])
    seeded_codes = np.insert(sorted_codes, starts, sorted_codes[starts])
    # rank within the whole array, then lift each unit's block above the previous one
    uniq, rank = np.unique(seeded_vals, return_inverse=True)
    block = np.cumsum(np.r_[0, seeded_codes[1:] != seeded_codes[:-1]])
    lifted = block * (len(uniq) + 1) + rank
    running = uniq[np.maximum.accumulate(lifted) - block * (len(uniq) + 1)]
    is_seed = np.zeros(len(seeded_vals), dtype=bool)
    is_seed[starts + np.arange(len(starts))] = True
    incl_sorted = running[~is_seed]
    excl_sorted = running[np.flatnonzero(~is_seed) - 1]
    inclusive = np.empty(n, dtype=np.int64)
    exclusive = np.empty(n, dtype=np.int64)
    inclusive[order] = incl_sorted
    exclusive[order] = excl_sorted
    return exclusive, inclusive
