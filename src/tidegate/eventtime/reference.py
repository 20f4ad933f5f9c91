"""Reference data: which snapshot of a table an event joins, decided by the event's time.

A reference table is a sequence of **snapshots**, each valid from its time until the next
one's (Stream Analytics' reference blobs named by ``{date}/{time}``). Snapshot ``i`` covers

    [valid_from_i, valid_from_(i+1))        — the last one: [valid_from_n, ∞)

so an event at exactly a snapshot's valid-from time joins that snapshot, not the one
before it, and an event before the first snapshot joins none. The time that decides is the
event's System.Timestamp (its system time ``S`` after the policy, semantics §2), never the
wall clock: a stream, a replay and the batch path that see the same snapshots choose the
same one for every event, whatever the micro-batches.

**A snapshot published late** — after the job had already processed events of its time —
cannot change the rows those events were joined with. So each snapshot also has an
**effective start**, fixed when the job first reads it and recorded in its lineage
(:mod:`tidegate.lineage.reference_records`): its valid-from time, or just after the latest
system time the job had processed then, whichever is later. An event joins, among the
snapshots whose effective start is at or before its time, the one with the latest valid-from
time; before any snapshot was there, events chose among the others just so. A snapshot on
time has effective start = valid-from, and the rule is the one above.

A snapshot folder is named ``valid_from=<ISO-8601 time>``: :func:`snapshot_time_us` reads
the name, :func:`snapshot_folder_name` writes it.
"""

from __future__ import annotations

import numpy as np

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_time_us, parse_time_us

SNAPSHOT_PREFIX = "valid_from="
NO_SNAPSHOT = -1  # an event before the first snapshot


def snapshot_index(valid_from_us, event_us, effective_us=None) -> np.ndarray:
    """Per event, the index of the snapshot it joins in the ascending ``valid_from_us``, or
    :data:`NO_SNAPSHOT` when none is in effect at its time. Without ``effective_us`` (every
    snapshot on time) the edges are ``[valid_from_i, valid_from_(i+1))``; with it, the latest
    snapshot whose effective start is at or before the event's time."""
    starts = np.asarray(valid_from_us, dtype=np.int64)
    if len(starts) > 1 and np.any(np.diff(starts) <= 0):
        raise ValueError("snapshot times must be strictly ascending")
    events = np.asarray(event_us, dtype=np.int64)
    if effective_us is None:
        return np.searchsorted(starts, events, side="right") - 1
    effective = np.asarray(effective_us, dtype=np.int64)
    if effective.shape != starts.shape or np.any(effective < starts):
        raise ValueError("each snapshot needs an effective start at or after its valid-from time")
    in_effect = effective[None, :] <= events[:, None]  # events × snapshots
    last = len(starts) - 1 - np.argmax(in_effect[:, ::-1], axis=1) if len(starts) else np.zeros(len(events), np.int64)
    return np.where(in_effect.any(axis=1), last, NO_SNAPSHOT)


def effective_start_us(valid_from_us: int, processed_through_us: int | None, watermark_us: int | None) -> int:
    """A snapshot's effective start when the job first reads it: its valid-from time, unless the
    job had already processed events at or after it — then just after the latest of those
    (``processed_through_us``, the largest system time processed) or the job watermark, so
    that every event processed before the read keeps the snapshot it joined."""
    after = [t for t in (watermark_us, None if processed_through_us is None else processed_through_us + 1)
             if t is not None]  # fmt: skip
    return max([valid_from_us, *after])


def snapshot_time_us(folder_name: str, where: str = "reference") -> int | None:
    """The valid-from time of a snapshot folder ``valid_from=<time>``; None for a name that
    is not a snapshot (other files, ``.``- or ``_``-prefixed work in progress)."""
    if not folder_name.startswith(SNAPSHOT_PREFIX):
        return None
    text = folder_name[len(SNAPSHOT_PREFIX) :]
    try:
        return parse_time_us(text, field=f"{where}: snapshot folder {folder_name}")
    except ConfigError as exc:
        raise ConfigError(
            exc.problem, "name each snapshot folder valid_from=<ISO-8601 time>, e.g. valid_from=2026-03-01T00:00:00Z"
        ) from None


def snapshot_folder_name(valid_from_us: int) -> str:
    return SNAPSHOT_PREFIX + format_time_us(valid_from_us)
