"""How long a (re)started job takes to catch up (SPEC §6), two ways.

**The model.** A micro-batch of ``n`` events takes ``a + b·n`` seconds — a fixed cost per
batch (planning, state, the Parquet commit) and a cost per event. ``a`` and ``b`` are
fitted to the job's recorded batches (least squares, each run's first batch with a
warm-up term of its own: those first batches read the backlogs that show what an event
costs; the per-partition throughput is ``1 / (b · P)`` for ``P`` processing partitions).
A start that must read ``backlog`` events — the input rate × the gap since the last checkpoint, or the look-back of a
replay, counted exactly from the log's offsets — while new events keep arriving at
``rate`` catches up after::

    t = (startup + batches · (a + trigger) + b · backlog) / (1 − b · rate)

and never if ``b · rate ≥ 1`` (the job cannot keep up at all).

**The procedure.** A rehearsal of the restart: :mod:`tidegate.runtime.rehearsal`.

Every restart records both beside the measured catch-up, so the error is visible.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import dataclass

import numpy as np

from tidegate.errors import TidegateError
from tidegate.jobspec import JobSpec
from tidegate.logs import PartitionedLog, open_log
from tidegate.runtime import planning
from tidegate.runtime.planning import StartPlan
from tidegate.source_planning import arrival_at

DEFAULT_STARTUP_S = 20.0  # JVM and first plan, until measured on this platform
TRIGGER_S = 1.0  # the drivers' processing-time trigger
MIN_FIT_BATCHES = 3


@dataclass(frozen=True)
class ModelEstimate:
    seconds: float | None  # None: cannot be estimated, or never catches up (see note)
    backlog_events: int
    input_rate_eps: float
    gap_s: float
    partitions: int
    processing_partitions: int
    per_batch_s: float | None  # a
    per_event_s: float | None  # b
    per_partition_eps: float | None
    startup_s: float
    batches: int
    basis: str
    note: str = ""

    def describe(self) -> str:
        if self.seconds is None:
            return f"model: no estimate — {self.note}"
        return (
            f"model: {self.seconds:.1f} s to catch up — {self.backlog_events:,} events to read "
            f"(gap {self.gap_s:.0f} s at {self.input_rate_eps:.1f} ev/s arriving), "
            f"{self.processing_partitions} partitions × "
            f"{'no measurable' if self.per_partition_eps is None else f'{self.per_partition_eps:,.0f}'} ev/s, "
            f"{self.batches} batches × {self.per_batch_s:.2f} s fixed, startup {self.startup_s:.1f} s ({self.basis})"
        )


def fit_batch_cost(samples: list[tuple[int, float, bool]]) -> tuple[float, float] | None:
    """Least squares ``seconds = a + b·events (+ w on a run's first batch)`` over (events,
    seconds, first) samples, with ``a, w ≥ 0`` and ``0 < b`` at most the smallest seconds per
    event any batch took; (a, b). None without any batch that read events.

    A run's first batch pays the JVM's and Python workers' warm-up ``w`` (the model counts
    it as startup), but it is also the one batch that reads a backlog: under live traffic
    every later batch holds a few seconds of events, whose time is the fixed cost plus
    noise, and only the first batches of restarts and replays — hundreds to thousands of
    events — show what an event costs. With too few warm samples, or all of one size and no
    first batch to tell them apart, there is no slope: ``a = 0`` and ``b`` the mean cost of an
    event."""
    points = [(n, s, bool(first)) for n, s, first in samples if n > 0 and s is not None and s > 0]
    warm = [(n, s) for n, s, first in points if not first]
    if not warm:
        return None if not points else (0.0, sum(s for n, s, _ in points) / sum(n for n, s, _ in points))
    sizes = {n for n, _, _ in points}
    if len(warm) < MIN_FIT_BATCHES or len(sizes) < 2:
        return 0.0, sum(s for _, s in warm) / sum(n for n, _ in warm)  # the mean cost of an event
    # a batch of n events took s ≥ b·n seconds (a, w ≥ 0): no per-event cost is above the
    # smallest s/n recorded — the large first batch of a replay makes that bound tight
    bound = min(s / n for n, s, _ in points)
    firsts = any(first for _, _, first in points)
    columns = [[1.0, float(n)] + ([1.0 if first else 0.0] if firsts else []) for n, _, first in points]
    seconds = np.array([s for _, s, _ in points])
    coef, *_ = np.linalg.lstsq(np.array(columns), seconds, rcond=None)
    b = float(coef[1])
    if not 0.0 < b <= bound:  # the slope is lost in noise (≤ 0) or above what a batch allows
        b = bound
    # with b fixed, the fixed cost is the warm batches' mean remainder
    a = max(0.0, statistics.fmean(s - b * n for n, s in warm))
    return a, b


def batch_samples(metrics) -> list[tuple[int, float, bool]]:
    """(events, seconds, first) of recorded batches: ``first`` marks each run's first batch."""
    first: dict[int, int] = {}
    for m in metrics:
        first[m.run_id] = min(first.get(m.run_id, m.batch_id), m.batch_id)
    return [(m.input_events, m.batch_seconds, m.batch_id == first[m.run_id]) for m in metrics]


def catch_up_seconds(backlog: int, rate_eps: float, a: float, b: float, startup_s: float,
                     max_events_per_batch: int | None) -> tuple[float | None, int]:
    """The model's formula; (None, 0) when the job cannot keep up with ``rate_eps``."""
    if b * rate_eps >= 1.0:
        return None, 0
    # events read = backlog + what arrives meanwhile; batches follow the per-batch limit
    guess = (startup_s + TRIGGER_S + b * backlog) / (1.0 - b * rate_eps)
    total = backlog + rate_eps * guess
    batches = max(1, math.ceil(total / max_events_per_batch)) if max_events_per_batch else (1 if total else 0)
    seconds = (startup_s + batches * (a + TRIGGER_S) + b * backlog) / (1.0 - b * rate_eps)
    return seconds, batches


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
        inner = master[len("local["):-1].split(",")[0]
        if inner.isdigit():
            return max(1, min(partitions, int(inner)))
    return partitions


def model_estimate(controller, job: str, region: str, *, plan: StartPlan | None = None, spec: JobSpec | None = None,
                   rate_eps: float | None = None, sample_s: float = 2.0) -> ModelEstimate:
    """The model's estimate for (re)starting ``job`` in ``region`` as ``plan`` says (default:
    the plan of a ``last-stopped`` start — resume or replay, whichever applies)."""
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
    samples = batch_samples(db.batch_metrics(job, limit=200))
    basis = f"fitted to {len(samples)} recorded batches of {job}"
    fit = fit_batch_cost(samples)
    if fit is None:
        fit, basis = _from_rehearsals(db, job, region)
    startup = _startup_s(db, job, fit)
    common = dict(backlog_events=backlog, input_rate_eps=rate_eps, gap_s=gap_s, partitions=P,
                  processing_partitions=procP, startup_s=startup)
    if fit is None:
        return ModelEstimate(None, per_batch_s=None, per_event_s=None, per_partition_eps=None, batches=0,
                             basis="nothing measured", **common,
                             note="no batches of this job are recorded yet: run the rehearsal (--rehearsal) first")
    a, b = fit
    seconds, batches = catch_up_seconds(backlog, rate_eps, a, b, startup, spec.source.max_events_per_batch)
    note = "" if seconds is not None else (
        f"the job processes {1 / b:,.0f} ev/s but {rate_eps:,.0f} ev/s arrive: it never catches up")
    return ModelEstimate(seconds, per_batch_s=a, per_event_s=b, per_partition_eps=1.0 / (b * procP) if b else None,
                         batches=batches,
                         basis=basis, note=note, **common)


def _startup_s(db, job: str, fit: tuple[float, float] | None = None) -> float:
    """Median time from a start's request to the end of its first micro-batch, less what
    the fitted cost ``fit`` = (a, b) says that batch's events cost a warm job: the driver's
    start and the first batch's warm-up (JIT, Python workers, state loading) are startup.
    Without a fit, up to the first batch beginning."""
    startups = []
    for run in db.runs(job, kind=None, limit=20):
        first = db.batch_metrics(job, run_id=run.id, limit=None)[:1]
        if not first or first[0].batch_seconds is None or run.requested_at is None:
            continue
        if fit is None:
            startups.append(first[0].processed_at - first[0].batch_seconds - run.requested_at)
        else:
            a, b = fit
            warm_cost = a + b * (first[0].input_events or 0)
            startups.append(max(0.0, first[0].processed_at - run.requested_at - warm_cost))
    return statistics.median(startups) if startups else DEFAULT_STARTUP_S


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


def _from_rehearsals(db, job: str, region: str) -> tuple[tuple[float, float] | None, str]:
    for row in db.estimates(job, region):
        if row.kind == "rehearsal" and row.details:
            d = json.loads(row.details)
            if d.get("per_event_s"):
                return (d.get("per_batch_s") or 0.0, d["per_event_s"]), f"from rehearsal estimate {row.id}"
    return None, "nothing measured"
