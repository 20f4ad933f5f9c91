"""Temporal join over system time: which left and right events pair up, when a row is final,
and which events the join must still hold.

For events of one join key, with ``d = S_right − S_left`` (exact, in µs), a left and a right
event **match** when ``lo ≤ d ≤ hi`` — both bounds inclusive: the spec's
``DATEDIFF(unit, left, right) BETWEEN lo AND hi``. Every matching pair is one output row, so
duplicates on either side multiply as in SQL: two equal left events and three matching
right events give six rows. A left outer join also gives one row, its right side NULL, for
each left event that matches nothing.

**Output time** (the row's ``system_time``), and when a row is final:

* a matched row: ``max(S_left, S_right)`` — once the watermark is past it, both events have
  been seen;
* an unmatched left row: ``S_left + max(hi, 0)`` — once the watermark is past it, no right
  event that could still come (``S ≥ W``) lies within ``[S_left + lo, S_left + hi]``; the
  ``max`` keeps that time at or after the left event itself when the bound lies wholly
  before it (``hi < 0``).

A row is emitted by the step whose frontier first passes its output time
(``prev ≤ out < now``), as an analytic result is: every kept event that follows has
``S ≥ W``, so a row's events are all present by then, and no later event adds a row at or
before ``W``. The **output order** is (output time, left partition, left offset, right
partition, right offset), an unmatched row's right position counting as before any.

**State.** A left event is held while ``S_left ≥ W − max(hi, 0)`` (a right event still to
come may match it, or its rows are not final); a right event while
``S_right ≥ W + lo − max(hi, 0)`` (a left event still held may pair with it: that is what
lets an unmatched row be told apart from a matched one without remembering matches). The
replay look-back of a join is :attr:`TemporalJoin.span_us`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_duration
from tidegate.eventtime.policy import NONE
from tidegate.eventtime.windows import MAX_WINDOW_US

JOIN_KINDS = ("inner", "left")
MAX_JOIN_SPAN_US = MAX_WINDOW_US  # the bound reaches at most 7 days from the left event


@dataclass(frozen=True)
class TemporalJoin:
    """``DATEDIFF(unit, left, right) BETWEEN lo AND hi``, inner or left outer; bounds in µs."""

    lo_us: int
    hi_us: int
    kind: str = "inner"

    def __post_init__(self) -> None:
        if self.kind not in JOIN_KINDS:
            raise ConfigError(f"join type is {self.kind!r}", "use inner or left (left outer)")
        if self.lo_us > self.hi_us:
            raise ConfigError(
                f"the join bound is BETWEEN {format_duration(self.lo_us)} AND {format_duration(self.hi_us)}: "
                "its low end is above its high end",
                "write the smaller number first, e.g. BETWEEN 0 AND 15",
            )
        if self.span_us > MAX_JOIN_SPAN_US:
            raise ConfigError(
                f"the join bound reaches {format_duration(self.span_us)} from the left event, longer than the "
                "7-day maximum",
                "bound it within 7 days: the job holds (and replays) that much of each input",
            )

    @property
    def span_us(self) -> int:
        """How far back from an output row its events lie: ``max(hi, 0) − min(lo, 0)`` — the
        bound's width ``hi − lo`` whenever it holds 0 (the usual ``BETWEEN 0 AND hi``)."""
        return max(self.hi_us, 0) - min(self.lo_us, 0)

    def unmatched_out_us(self, left_us: np.ndarray) -> np.ndarray:
        return np.asarray(left_us, dtype=np.int64) + max(self.hi_us, 0)


@dataclass(frozen=True)
class Rows:
    """Output rows, in output order: the left and right event of each (right −1: unmatched)."""

    left: np.ndarray
    right: np.ndarray
    out_us: np.ndarray


def join_rows(join: TemporalJoin, left_us, left_pos, right_us, right_pos) -> Rows:
    """Every row the events of one join key give, in output order.

    ``*_us``: system times; ``*_pos``: (partition, offset) per event, as an (n, 2) array —
    they only order the rows.
    """
    ls, rs = np.asarray(left_us, dtype=np.int64), np.asarray(right_us, dtype=np.int64)
    lp, rp = np.asarray(left_pos, dtype=np.int64).reshape(-1, 2), np.asarray(right_pos, dtype=np.int64).reshape(-1, 2)
    by_time = np.argsort(rs, kind="stable")
    sorted_rs = rs[by_time]
    first = np.searchsorted(sorted_rs, ls + join.lo_us, side="left")
    last = np.searchsorted(sorted_rs, ls + join.hi_us, side="right")
    counts = np.maximum(last - first, 0)
    left = np.repeat(np.arange(len(ls)), counts)
    starts = np.repeat(first - np.r_[0, np.cumsum(counts)[:-1]], counts) if len(ls) else np.zeros(0, dtype=np.int64)
    right = by_time[np.arange(len(left)) + starts] if len(left) else np.zeros(0, dtype=np.int64)
    out = np.maximum(ls[left], rs[right]) if len(left) else np.zeros(0, dtype=np.int64)
    if join.kind == "left":
        alone = np.flatnonzero(counts == 0)
        left = np.r_[left, alone].astype(np.int64)
        right = np.r_[right, np.full(len(alone), -1)].astype(np.int64)
        out = np.r_[out, join.unmatched_out_us(ls[alone])].astype(np.int64)
    rpos = np.full((len(right), 2), -1, dtype=np.int64)  # an unmatched row sorts before any right event
    rpos[right >= 0] = rp[right[right >= 0]]
    order = np.lexsort((rpos[:, 1], rpos[:, 0], lp[left, 1], lp[left, 0], out)) if len(left) else left
    return Rows(left[order], right[order], out[order])


@dataclass(frozen=True)
class Step:
    rows: Rows  # the rows final in this step, in output order
    keep_left: np.ndarray  # bool per left event: held for the next step
    keep_right: np.ndarray


def step(
    join: TemporalJoin,
    left_us, left_pos, right_us, right_pos,
    prev_frontier_us: int,
    frontier_us: int,
    emit_after_us: int | None = None,
) -> Step:  # fmt: skip
    """Advance one key's join from ``prev_frontier`` to ``frontier`` over the held and new
    events: the rows with ``prev ≤ out < frontier`` (and ``out > emit_after_us``: output
    before a restart is not emitted again), and which events to hold. A frontier of NONE
    (unknown) emits nothing and holds everything."""
    rows = join_rows(join, left_us, left_pos, right_us, right_pos)
    ls, rs = np.asarray(left_us, dtype=np.int64), np.asarray(right_us, dtype=np.int64)
    if frontier_us == NONE:
        return Step(Rows(*(a[:0] for a in (rows.left, rows.right, rows.out_us))),
                    np.ones(len(ls), dtype=bool), np.ones(len(rs), dtype=bool))  # fmt: skip
    final = (rows.out_us >= prev_frontier_us) & (rows.out_us < frontier_us)
    if emit_after_us is not None:
        final &= rows.out_us > emit_after_us
    reach = max(join.hi_us, 0)
    return Step(
        Rows(rows.left[final], rows.right[final], rows.out_us[final]),
        ls >= frontier_us - reach,
        rs >= frontier_us + join.lo_us - reach,
    )
