"""How far the consumer view fell behind the live stream during a procedure, and for how long.

The view's **delay** at a moment is how far its last window end trails the live stream: the
broker clock then, minus the newest window end consumers could read then — in the region
they read, each of its lineages over its span (:mod:`tidegate.runtime.outputs.reader`). A
procedure's **gap** is the largest delay while it ran and the seconds the delay spent beyond
the allowed delay. A caught-up job's delay is never 0: a window is out once the watermark
passes its end, so its size, the late-arrival tolerance and a trigger interval are always
in it; the allowed delay is judged against the whole of it, as consumers see it.

Measured from the records, after the fact, so every procedure gets it without a watcher
beside it: each batch of either region is a moment — its broker clock is its watermark plus
its watermark delay — and what the view held then follows from the window ends each lineage
had committed by then, the lineages' spans (a lineage's span is cut when the lineage after
it opens), and the region consumers read (the switches recorded as operations). Between two
moments the delay is taken as it was at the first, a step: the resolution is the drivers'
trigger interval while either region runs. Rehearsals' batches move the clock but are never
read by consumers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass

DEFAULT_ALLOWED_DELAY_S = 600.0  # the planned stop's default; drills and failovers are judged by it
HISTORY_S = 3600.0  # batches before a procedure read to know what each lineage had emitted when it began


@dataclass(frozen=True)
class LineageSpan:
    """A lineage as the view reads it: window ends in ``(from_us, until_us]``, the cut applying
    from ``cut_at`` (when the lineage after it opened)."""

    lineage: str
    region: str
    created_at: float
    from_us: int | None
    until_us: int | None
    cut_at: float | None


@dataclass(frozen=True)
class Moment:
    """One recorded batch: when it was done, its lineage (None: not one consumers read),
    the largest window end it emitted and the broker clock when it was done."""

    at: float
    lineage: str | None
    last_output_us: int | None
    clock_us: int | None


@dataclass(frozen=True)
class ConsumerGap:
    max_delay_s: float | None  # None: no moment with both a clock and a view to compare
    beyond_allowed_s: float
    allowed_delay_s: float
    moments: int
    worst_at: float | None = None  # when the largest delay was seen (epoch seconds)

    @property
    def within_allowed(self) -> bool:
        return self.beyond_allowed_s == 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        if self.max_delay_s is None:
            return "consumer view: not measured (no batch recorded while the procedure ran)"
        return (
            f"consumer view at most {self.max_delay_s:.0f} s behind the live stream, "
            f"{self.beyond_allowed_s:.0f} s beyond the allowed {self.allowed_delay_s:.0f} s"
        )


def gap_of(delays: Sequence[tuple[float, float]], until: float, allowed_delay_s: float) -> ConsumerGap:
    """The gap of ``delays`` — (moment, delay in s), in time order — up to ``until``: each
    delay holds until the next moment (a step)."""
    if not delays:
        return ConsumerGap(None, 0.0, allowed_delay_s, 0)
    beyond = 0.0
    for (at, delay), following in zip(delays, [*(d[0] for d in delays[1:]), max(until, delays[-1][0])], strict=True):
        if delay > allowed_delay_s:
            beyond += following - at
    worst_at, worst = max(delays, key=lambda d: d[1])
    return ConsumerGap(round(worst, 1), round(beyond, 1), allowed_delay_s, len(delays), worst_at)


def view_delays(
    moments: Iterable[Moment],
    spans: Sequence[LineageSpan],
    active_at: Callable[[float], str | None],
    since: float,
    until: float,
    emitted: dict[str, int] | None = None,
) -> list[tuple[float, float]]:
    """The view's delay at ``since``, at each moment in ``[since, until]`` and at ``until``.
    ``moments`` in time order, from before ``since`` so each lineage's output so far is known;
    ``emitted``: the last window end of lineages no moment is of (they ran before)."""
    through: dict[str, int] = dict(emitted or {})
    clock: int | None = None
    by_id = {s.lineage: s for s in spans}
    delays: list[tuple[float, float]] = []

    def look(at: float) -> None:
        end = view_end(through, spans, active_at(at), at)
        if clock is not None and end is not None:
            delays.append((at, (clock - end) / 1e6))

    started = False
    for m in moments:
        if m.at > until:
            break
        if not started and m.at >= since:
            look(since)
            started = True
        if m.lineage in by_id and m.last_output_us is not None:
            through[m.lineage] = max(through.get(m.lineage, m.last_output_us), m.last_output_us)
        if m.clock_us is not None:
            clock = max(clock or m.clock_us, m.clock_us)
        if started:
            look(m.at)
    if not started:
        look(since)
    look(until)
    return delays


def view_end(through: dict[str, int], spans: Sequence[LineageSpan], region: str | None, at: float) -> int | None:
    """The newest window end consumers reading ``region`` could read at ``at``."""
    ends = []
    for s in spans:
        if s.region != region or s.created_at > at or s.lineage not in through:
            continue
        end = through[s.lineage]
        if s.cut_at is not None and at >= s.cut_at and s.until_us is not None:
            end = min(end, s.until_us)
        if s.from_us is None or end > s.from_us:
            ends.append(end)
    return max(ends) if ends else None


def lineage_spans(rows: Sequence) -> list[LineageSpan]:
    """The lineages of one region (rows oldest first), each cut from when the next one opened."""
    spans = []
    for i, row in enumerate(rows):
        later = rows[i + 1].created_at if i + 1 < len(rows) else None
        spans.append(LineageSpan(row.id, row.region, row.created_at, row.output_from_us, row.output_until_us, later))
    return spans


def active_timeline(
    switches: Sequence[tuple[float, str, str | None]], current: str | None
) -> Callable[[float], str | None]:
    """Which region consumers read at a moment, from the switches ``(at, to, from)`` in time
    order and the region they read now."""

    def active_at(at: float) -> str | None:
        before = [to for when, to, _ in switches if when <= at]
        if before:
            return before[-1]
        after = [src for when, _, src in switches if when > at]
        return after[0] if after and after[0] else current

    return active_at


def measure(
    db,
    job: str,
    regions: Sequence[str],
    since: float,
    until: float | None = None,
    *,
    allowed_delay_s: float = DEFAULT_ALLOWED_DELAY_S,
) -> ConsumerGap:
    """The consumer view's gap for ``job`` from ``since`` to ``until`` (default now), from the
    control database's records."""
    import json

    until = db.now() if until is None else until
    rows = [row for r in regions for row in db.lineages(job, r)]
    spans = [s for r in regions for s in lineage_spans([row for row in rows if row.region == r])]
    runs: dict[int, str | None] = {}
    moments = []
    for b in sorted(db.batch_metrics(job, since=since - HISTORY_S), key=lambda b: (b.processed_at, b.batch_id)):
        if b.run_id not in runs:
            run = db.run(b.run_id)
            runs[b.run_id] = run.lineage if run is not None else None
        clock = (
            None
            if b.job_watermark_us is None or b.watermark_delay_us is None
            else b.job_watermark_us + b.watermark_delay_us
        )
        moments.append(Moment(b.processed_at, runs[b.run_id], b.last_output_us, clock))
    moved = {m.lineage for m in moments}
    emitted = {row.id: row.last_output_us for row in rows if row.id not in moved and row.last_output_us is not None}
    switches = []
    for op in db.operations(job, limit=1000):
        if op.action == "switch-active" and op.outcome == "done":
            detail = json.loads(op.detail) if op.detail else {}
            switches.append((op.at, op.region, detail.get("from")))
    current = db.active_region(job)
    active_at = active_timeline(sorted(switches), current.region if current is not None else None)
    return gap_of(view_delays(moments, spans, active_at, since, until, emitted), until, allowed_delay_s)
