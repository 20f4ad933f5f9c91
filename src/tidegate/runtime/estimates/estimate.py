"""How long a (re)started job takes to catch up (semantics §6), two ways.

**The model.** A start's request waits ``startup`` seconds for its first micro-batch to
begin; a batch of ``n`` events then costs ``c_k + b·n`` seconds, where ``c_k`` is the fixed
cost of the run's ``k``-th batch — the first (JIT, Python workers, state loading), the second,
the rest of the first :data:`EARLY_BATCHES` (still warming: each costs several times what a
warm batch does) and every later one each have their own — and
``b`` is what an event costs. All are fitted to the job's own recorded starts
(:func:`recorded_samples`, :func:`fit_batch_cost`): once a restart that ran alone is recorded,
its warming batches are what a restart's are; before that, every start's, a rehearsal's each
as it would have run with a restart's resources. ``startup`` is the median of the latest starts
that ran alone, under the load of their moment (a rehearsal's with its start-up correction).
The catch-up is then played out batch by batch as a driver runs it (:func:`catch_up_seconds`):
the first batch reads the ``backlog`` — the input rate × the gap since the last checkpoint, or
the look-back of a replay, counted exactly from the log's offsets — and what arrived during the
start-up, unless the driver was killed with a batch in flight: Spark then runs that batch again
first, as planned, and the backlog waits for the second. Each later batch reads what arrived
during the one before (at ``rate``), at most the source's per-batch limit. A batch reads up to
the log's end when its trigger took its offsets, some time before the batch began (its
**lead**: Spark's offset log, the source's offsets, planning — seconds for a restart's first
batch on a busy machine, a small fraction of that for a warm one): what arrives in that time
waits for the next batch, and the lead of each kind of batch is fitted beside its fixed cost.
The job has caught up where the driver's rule says (:mod:`tidegate.runtime.estimates.caught_up`:
a batch leaves less than 5 s of input unread, or nine tenths of what the batch before left at
least — the backlog is gone), and never if ``b · rate ≥ 1``.

**The procedure.** A rehearsal of the restart: :mod:`tidegate.runtime.estimates.rehearsal`.

Every restart records both beside the measured catch-up, so the error is visible.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, TypedDict

import numpy as np

from tidegate.inputs.log import PartitionedLog, open_log
from tidegate.inputs.planning import arrival_at
from tidegate.jobspec import JobSpec
from tidegate.runtime.estimates.caught_up import CAUGHT_UP_SLACK_S, caught_up
from tidegate.runtime.jobs import planning
from tidegate.runtime.jobs.planning import StartPlan

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

DEFAULT_STARTUP_S = 20.0  # JVM and first plan, until the job has a recorded start
RECENT_RUNS = 20  # the starts the model is fitted to, rehearsals included
RECENT_STARTS = 3  # the latest starts that ran alone, whose start-ups it takes the median of
RECENT_BATCHES = 200  # and the latest batches, for what a warm batch costs
CATCH_UP_BATCHES = 50  # of each start, the batches that may still be catching up
MAX_SIMULATED_BATCHES = 10_000
EARLY_BATCHES = 10  # a run's batches before this one are still warming up: a fixed cost of their own


@dataclass(frozen=True)
class ModelEstimate:
    seconds: float | None  # None: cannot be estimated, or never catches up (see note)
    backlog_events: int
    input_rate_eps: float
    gap_s: float
    partitions: int
    processing_partitions: int
    per_batch_s: float | None  # a warm batch's fixed cost
    per_event_s: float | None  # b
    per_partition_eps: float | None
    startup_s: float
    batches: int
    basis: str
    note: str = ""
    first_batch_s: float | None = None  # the first batch's fixed cost
    second_batch_s: float | None = None  # the second's
    early_batch_s: float | None = None  # the rest of the first EARLY_BATCHES'
    in_flight_events: int = 0  # a killed driver's batch in flight, run again first
    leads_s: tuple[float, ...] | None = None  # each kind's lead, offsets → began (first, second, early, warm)

    def describe(self) -> str:
        if self.seconds is None:
            return f"model: no estimate — {self.note}"
        throughput = (
            f"{self.processing_partitions} partitions × {self.per_partition_eps:,.0f} ev/s"
            if self.per_partition_eps
            else f"{self.processing_partitions} partitions, no per-event cost"
        )
        return (
            f"model: {self.seconds:.1f} s to catch up — {self.backlog_events:,} events to read "
            f"(gap {self.gap_s:.0f} s at {self.input_rate_eps:.1f} ev/s arriving), "
            f"{throughput}, startup {self.startup_s:.1f} s, "
            f"{self.batches} batches: the first {self.first_batch_s or 0:.2f} s fixed"
            + (f" (re-running the {self.in_flight_events:,} events in flight)" if self.in_flight_events else "")
            + f", the second {self.second_batch_s or 0:.2f} s, up to the {EARLY_BATCHES}th "
            f"{self.early_batch_s or 0:.2f} s, then {self.per_batch_s:.2f} s ({self.basis})"
            + (f"; {self.note}" if self.note else "")
        )


class BatchSample(NamedTuple):
    events: int
    seconds: float | None
    batch_index: int  # the batch's place in its run: 0 the first (not ``index``: tuple.index is a method)
    catching_up: bool  # read a backlog (before its run caught up), not what arrived during the batch before
    restart: bool = False  # of a start that ran alone, not a rehearsal: what a restart's batches cost
    lead_s: float | None = None  # its trigger took its offsets this long before it began (None: not known)


@dataclass(frozen=True)
class BatchCost:
    """What the ``index``-th batch of a run costs for ``n`` events (:func:`fit_batch_cost`)."""

    fixed_s: float  # a warm batch (from the EARLY_BATCHES-th on)
    per_event_s: float
    first_s: float  # the first batch's fixed cost
    second_s: float  # the second's
    slope_measured: bool = True
    early_s: float | None = None  # the rest of the first EARLY_BATCHES (None: as a warm one)
    leads_s: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)  # each kind's lead (first, second, early, warm)

    def seconds(self, n: float, index: int) -> float:
        kind = batch_kind(index)
        fixed = (self.first_s, self.second_s, self.fixed_s if self.early_s is None else self.early_s, self.fixed_s)[
            kind
        ]
        return fixed + self.per_event_s * n

    def lead(self, index: int) -> float:
        """How long before the ``index``-th batch began its trigger took its offsets."""
        return self.leads_s[batch_kind(index)]

    def reads_eps(self, max_events_per_batch: int | None, trigger_s: float) -> float | None:
        """The most a warm run reads per second: a batch of the per-batch limit every trigger,
        or after another when it takes longer (its lead, fixed cost and events), as
        :func:`catch_up_seconds` plays them; without a limit what an event costs alone. None
        where nothing bounds it (no limit and events measured free)."""
        if max_events_per_batch:
            n = max_events_per_batch
            return n / max(trigger_s, self.lead(EARLY_BATCHES) + self.fixed_s + self.per_event_s * n)
        return 1.0 / self.per_event_s if self.per_event_s > 0 else None


def never_catches_up(
    cost: BatchCost, rate_eps: float, max_events_per_batch: int | None, reader: str, trigger_s: float | None = None
) -> str:
    """Why :func:`catch_up_seconds` found no end: what ``reader`` reads at most against what
    arrives (``trigger_s``: the drivers' trigger by default, as there)."""
    from tidegate.runtime.jobs.driver import trigger_interval_us

    trigger_s = trigger_interval_us() / 1e6 if trigger_s is None else trigger_s
    most = cost.reads_eps(max_events_per_batch, trigger_s)
    limit = f" (at most {max_events_per_batch:,} events a batch)" if max_events_per_batch else ""
    if most is None or most > rate_eps:
        return f"{reader} does not catch up with {rate_eps:,.0f} ev/s arriving within {MAX_SIMULATED_BATCHES:,} batches"
    return f"{reader} reads at most {most:,.0f} ev/s{limit} but {rate_eps:,.0f} ev/s arrive: it never catches up"


def batch_kind(index: int) -> int:
    """0 a run's first batch, 1 its second, 2 the rest of its first :data:`EARLY_BATCHES`, 3 a warm one."""
    return index if index < 2 else 2 if index < EARLY_BATCHES else 3


def fit_batch_cost(samples: list[BatchSample]) -> BatchCost | None:
    """Each kind of batch's fixed cost and what an event costs; None without a batch that read events.

    What an event costs shows only where batches that read a backlog differ in size: a
    run's first batches read the backlog of its start, the batches of a catch-up read what
    is left of it. Batches of a caught-up job read what arrived during the batch before, so
    a slow batch makes the next one large whatever an event costs — their slope measures
    the load, not the events, and they only give the fixed cost. The slope is a least-squares
    fit over the catching-up batches with a fixed cost per kind (:func:`batch_kind`: first,
    second, early, warm), measured when some kind holds two batches at least twice apart in
    size; it is at most the smallest seconds per event any of them took, and 0 when the fit
    finds none (``≤ 0``) or nothing could show it (``slope_measured`` False). Each kind's fixed
    cost is its mean remainder over the restarts' batches of that kind, or every batch of it
    before a restart is recorded; a kind with no batch takes the next one's (a warm one with
    none takes the early ones'). Each kind's lead is its mean over the same batches where it
    is known, a kind without one taking the next one's, and 0 where none is known."""
    points = [p for p in samples if p.events > 0 and p.seconds is not None and p.seconds > 0]
    if not points:
        return None
    b, measured = _per_event_cost([p for p in points if p.catching_up])

    def of_kind(kind: int, known: Callable[[BatchSample], bool]) -> list[BatchSample]:
        found = [p for p in points if batch_kind(p.batch_index) == kind and known(p)]
        return [p for p in found if p.restart] or found  # a restart's, once one is recorded

    def fixed(kind: int) -> float | None:
        # points all have seconds: the test repeated tells the type checker
        remainders = [p.seconds - b * p.events for p in of_kind(kind, lambda p: True) if p.seconds is not None]
        return max(0.0, statistics.fmean(remainders)) if remainders else None

    def lead(kind: int) -> float | None:
        found = of_kind(kind, lambda p: p.lead_s is not None)
        return statistics.fmean(p.lead_s for p in found if p.lead_s is not None) if found else None

    first, second, early, warm = _filled([fixed(k) for k in range(4)])
    return BatchCost(warm, b, first, second, measured, early, _filled([lead(k) for k in range(4)]))


def _filled(values: list[float | None]) -> tuple[float, float, float, float]:
    """Each kind's figure (first, second, early, warm); a kind without one takes the next kind's,
    a warm one without takes the latest kind's that has one, and with none known every one is 0."""
    warm = next((v for v in reversed(values) if v is not None), 0.0)
    out, after = [], warm
    for v in reversed(values):
        after = v if v is not None else after
        out.append(after)
    first, second, early, last = reversed(out)  # one figure per kind: values has four
    return first, second, early, last


def _per_event_cost(points: list[BatchSample]) -> tuple[float, bool]:
    kinds = sorted({batch_kind(p.batch_index) for p in points})
    spread = any(
        max(sizes) >= 2 * min(sizes) and len(sizes) >= 2
        for sizes in ([p.events for p in points if batch_kind(p.batch_index) == k] for k in kinds)
    )
    if not spread:
        return 0.0, False
    columns = [[float(p.events)] + [1.0 if batch_kind(p.batch_index) == k else 0.0 for k in kinds] for p in points]
    coef, *_ = np.linalg.lstsq(np.array(columns), np.array([p.seconds for p in points]), rcond=None)
    bound = min(p.seconds / p.events for p in points if p.seconds is not None)  # fit_batch_cost's: all timed
    return min(max(0.0, float(coef[0])), bound), True


def recorded_samples(db, job: str) -> tuple[list[BatchSample], list[float]]:
    """The job's recorded batches as :class:`BatchSample` — the first batches of its last
    starts, rehearsals included, and its latest batches — and the start-ups (request → its
    first batch began) of its latest starts that ran alone.

    Every start's batches give what an event costs: each rehearsal batch that read a backlog
    sped up as the rehearsal's own correction says (:mod:`tidegate.runtime.estimates.contention`),
    the rest as measured. What a restart's warming batches cost beyond that is best told by
    the restarts before it: the samples of a start that ran alone (no other start of the job
    overlapping it, not a rehearsal) are marked ``restart``, and :func:`fit_batch_cost` takes
    each kind's fixed cost from them once there are any. A deploy's two starts at once run
    their first batches before anything else of the job runs, faster than the restarts after
    them, so they are not counted shorter for sharing the machine, and a rehearsal's, even
    corrected, ran beside both duplicates. Warm batches count as measured: they show the live
    cadence. The start-ups are the latest :data:`RECENT_STARTS` starts that ran alone —
    restarts as measured, under the load of their moment, and rehearsals sped up by their own
    start-up correction: a rehearsal starts beside both duplicates, a restart beside one, so a
    rehearsal's start-up as measured overstates a restart's (docs/concepts/estimates.md,
    Limits). Without such a start, the shared ones as measured."""
    runs = {r.id: r for r in db.runs(job, kind=None, limit=RECENT_RUNS)}
    first_id: dict[int, int] = {}
    rows: dict[tuple[int, int], Row] = {}
    startups: dict[int, float] = {}
    spans: dict[int, tuple[float, float]] = {}  # request → caught up (or its second batch)
    for run in runs.values():
        batches = db.batch_metrics(job, run_id=run.id, limit=CATCH_UP_BATCHES, first=True)
        if not batches or run.requested_at is None:
            continue
        first_id[run.id] = batches[0].batch_id
        spans[run.id] = (run.requested_at, run.caught_up_at or batches[min(1, len(batches) - 1)].processed_at)
        if batches[0].batch_seconds is not None:
            startups[run.id] = max(0.0, batches[0].processed_at - batches[0].batch_seconds - run.requested_at)
        rows.update({(m.run_id, m.batch_id): m for m in batches})
    sharing = {r: max(1, sum(1 for c, d in spans.values() if c < b and a < d)) for r, (a, b) in spans.items()}
    rehearsed = {r: s for r, s in _rehearsal_speedups(db, job).items() if r in spans and runs[r].kind == "rehearsal"}
    slowdown = {r: catch_up for r, (_, catch_up) in rehearsed.items()}
    startups |= {r: startups[r] / startup for r, (startup, _) in rehearsed.items() if r in startups}
    rows.update(
        {(m.run_id, m.batch_id): m for m in db.batch_metrics(job, limit=RECENT_BATCHES) if m.run_id in first_id}
    )
    restarts = {r for r in first_id if sharing.get(r) == 1 and runs[r].kind != "rehearsal"}
    samples = []
    for (run_id, batch_id), m in sorted(rows.items()):
        caught_up_at = runs[run_id].caught_up_at
        catching_up = caught_up_at is None or m.processed_at <= caught_up_at
        speedup = slowdown.get(run_id, 1.0) if catching_up else 1.0
        seconds = None if m.batch_seconds is None else m.batch_seconds / speedup
        samples.append(
            BatchSample(m.input_events, seconds, batch_id - first_id[run_id], catching_up, run_id in restarts, _lead(m))
        )
    alone = sorted((r for r in startups if sharing[r] == 1), key=lambda r: runs[r].requested_at)
    return samples, [startups[r] for r in (alone[-RECENT_STARTS:] or sorted(startups))]


MAX_LEAD_S = 60.0  # beyond it the log's clock is its own (recorded arrivals), not the wall clock


def _lead(m) -> float | None:
    """From a batch's offsets (the broker clock its trigger took them at) to its start; None
    where the log's clock is not the wall clock (a log of recorded arrivals) or not recorded."""
    clock_us = getattr(m, "processing_time_watermark_us", None)
    if clock_us is None or m.batch_seconds is None:
        return None
    lead = m.processed_at - m.batch_seconds - clock_us / 1e6
    return lead if 0.0 <= lead <= MAX_LEAD_S else None


def _rehearsal_speedups(db, job: str) -> dict[int, tuple[float, float]]:
    """Each recorded rehearsal's start-up and catch-up speedups for the restart (its estimate's details)."""
    found: dict[int, tuple[float, float]] = {}
    for row in db.estimates(job):
        if row.kind == "rehearsal" and row.details:
            d = json.loads(row.details)
            if d.get("run_id") is not None:
                found.setdefault(
                    int(d["run_id"]),
                    (
                        max(1.0, float(d.get("startup_speedup") or 1.0)),
                        max(1.0, float(d.get("catch_up_speedup") or 1.0)),
                    ),
                )
    return found


def catch_up_seconds(
    backlog: int,
    rate_eps: float,
    cost: BatchCost,
    startup_s: float,
    max_events_per_batch: int | None,
    trigger_s: float | None = None,
    slack_s: float = CAUGHT_UP_SLACK_S,
    in_flight_events: int = 0,
) -> tuple[float | None, int]:
    """The catch-up played out batch by batch (the module's model) until a batch ends it as
    the driver's rule says (:mod:`tidegate.runtime.estimates.caught_up`); (None, 0) when the job
    cannot keep up with ``rate_eps``. ``in_flight_events``: the first batch runs again the
    batch a killed driver left in flight, that many events, and the backlog waits for the second.
    Each batch reads what had arrived when its trigger took its offsets, its lead before it
    began (the first's lead is inside the start-up); what arrives from then on is left unread."""
    from tidegate.runtime.jobs.driver import trigger_interval_us

    trigger_s = trigger_interval_us() / 1e6 if trigger_s is None else trigger_s  # the drivers' trigger
    if cost.per_event_s * rate_eps >= 1.0:
        return None, 0
    t = startup_s
    first_lead = min(cost.lead(0), startup_s)
    pending = backlog + rate_eps * (startup_s - first_lead)  # what the first batch's offsets hold
    left = None  # what the batch before left unread
    for index in range(MAX_SIMULATED_BATCHES):
        lead = first_lead if index == 0 else cost.lead(index)
        n = min(pending, max_events_per_batch) if max_events_per_batch else pending
        if index == 0 and in_flight_events:
            n = in_flight_events
        took = cost.seconds(n, index)
        t += took if index == 0 else lead + took
        pending += rate_eps * (lead + took) - n
        capped = bool(max_events_per_batch and n >= max_events_per_batch)
        if caught_up(pending, left, rate_eps, capped=capped, slack_s=slack_s):
            return t, index + 1
        left = pending
        idle = max(0.0, trigger_s - lead - took)  # the next trigger starts a trigger interval after this one
        t += idle
        pending += rate_eps * idle
    return None, 0


def backlog_from(log: PartitionedLog, offsets: dict[int, int]) -> int:
    return sum(max(0, log.end_offset(p) - offsets.get(p, 0)) for p in range(log.partitions))


def live_rate(log: PartitionedLog, sample_s: float = 2.0) -> float:
    """Events per second arriving now, from the log's end offsets over a short sample."""
    before = sum(log.end_offset(p) for p in range(log.partitions))
    time.sleep(sample_s)
    after = sum(log.end_offset(p) for p in range(log.partitions))
    return (after - before) / sample_s


def processing_partitions(master: str, partitions: int) -> int:
    """Partitions processed at once: the log's partitions, capped by ``local[N]``'s N."""
    if master.startswith("local["):
        inner = master[len("local[") : -1].split(",")[0]
        if inner.isdigit():
            return max(1, min(partitions, int(inner)))
    return partitions


class _Common(TypedDict):
    """What every :class:`ModelEstimate` of :func:`model_estimate` says, measured or not."""

    backlog_events: int
    input_rate_eps: float
    gap_s: float
    partitions: int
    processing_partitions: int
    startup_s: float


def model_estimate(
    controller,
    job: str,
    region: str,
    *,
    plan: StartPlan | None = None,
    spec: JobSpec | None = None,
    rate_eps: float | None = None,
    sample_s: float = 2.0,
    killed: bool = False,
) -> ModelEstimate:
    """The model's estimate for (re)starting ``job`` in ``region`` as ``plan`` says (default:
    the plan of a ``last-stopped`` start — resume or replay, whichever applies). ``killed``:
    the driver is to be killed, not stopped — a resumed checkpoint then first runs again the
    batch in flight, as large as the region's latest."""
    db = controller.db
    reg = controller.config.region(region)
    if spec is None:
        _, spec = controller.spec(job)
    log = open_log(controller.input_of(spec))
    clock = log.clock_now_us()
    if plan is None:
        plan = planning.plan(controller, job, region, "auto", spec=spec, accept_partial=True)
    offsets = _read_from(controller, job, region, plan)
    backlog = backlog_from(log, offsets)
    first_arrival = _first_arrival(log, offsets)
    gap_s = 0.0 if first_arrival is None else max(0.0, (clock - first_arrival) / 1e6)
    if rate_eps is None:
        rate_eps = live_rate(log, sample_s)
    P = log.partitions
    procP = processing_partitions(reg.spark_master, P)
    samples, startups = recorded_samples(db, job)
    basis = (
        f"fitted to {len(samples)} recorded batches of {job}, the start-up the median of its latest "
        f"{len(startups)} starts"
    )
    cost = fit_batch_cost(samples)
    startup = statistics.median(startups) if startups else DEFAULT_STARTUP_S
    common = _Common(
        backlog_events=backlog,
        input_rate_eps=rate_eps,
        gap_s=gap_s,
        partitions=P,
        processing_partitions=procP,
        startup_s=startup,
    )
    if cost is None:
        return ModelEstimate(
            None,
            per_batch_s=None,
            per_event_s=None,
            per_partition_eps=None,
            batches=0,
            basis="nothing measured",
            **common,
            note="no batches of this job are recorded yet: run the rehearsal (--rehearsal) first",
        )
    in_flight = 0
    if killed and plan.checkpoint == "reused":
        latest = db.batch_metrics(job, region, limit=1)
        in_flight = int(latest[0].input_events or 0) if latest else 0
    seconds, batches = catch_up_seconds(
        backlog, rate_eps, cost, startup, spec.source.max_events_per_batch, in_flight_events=in_flight
    )
    b = cost.per_event_s
    note = "" if seconds is not None else never_catches_up(cost, rate_eps, spec.source.max_events_per_batch, "the job")
    if seconds is not None and not cost.slope_measured:
        note = (
            "what an event costs is not measured yet (the recorded starts all read about as many events): "
            "the figure counts only each batch's fixed cost; the rehearsal measures the backlog"
        )
    return ModelEstimate(
        seconds,
        per_batch_s=cost.fixed_s,
        per_event_s=b,
        per_partition_eps=1.0 / (b * procP) if b else None,
        batches=batches,
        first_batch_s=cost.first_s,
        second_batch_s=cost.second_s,
        early_batch_s=cost.early_s,
        in_flight_events=in_flight,
        leads_s=tuple(round(v, 3) for v in cost.leads_s),
        basis=basis,
        note=note,
        **common,
    )


def _read_from(controller, job: str, region: str, plan: StartPlan) -> dict[int, int]:
    if plan.starting_offsets is not None:
        return dict(plan.starting_offsets)
    lineage = controller.db.lineage(plan.lineage_id)  # a resumed checkpoint continues after its last batch
    from tidegate.control.db import loads

    offsets = loads(lineage.last_offsets) if lineage is not None else None
    return {int(p): int(o) for p, o in (offsets or {}).items()}


def _first_arrival(log: PartitionedLog, offsets: dict[int, int]) -> int | None:
    firsts = []
    for p in range(log.partitions):
        o = offsets.get(p, 0)
        if o < log.end_offset(p):
            firsts.append(arrival_at(log, p, max(o, log.start_offset(p))))
    return min(firsts) if firsts else None
