"""The procedure way of estimating a catch-up (semantics §6): a rehearsal, and what it says of the real restart.

A rehearsal is the same job, started with mode ``now`` in a scratch checkpoint and sink
over the retained log, measured from request to first output and to caught up. It reads
exactly a look-back of input, which is what a replay reads. Its time splits at its first
batch's start into start-up and catch-up, each measured under the load it ran beside and
sped up by what the processes gone by the real restart — the region's own duplicate, a
check service warming up — took from it (:mod:`tidegate.runtime.estimates.contention`).
:func:`rehearsal_for_restart` turns the two into the real restart's estimate: the start-up
sped up, then the restart's catch-up played out batch by batch as the driver runs it
(:func:`tidegate.runtime.estimates.estimate.catch_up_seconds`), each batch costing what the
rehearsal's batches cost with the CPU the restart will have (:func:`restart_cost`).

The model is :mod:`tidegate.runtime.estimates.estimate`; every restart records both beside the
measured catch-up.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tidegate.errors import TidegateError
from tidegate.inputs.log import describe_location
from tidegate.lineage.layout import JobPaths
from tidegate.runtime.estimates.contention import CpuMeter, CpuSample, phase_load
from tidegate.runtime.estimates.estimate import (
    BatchCost,
    BatchSample,
    catch_up_seconds,
    fit_batch_cost,
    never_catches_up,
)
from tidegate.runtime.jobs import planning


@dataclass(frozen=True)
class RehearsalResult:
    seconds: float | None  # request → caught up
    first_output_s: float | None
    input_events: int
    run_id: int
    per_batch_s: float | None
    per_event_s: float | None
    startup_s: float | None = None  # request → its first batch began, under the load it ran beside
    catch_up_phase_s: float | None = None  # first batch began → caught up
    startup_speedup: float = 1.0  # how much faster each phase runs without what will be gone (contention)
    catch_up_speedup: float = 1.0
    load: dict | None = None  # each phase's measured CPU use (PhaseLoad.to_dict)
    catch_up_batches: tuple[tuple[int, float], ...] = ()  # (events, seconds) of each batch through caught up
    max_events_per_batch: int | None = None  # the rehearsed spec's per-batch limit

    def describe(self) -> str:
        if self.seconds is None:
            return f"rehearsal (run {self.run_id}): did not catch up"
        first = "no output" if self.first_output_s is None else f"first output after {self.first_output_s:.1f} s"
        return (
            f"rehearsal (run {self.run_id}): caught up after {self.seconds:.1f} s, {first}, "
            f"{self.input_events:,} events read"
        )


@dataclass(frozen=True)
class RehearsalEstimate:
    """The real restart's catch-up, from a rehearsal's measured start-up and batches."""

    seconds: float | None
    measured_s: float | None  # the rehearsal's own request → caught up
    startup_s: float | None
    cost: BatchCost | None  # what the restart's batches cost, from the rehearsal's
    basis: str

    def describe(self) -> str:
        if self.seconds is None:
            return f"rehearsal for the restart: no estimate — {self.basis}"
        return f"rehearsal for the restart: {self.seconds:.1f} s ({self.basis})"


def restart_cost(r: RehearsalResult) -> BatchCost | None:
    """What the restart's batches cost: the rehearsal's catch-up batches, each as long as it
    would have taken with the restart's CPU (``catch_up_speedup``), fitted as the model fits
    recorded starts (:func:`tidegate.runtime.estimates.estimate.fit_batch_cost`) — but with the second
    batch and the later ones of one kind. A rehearsal has one first batch, the look-back, and
    its fixed cost (JIT, Python workers, state) is most of what a resume's small first batch
    costs; the batches after it differ in size — the second reads what arrived while the
    first ran, the later ones what arrives in a batch — and show what an event costs. The
    first batch then costs what the rehearsal's did, less its events' cost, plus the
    restart's. None without batches."""
    return _batch_cost(r.catch_up_batches, r.catch_up_speedup)


def _batch_cost(batches: tuple[tuple[int, float], ...], speedup: float = 1.0) -> BatchCost | None:
    return fit_batch_cost([BatchSample(n, s / speedup, 0 if i == 0 else 2, True) for i, (n, s) in enumerate(batches)])


def rehearsal_for_restart(r: RehearsalResult, backlog_events: int, rate_eps: float) -> RehearsalEstimate:
    """The restart's catch-up: the rehearsal's start-up, then ``backlog_events`` and what
    arrives meanwhile played out batch by batch at what the rehearsal's batches cost — each
    phase sped up by what will be gone. Without the phases (no batch recorded), the
    rehearsal's own time, uncorrected."""
    if r.seconds is None:
        return RehearsalEstimate(None, None, None, None, "the rehearsal did not catch up")
    cost = restart_cost(r) if r.startup_s is not None else None
    if cost is None or r.startup_s is None:  # no start-up: no cost either
        return RehearsalEstimate(
            r.seconds,
            r.seconds,
            None,
            None,
            "the rehearsal's own time: its start-up and catch-up could not be told apart",
        )
    startup = r.startup_s / r.startup_speedup
    catch_up, batches = catch_up_seconds(backlog_events, rate_eps, cost, startup, r.max_events_per_batch)
    if catch_up is None:
        return RehearsalEstimate(
            None,
            r.seconds,
            startup,
            cost,
            never_catches_up(cost, rate_eps, r.max_events_per_batch, "the rehearsal's job"),
        )
    basis = (
        f"start-up {r.startup_s:.1f} s measured, {startup:.1f} s with {r.startup_speedup:.2f}× the CPU; "
        f"{backlog_events:,} events with {rate_eps:.1f} ev/s arriving in {batches} batches as the rehearsal's "
        f"ran with {r.catch_up_speedup:.2f}× the CPU: {cost.first_s:.2f} s fixed for the first, "
        f"{cost.fixed_s:.2f} s for a later one, {cost.per_event_s * 1e3:.3f} ms an event"
    )
    return RehearsalEstimate(catch_up, r.seconds, startup, cost, basis)


def gone_by_restart(controller, job: str, region: str) -> list[int]:
    """The process groups that compete with a rehearsal but not with the real restart: the
    job's running driver in ``region`` (the restart follows its stop) and a check service
    (warm and idle by the restart), where they run on this host."""
    from tidegate.runtime.checks import check_service

    gone = [int(run.pid) for run in _running_here(controller, job, [region])]
    service = check_service.serving_process(controller.config.home)
    if service is not None:
        gone.append(service.pid)
    return gone


def partners_of(controller, job: str, region: str) -> list:
    """The job's running duplicates in the other regions, where they run on this host: they
    compete with the rehearsal and with the restart alike (recorded beside the rehearsal's load)."""
    return _running_here(controller, job, [r for r in controller.config.regions if r != region])


def _running_here(controller, job: str, regions: list[str]) -> list:
    from tidegate.runtime.jobs.process import driver_alive

    found = []
    for name in regions:
        run = controller.db.latest_run(job, name)
        if run is not None and run.status == "running" and driver_alive(run):  # here, and the run's own process
            found.append(run)
    return found


def phases(run, metrics, samples: list[CpuSample], cores: int, partner_metrics=()) -> dict:
    """A rehearsal's start-up (request → its first batch began) and catch-up (→ caught up),
    each with how much faster it runs without what will be gone by the restart, and how
    much of it the partner duplicates' batches (``partner_metrics``) were running."""
    batches = sorted((m for m in metrics if m.batch_seconds is not None), key=lambda m: m.batch_id)
    if run.caught_up_at is None or not batches:
        return {}
    began = batches[0].processed_at - batches[0].batch_seconds
    partner = [(m.processed_at, m.batch_seconds) for m in partner_metrics if m.batch_seconds is not None]
    loads = {
        "startup": phase_load(samples, run.requested_at, began, cores, partner),
        "catch_up": phase_load(samples, began, run.caught_up_at, cores, partner),
    }
    return {
        "startup_s": max(0.0, began - run.requested_at),
        "catch_up_phase_s": max(0.0, run.caught_up_at - began),
        "startup_speedup": loads["startup"].speedup if loads["startup"] else 1.0,
        "catch_up_speedup": loads["catch_up"].speedup if loads["catch_up"] else 1.0,
        "load": {name: load.to_dict() if load else None for name, load in loads.items()},
    }


def rehearsal_in_flight(db, job: str, region: str, version: int, fingerprint: str):
    """The rehearsal holding the job's rehearsal lease in ``region`` when a rehearsal of
    ``version`` would adopt it (:func:`tidegate.runtime.jobs.adoption.adopt_rehearsal`), else None."""
    from tidegate.runtime.jobs.adoption import adopt_rehearsal
    from tidegate.runtime.jobs.process import rehearsal_lease

    lease = db.lease(rehearsal_lease(job, region))
    holder = lease.holder if lease is not None else ""
    run = db.run(int(holder[4:])) if holder.startswith("run-") and holder[4:].isdigit() else None
    return run if run is not None and adopt_rehearsal(version, fingerprint, run) else None


def rehearse(
    controller, job: str, region: str, *, version: int | None = None, timeout_s: float = 600.0, keep: bool = False
) -> RehearsalResult:
    """Run the job with start mode ``now`` in a scratch checkpoint and sink until it has
    caught up; measure request → first output and → caught up. Leaves the job alone."""
    from tidegate.runtime.jobs.process import HOST, rehearsal_lease

    db = controller.db
    reg = controller.config.region(region)
    version, spec = controller.spec(job, version)
    described = describe_location(controller.input_of(spec))
    plan = planning.plan(
        controller,
        job,
        region,
        "now",
        spec=spec,
        previous=None,
        accept_partial=True,
        lineage_id="rehearsal-" + planning.new_lineage_id(),
    )
    root = reg.lineage_root(job, "rehearsals", plan.lineage_id)
    assert plan.starting_offsets is not None, "a fresh plan (start mode now) starts at positions"
    run_id = db.create_run(
        job=job,
        region=region,
        version=version,
        fingerprint=spec.fingerprint,
        lineage=plan.lineage_id,
        kind="rehearsal",
        input=described,
        start_mode="now",
        output_start_us=plan.output_start_us,
        lookback_us=plan.lookback_us,
        input_from_us=plan.input_from_us,
        starting_offsets={str(p): o for p, o in plan.starting_offsets.items()},
        checkpoint="fresh",
        checkpoint_reason="rehearsal: scratch checkpoint and sink",
        partial=plan.partial,
        partial_reason=plan.partial_reason,
        status="starting",
        context={"actor": controller.actor, "rehearsal": True},
    )
    adopted = None
    if not db.acquire_lease(rehearsal_lease(job, region), f"run-{run_id}", 180.0, host=HOST):
        # a retried estimate whose first attempt's rehearsal still runs measures that one
        adopted = rehearsal_in_flight(db, job, region, version, spec.fingerprint)
        if adopted is None:
            db.update_run(run_id, status="failed", status_detail="another rehearsal of this job runs in this region")
            raise TidegateError(f"a rehearsal of job {job} already runs in {region}", "wait for it to finish")
        db.update_run(
            run_id,
            status="refused",
            ended_at=time.time(),
            status_detail=f"not started: rehearsal run {adopted.id} of this version was in flight, measured instead",
        )
        run_id, paths = adopted.id, JobPaths.at(db.lineage(adopted.lineage).root, region=region)
    else:
        paths = JobPaths.at(root, region=region)
        if not paths.on_object_store:  # a local folder (LocalStore.path_of gives a Path)
            Path(paths.root).mkdir(parents=True, exist_ok=True)
        paths.store.write_bytes(paths.lineage_file, json.dumps(plan.lineage_info()).encode())
        db.create_lineage(
            id=plan.lineage_id,
            job=job,
            region=region,
            fingerprint=spec.fingerprint,
            version=version,
            kind="rehearsal",
            root=root,
            output_from_us=plan.output_start_us,
            windowed=spec.needs_lookback,
            created_by_run=run_id,
        )
        log_path = reg.job_dir(job) / "drivers" / f"rehearsal-{run_id}.log"
        db.update_run(run_id, log_path=str(log_path))
    partners = partners_of(controller, job, region)
    meter = CpuMeter(gone_by_restart(controller, job, region), partners=[int(p.pid) for p in partners])
    pid = adopted.pid if adopted is not None else controller.launch(run_id, log_path).pid
    deadline = time.time() + timeout_s
    try:
        while time.time() < deadline:
            meter.sample(time.time(), pid)
            run = db.run(run_id)
            if run.status in ("stopped", "failed", "lost"):
                break
            time.sleep(0.5)
        else:
            db.update_run(run_id, stop_requested_at=time.time())
        run = db.run(run_id)
        if run.status == "failed":
            from tidegate.files import tail

            raise TidegateError(
                f"the rehearsal of job {job} failed: {run.status_detail}", f"see {run.log_path}:\n{tail(run.log_path)}"
            )
    finally:
        if not keep:  # the scratch lineage, wherever the region keeps it
            paths.store.delete(paths.root)
    metrics = sorted(db.batch_metrics(job, region, run_id=run_id), key=lambda m: m.batch_id)
    catch_up = tuple(
        (m.input_events, m.batch_seconds)
        for m in metrics
        if m.batch_seconds is not None and run.caught_up_at is not None and m.processed_at <= run.caught_up_at
    )
    fit = _batch_cost(catch_up)  # as measured
    partner_metrics = [m for p in partners for m in db.batch_metrics(job, run_id=p.id, since=run.requested_at)]
    first_output = None if run.first_output_at is None else run.first_output_at - run.requested_at
    result = RehearsalResult(
        run.catch_up_s,
        first_output,
        int(run.input_events or 0),
        run_id,
        None if fit is None else fit.fixed_s,
        None if fit is None else fit.per_event_s,
        **phases(run, metrics, meter.samples, os.cpu_count() or 1, partner_metrics),
        catch_up_batches=catch_up,
        max_events_per_batch=spec.source.max_events_per_batch,
    )
    details = asdict(result) | {"batches": len(metrics), "lookback_us": plan.lookback_us}
    db.add_estimate(
        job, region, "rehearsal", result.seconds, details, version=version, first_output_s=result.first_output_s
    )
    return result
