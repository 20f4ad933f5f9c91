"""A later step of a job (Stream Analytics' ``WITH``): what it reads and what it computes.

A later step reads the job's events (``from: input``) or the rows of an earlier step, and is
one of three forms:

* **a window** — ``window``, ``group_by``, ``aggregates``, optional ``having`` and ``filter``
  (before the window) — whose rows are timed by their ``window_end``;
* **per event** — an optional ``filter`` and ``select`` over each row it reads — whose rows
  keep the System.Timestamp of the row each comes from (a window row's ``window_end``, any
  other row's ``system_time``) and are emitted with it, in the same micro-batch; with
  ``analytics`` (LAG, LAST, ISFIRST … over the rows it reads, in the order of that
  System.Timestamp) each row is emitted once the watermark passes its time, as the first
  step's analytic rows are. A per-event step without analytic functions may join
  reference tables (``reference``, as the first step's): each row it reads is enriched from
  the snapshot its System.Timestamp falls in, then filtered and projected;
* **a join** of two earlier steps' rows (``join``: ``left`` and ``right`` steps, keys and a
  ``DATEDIFF`` bound over their System.Timestamps, as two inputs are joined), then a
  ``filter`` and the ``select`` of each joined row, timed as a join row is: a matched row by
  the later of its two rows, an unmatched left row by its time plus the bound's upper end.

Windows follow the job's edges, ``(start, end]`` by default (semantics §3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tidegate.eventtime.windows import Window
from tidegate.jobspec.analytics import AnalyticSpec
from tidegate.jobspec.expressions import canonical_expression
from tidegate.jobspec.joins import JoinSpec
from tidegate.jobspec.reference import ReferenceSpec
from tidegate.jobspec.references import references_describe, references_dict
from tidegate.jobspec.window_form import window_dict, window_text

NamedExprs = tuple[tuple[str, str], ...]
FIRST_STEP_READS = "input"  # what a step's ``from`` names to read the job's events


@dataclass(frozen=True)
class StepSpec:
    """A step after the first: a window over the rows it reads, or (``window`` None) a
    per-event filter and projection of them."""

    name: str
    reads: str  # the step whose output it reads, or FIRST_STEP_READS: the job's events
    window: Window | None  # None: a per-event step
    group_by: NamedExprs = ()
    aggregates: NamedExprs = ()
    filter: str | None = None  # over the rows read (before the window, for a window step)
    having: str | None = None  # over the window's rows, after it (Stream Analytics' HAVING)
    select: NamedExprs = ()  # a per-event step's projection; () keeps every column read
    analytics: tuple[AnalyticSpec, ...] = ()  # a per-event step's analytic columns, over the rows it reads
    references: tuple[ReferenceSpec, ...] = ()  # tables each row it reads joins, in order (per event)
    join: JoinSpec | None = None  # a join of two earlier steps: ``reads`` is its left step

    @property
    def per_event(self) -> bool:
        return self.window is None and self.join is None

    @property
    def reads_all(self) -> tuple[str, ...]:
        """Every step (or the input) whose rows it reads: its join's two steps, or the one."""
        return (self.join.left, self.join.right) if self.join is not None else (self.reads,)

    @property
    def reads_input(self) -> bool:
        return self.reads == FIRST_STEP_READS

    @property
    def span_us(self) -> int:
        """How far back its rows reach in the rows it reads: its window's span, its analytic
        functions' largest; 0 for a plain filter and projection."""
        if self.window is not None:
            return self.window.span_us
        if self.join is not None:
            return self.join.span_us
        return max((a.span_us for a in self.analytics), default=0)

    def canonical(self) -> dict[str, Any]:
        """What the fingerprint hashes: not the names (the job says by position which step each
        reads) — renaming a step changes no result."""
        filter_ = canonical_expression(self.filter) if self.filter else None
        if self.join is not None:
            select = [[n, canonical_expression(e)] for n, e in self.select]
            return {"join": self.join.canonical(), "filter": filter_, "select": select}
        if self.window is None:
            out: dict[str, Any] = {"window": None, "select": [[n, canonical_expression(e)] for n, e in self.select]}
            out["filter"] = filter_
            if self.references:  # absent otherwise, so that every earlier fingerprint stays as it was
                out["reference"] = [r.canonical() for r in self.references]
            return out | ({"analytics": [a.canonical() for a in self.analytics]} if self.analytics else {})
        out = {  # the form every window step was hashed in
            "window": window_dict(self.window, us=True),
            "group_by": [[n, canonical_expression(e)] for n, e in self.group_by],
            "aggregates": [[n, canonical_expression(e)] for n, e in self.aggregates],
            "filter": filter_,
        }
        if self.having:  # absent otherwise, so that every earlier fingerprint stays as it was
            out["having"] = canonical_expression(self.having)
        return out

    def to_dict(self) -> dict[str, Any]:
        if self.join is not None:
            return {"name": self.name, "join": self.join.to_dict(), "filter": self.filter, "select": dict(self.select)}
        if self.window is None:
            analytics = {"analytics": {a.name: a.text() for a in self.analytics}} if self.analytics else {}
            reference = {"reference": references_dict(self.references)} if self.references else {}
            return (
                {"name": self.name, "from": self.reads}
                | analytics
                | reference
                | {
                    "filter": self.filter,
                    "select": dict(self.select) or None,
                }
            )
        return {
            "name": self.name,
            "from": self.reads,
            "filter": self.filter,
            "window": window_dict(self.window, us=False),
            "group_by": [n if n == e else {n: e} for n, e in self.group_by],
            "aggregates": dict(self.aggregates),
        } | ({"having": self.having} if self.having else {})

    def describe(self) -> str:
        if self.join is not None:
            what = f"{self.name}: {self.join.describe()} as " + ", ".join(n for n, _ in self.select)
        elif self.window is None:
            what = f"{self.name}: each row of {self.reads}"
            what += " with " + ", ".join(f"{a.name}={a.text()}" for a in self.analytics) if self.analytics else ""
            what += " " + references_describe(self.references) if self.references else ""
            what += " as " + ", ".join(n for n, _ in self.select) if self.select else ""
        else:
            by = ", ".join(n for n, _ in self.group_by)
            what = f"{self.name}: {window_text(self.window)} windows of {self.reads} "
            what += f"by {by}" if by else "over all rows"
            what += " → " + ", ".join(f"{n}={e}" for n, e in self.aggregates)
            what += f" having {self.having}" if self.having else ""
        return what + (f" where {self.filter}" if self.filter else "")


WINDOW_OUTPUT = ("window_start", "window_end")
EVENT_OUTPUT = ("partition", "offset", "system_time")  # every per-event row's position and time
JOIN_OUTPUT = ("partition", "offset", "right_partition", "right_offset", "system_time")
