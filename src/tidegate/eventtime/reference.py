"""Reference data: which snapshot of a table an event joins, decided by the event's time.

A reference table is a sequence of **snapshots**, each valid from its time until the next
one's (Stream Analytics' reference blobs named by ``{date}/{time}``). Snapshot ``i`` covers

    [valid_from_i, valid_from_(i+1))        — the last one: [valid_from_n, ∞)

so an event at exactly a snapshot's valid-from time joins that snapshot, not the one
before it, and an event before the first snapshot joins none. The time that decides is the
event's System.Timestamp (its system time ``S`` after the policy, semantics §2), never the
wall clock: a stream, a replay and the batch path that see the same snapshots choose the
same one for every event, whatever the micro-batches.

A snapshot folder is named ``valid_from=<ISO-8601 time>``: :func:`snapshot_time_us` reads
the name, :func:`snapshot_folder_name` writes it.
"""

from __future__ import annotations

import numpy as np

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_time_us, parse_time_us

SNAPSHOT_PREFIX = "valid_from="
NO_SNAPSHOT = -1  # an event before the first snapshot


def snapshot_index(valid_from_us, event_us) -> np.ndarray:
    """Per event, the index of the snapshot covering its time in the ascending
    ``valid_from_us``, or :data:`NO_SNAPSHOT` when the event is before the first one.
    Edges: ``[valid_from_i, valid_from_(i+1))``."""
    starts = np.asarray(valid_from_us, dtype=np.int64)
    if len(starts) > 1 and np.any(np.diff(starts) <= 0):
        raise ValueError("snapshot times must be strictly ascending")
    return np.searchsorted(starts, np.asarray(event_us, dtype=np.int64), side="right") - 1


def snapshot_time_us(folder_name: str, where: str = "reference") -> int | None:
    """The valid-from time of a snapshot folder ``valid_from=<time>``; None for a name that
    is not a snapshot (other files, ``.``- or ``_``-prefixed work in progress)."""
    if not folder_name.startswith(SNAPSHOT_PREFIX):
        return None
    text = folder_name[len(SNAPSHOT_PREFIX):]
    try:
        return parse_time_us(text, field=f"{where}: snapshot folder {folder_name}")
    except ConfigError as exc:
        raise ConfigError(exc.problem, "name each snapshot folder valid_from=<ISO-8601 time>, "
                                       "e.g. valid_from=2026-03-01T00:00:00Z") from None


def snapshot_folder_name(valid_from_us: int) -> str:
    return SNAPSHOT_PREFIX + format_time_us(valid_from_us)
