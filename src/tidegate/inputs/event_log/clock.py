"""The broker's clock: what arrival time the log stamps, and what it tells consumers.

Contract, in one sentence: once :meth:`EventLog.snapshot` has returned clock ``C``,
every event appended afterwards arrives at ``C`` or later.

* ``wall``: now = max(injected wall clock, latest arrival of any partition, floor). The
  floor is the largest clock any snapshot handed out, stored so that a wall clock
  stepping back (NTP, another host) cannot break the contract.
* ``manual`` (simulation, backfill, tests): now = the stored value, moved only forward
  by ``advance_clock``. It starts at 0 (1970-01-01) until first advanced.

Both keep the stored value in ``ROOT/clock``, replaced atomically.

On the wall clock, supplied arrival times (imports) may lie at most ``max_arrival_ahead``
(event-log.json, default 5 minutes) ahead of the wall clock itself — not of the broker clock,
which follows accepted arrivals and would let each accepted one raise the bound for the
next. Without that bound one producer's clock decades ahead would move every consumer's
clock there. A manual clock has no such bound: backfill appends recorded arrivals first
and advances the clock to them afterwards, and its arrivals never move the clock.
Retention reads the event log's own clock (wall or stored), never the largest arrival.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from tidegate.eventtime.durations import format_duration, format_time_us
from tidegate.files import atomic_write_text
from tidegate.inputs.event_log.errors import ArrivalAheadError, ArrivalOrderError, EventLogError
from tidegate.inputs.event_log.writer import Tail

CLOCK_NAME = "clock"
CLOCK_LOCK_NAME = "clock.lock"
MAX_CLOCK_US = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z: the last time Tidegate writes as ISO-8601


def wall_clock_us() -> int:
    """The default ``now_us``: the host's wall clock. Logic receives it injected."""
    return time.time_ns() // 1_000


def read_stored_clock(root: Path) -> int:
    path = root / CLOCK_NAME
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return 0
    try:
        value = int(text)
    except ValueError:
        raise EventLogError(
            f"{path} holds {text[:40]!r}, not a time in microseconds",
            "write the intended clock in µs since epoch into it, or recreate the event log",
        ) from None
    if not 0 <= value <= MAX_CLOCK_US:  # arrival times are int64 columns: a larger one cannot be stamped
        raise EventLogError(
            f"{path} holds a clock of {len(text.lstrip('+-'))} digits, "
            f"{'before 1970' if value < 0 else 'after the year 9999'}: not a time the log can stamp",
            f"write the intended clock in µs since epoch (at most {MAX_CLOCK_US}) into it "
            "(e.g. the latest arrival of its partitions), or recreate the event log",
        )
    return value


def write_stored_clock(root: Path, t_us: int) -> None:
    if not 0 <= int(t_us) <= MAX_CLOCK_US:
        raise EventLogError(
            f"cannot set the clock of {root} to {int(t_us)} µs: not between 1970 and the year 9999",
            "give a time in µs since epoch within those years",
        )
    atomic_write_text(root / CLOCK_NAME, f"{int(t_us)}\n")


def arrivals_for_append(
    tail: Tail, n: int, supplied: np.ndarray | None, *, stored_us: int, now_us: int | None,
    max_ahead_us: int | None = None,
) -> np.ndarray:  # fmt: skip
    """The arrival times of an append of ``n`` events after ``tail``.

    No event may arrive before the partition's last arrival or the stored clock (the
    manual clock, or the largest clock a snapshot handed out). Without ``supplied``
    times all ``n`` get the broker's now: that floor, or the wall clock ``now_us`` if
    later. Supplied times are checked against the floor and each other; any violation
    raises ArrivalOrderError (the caller then writes nothing). On the wall clock they are
    also checked against ``now_us + max_ahead_us``: ArrivalAheadError beyond it.
    """
    floor = stored_us if tail.last_arrival is None else max(stored_us, tail.last_arrival)
    if supplied is None:
        return np.full(n, floor if now_us is None else max(now_us, floor), dtype=np.int64)
    if n == 0:
        return supplied
    p = tail.partition
    steps = np.flatnonzero(np.diff(supplied) < 0)
    if len(steps):
        i = int(steps[0]) + 1
        raise ArrivalOrderError(
            f"partition {p}: arrival_times[{i}] = {format_time_us(supplied[i])} is before "
            f"arrival_times[{i - 1}] = {format_time_us(supplied[i - 1])}; nothing was written",
            "sort the events of a partition by arrival time before importing them",
        )
    if supplied[0] < floor:
        if tail.last_arrival is not None and supplied[0] < tail.last_arrival:
            why = f"the partition's last arrival {format_time_us(tail.last_arrival)} (offset {tail.end_offset - 1})"
        elif now_us is None:
            why = f"the event log's manual clock {format_time_us(floor)}"
        else:
            why = f"the broker clock {format_time_us(floor)} already handed to consumers"
        raise ArrivalOrderError(
            f"partition {p}: arrival_times[0] = {format_time_us(supplied[0])} is before {why}; nothing was written",
            "supply non-decreasing arrival times at or after that time, or omit them to let the log stamp arrivals",
        )
    if now_us is not None and max_ahead_us is not None and supplied[-1] > now_us + max_ahead_us:
        i = int(np.argmax(supplied > now_us + max_ahead_us))
        raise ArrivalAheadError(
            f"partition {p}: arrival_times[{i}] = {format_time_us(supplied[i])} is more than "
            f"{format_duration(max_ahead_us)} ahead of the broker clock {format_time_us(now_us)}; nothing was written",
            "check the producer's clock (arrival times must come from a clock in step with the log's), or raise the "
            "event log's max_arrival_ahead in event-log.json for a deliberate import ahead of time",
        )
    return supplied
