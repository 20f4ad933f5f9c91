"""Job and key watermarks from partition states (semantics §3).

The job watermark is the minimum over all input partitions of the unit watermarks; a
partition that has never reported (NONE) holds it at NONE — unknown, not empty. With
``over``, a window of key ``k`` waits only for the units (p, k); a unit never seen in
partition p follows p's arrival term, so a silent key never holds its windows back.
"""

from __future__ import annotations

from collections.abc import Sequence

from tidegate.eventtime.policy import NONE, PartitionState, TimePolicy


def job_watermark_us(states: Sequence[PartitionState], policy: TimePolicy | Sequence[TimePolicy]) -> int:
    """min over partitions of W(p); NONE while any partition is unknown. ``policy``: the job's,
    or each partition's (inputs with their own policies), in the order of ``states``."""
    if not states or any(s.arrival_watermark_us == NONE for s in states):
        return int(NONE)
    policies = [policy] * len(states) if isinstance(policy, TimePolicy) else policy
    return min(s.unit_watermark_us(None, pol) for s, pol in zip(states, policies, strict=True))


def key_watermark_us(states: Sequence[PartitionState], key: object, policy: TimePolicy) -> int:
    """min over partitions p of W(p, key)."""
    if not states or any(s.arrival_watermark_us == NONE for s in states):
        return int(NONE)
    return min(s.unit_watermark_us(key, policy) for s in states)


def arrival_floor_us(states: Sequence[PartitionState]) -> int:
    """min over partitions of the arrival term: the watermark of any key (seen or not),
    which is what a window waits for when its group does not include the ``over`` key."""
    if not states or any(s.arrival_watermark_us == NONE for s in states):
        return int(NONE)
    return min(s.arrival_watermark_us for s in states)
