"""Where a starting job reads from, what it emits, and whether it reuses its checkpoint (semantics §6).

The operator chooses the first output time ``T`` — never an input position:

* ``now``: ``T`` is the event log's clock when the job starts;
* ``custom``: ``T`` is given;
* ``last-stopped``: just after the last output of the job in this region.

A job with a stateful temporal element — a window, or an analytic function — reads back
its look-back ``L`` (largest span: window span, LIMIT DURATION, ISFIRST period; +
late-arrival tolerance + early-arrival window) so that what it emits after ``T`` is
complete: the source starts, per partition, at the first event arriving at or after
``T − L``; windows ending at or before ``T``, and analytic rows at or before ``T``, are
rebuilt silently, not emitted. A job with neither emits each event once judged, from the
first event arriving at or after ``T`` (or after the last one a previous lineage emitted);
when its events carry their own time it reads back the policy's stretch (late-arrival
tolerance + early-arrival window) first, so that the first events it emits are kept,
adjusted or dropped as they were in any other run — the events read back are judged, not
emitted (``emit_from_offsets``).

The checkpoint is reused only by ``last-stopped`` and only when the job's logic
fingerprint equals the one the checkpoint was written with; any other start opens a
fresh checkpoint (a new *lineage*) and replays. The plan says which, and why.

:func:`plan_start` decides from what it is given; :func:`plan` gathers that for a job in a
region — the event log and its clock, the previous lineage (:func:`previous_lineage`) — and
is what every start, estimate and drill calls.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from types import EllipsisType

from tidegate.control.db import loads
from tidegate.errors import ConfigError, TidegateError
from tidegate.eventtime.durations import format_duration, format_time_us
from tidegate.inputs.event_log import RetentionError
from tidegate.inputs.log import PartitionedLog, open_log
from tidegate.jobspec import JobSpec
from tidegate.lineage.committed import has_committed_state
from tidegate.lineage.final import EmittedCut, emitted_cut
from tidegate.lineage.layout import JobPaths

START_MODES = ("now", "custom", "last-stopped")


class RetentionGuardError(TidegateError):
    """The event log no longer holds the input a start needs."""


@dataclass(frozen=True)
class PreviousLineage:
    """What the planner knows of the job's latest lineage in the region."""

    id: str
    root: PurePath  # a path of the lineage's store
    fingerprint: str
    output_from_us: int | None
    checkpoint_usable: bool  # its checkpoint exists and holds a committed batch
    cut: EmittedCut  # what it emitted (from its files, or from the control database)


@dataclass(frozen=True)
class StartPlan:
    mode: str
    output_start_us: int | None  # T
    lookback_us: int
    input_from_us: int | None  # the arrival the source starts at (T − L, or T)
    starting_offsets: dict[int, int] | None  # resolved positions (None: the checkpoint decides)
    checkpoint: str  # "reused" | "fresh"
    reason: str
    lineage_id: str
    new_lineage: bool
    emit_after_us: int | None
    partial: bool = False
    partial_reason: str | None = None
    # per event: the first position emitted per partition; those before it, read for the
    # policy's stretch, are judged but not emitted (None: every event read is emitted)
    emit_from_offsets: dict[int, int] | None = None

    def lineage_info(self) -> dict:
        """What the lineage's own file records of this plan: the driver reads it at every start
        of the lineage, so that a restart of its first batch emits what that batch would have."""
        return {
            "id": self.lineage_id,
            "output_from_us": self.output_start_us,
            "emit_after_us": self.emit_after_us,
            "starting_offsets": _named(self.starting_offsets),
            "emit_from_offsets": _named(self.emit_from_offsets),
        }

    def describe(self) -> str:
        lines = [f"start mode {self.mode}: {self.reason}"]
        if self.output_start_us is not None:
            lines.append(f"output from {format_time_us(self.output_start_us)} (nothing at or before it is emitted)")
        if self.new_lineage and self.input_from_us is not None:
            lines.append(
                f"input from arrival {format_time_us(self.input_from_us)} "
                f"(look-back {format_duration(self.lookback_us)})"
            )
        if self.partial:
            lines.append(f"PARTIAL: {self.partial_reason}")
        return "\n".join(lines)


def _named(offsets: dict[int, int] | None) -> dict[str, int] | None:
    return None if offsets is None else {str(p): o for p, o in offsets.items()}


def new_lineage_id(now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{secrets.token_hex(3)}"


def plan(
    controller,
    job: str,
    region: str,
    mode: str,
    *,
    spec: JobSpec | None = None,
    at_us: int | None = None,
    previous: PreviousLineage | None | EllipsisType = ...,
    accept_partial: bool = False,
    lineage_id: str | None = None,
    fresh_checkpoint: bool = False,
) -> StartPlan:
    """The plan of starting ``job`` in ``region`` now: over the job's event log and its clock,
    and the job's previous lineage in the region (looked up unless ``previous`` is given;
    ``None``: plan as if the job never ran there). ``spec`` defaults to the latest version;
    ``mode`` may be ``auto`` (:func:`resolve_mode`)."""
    if spec is None:
        _, spec = controller.spec(job)
    if previous is ...:
        previous = previous_lineage(controller, job, region)
    log = open_log(controller.input_of(spec))
    return plan_start(
        spec,
        resolve_mode(mode, previous),
        clock_us=log.clock_now_us(),
        at_us=at_us,
        previous=previous,
        log=log,
        accept_partial=accept_partial,
        lineage_id=lineage_id,
        fresh_checkpoint=fresh_checkpoint,
    )


def resolve_mode(mode: str, previous: PreviousLineage | None) -> str:
    """``auto``: ``last-stopped`` when the job ran in the region before, otherwise ``now``."""
    if mode != "auto":
        return mode
    return "last-stopped" if previous is not None else "now"


def previous_lineage(controller, job: str, region: str, *, storage_lost: bool = False) -> PreviousLineage | None:
    """What the planner knows of the job's latest lineage in ``region`` (None: it never ran
    there). With ``storage_lost`` — and whenever the region's storage is gone — as the region
    knows it without its storage: no checkpoint, and its output rebuilt by replay from
    :func:`history_start` (a drill estimates a region loss so, before it breaks anything)."""
    lineages = controller.db.lineages(job, region)
    if not lineages:
        return None
    row = lineages[-1]
    paths = JobPaths.at(row.root, region=region)  # a local folder, or an s3a:// root
    root = paths.root
    if storage_lost or not paths.store.exists(root):  # every lineage went with it: the history is rebuilt by replay
        cut = EmittedCut(history_start(controller, job, region), None, None)
        return PreviousLineage(row.id, root, row.fingerprint, row.output_from_us, False, cut)
    usable = has_committed_state(root, paths.store)
    _, old_spec = controller.spec(job, row.version)
    recorded = loads(row.last_offsets)
    recorded_offsets = None if recorded is None else {int(p): o for p, o in recorded.items()}
    cut = emitted_cut(root, old_spec, floor_us=row.output_from_us, store=paths.store)
    # the driver records the frontier after each batch's output: also safe to hand over from
    if row.emitted_through_us is not None and (cut.through_us is None or row.emitted_through_us > cut.through_us):
        cut = EmittedCut(row.emitted_through_us, cut.batch_id, cut.end_offsets or recorded_offsets)
    return PreviousLineage(row.id, root, row.fingerprint, row.output_from_us, usable, cut)


def history_start(controller, job: str, region: str) -> int | None:
    """Where a region that lost its storage rebuilds its output from: where its oldest
    lineage's output began, so that the replay recomputes every row its partner holds and
    consumers moved to it later see no row disappear. Where the log's retention has
    deleted input that replay would need, from the oldest arrival every trimmed partition
    still holds plus the look-back: what the log can still give."""
    lineages = controller.db.lineages(job, region)
    _, spec = controller.spec(job, lineages[-1].version)
    start = lineages[0].output_from_us
    if start is None:  # the output reached back to the log's start: continue where it ended
        return lineages[-1].emitted_through_us
    trimmed = [
        i.first_arrival_us
        for i in open_log(controller.input_of(spec)).describe()
        if i.start_offset > 0 and i.first_arrival_us is not None
    ]
    if trimmed:
        start = max(start, max(trimmed) + spec.replay_lookback_us)
    return start


def plan_start(
    spec: JobSpec,
    mode: str,
    *,
    clock_us: int,
    at_us: int | None,
    previous: PreviousLineage | None,
    log: PartitionedLog,
    accept_partial: bool = False,
    lineage_id: str | None = None,
    fresh_checkpoint: bool = False,
) -> StartPlan:
    """Decide T, the input position and the checkpoint for one start. Raises ConfigError for
    a mode that cannot apply and RetentionGuardError when the log lost the needed input.
    ``fresh_checkpoint``: ``last-stopped`` without reusing the checkpoint even where it could
    (an engine upgrade) — the output continues where it was final, rebuilt by replay."""
    if mode not in START_MODES:
        raise ConfigError(f"start mode {mode!r} is unknown", f"use one of {', '.join(START_MODES)}")
    if mode == "custom" and at_us is None:
        raise ConfigError("start mode custom needs a time", "give --at 2026-01-01T12:00:00Z")
    if mode != "custom" and at_us is not None:
        raise ConfigError(f"--at is only for start mode custom, not {mode}", "drop --at, or use --mode custom")
    lookback = spec.replay_lookback_us
    fresh_id = lineage_id or new_lineage_id()

    if mode == "last-stopped":
        if previous is None:
            raise ConfigError(
                f"job {spec.name} has never run in this region: there is no last stop to continue from",
                "start it with --mode now, or --mode custom --at TIME",
            )
        if previous.fingerprint == spec.fingerprint and previous.checkpoint_usable and not fresh_checkpoint:
            return StartPlan(
                mode=mode,
                output_start_us=previous.output_from_us,
                lookback_us=lookback,
                input_from_us=None,
                starting_offsets=None,
                checkpoint="reused",
                reason=(
                    f"checkpoint of lineage {previous.id} reused: the logic fingerprint is unchanged "
                    f"({spec.fingerprint[:12]}); only the input since its last commit is reprocessed"
                ),
                lineage_id=previous.id,
                new_lineage=False,
                emit_after_us=previous.output_from_us,
            )
        why = _why_not_reused(spec, previous, fresh_checkpoint)
        return _continue_in_fresh_lineage(spec, previous, why, log, lookback, accept_partial, fresh_id)

    if mode == "now":
        t = clock_us
    else:
        assert at_us is not None, "mode custom without a time is refused above"
        t = int(at_us)
    why = (
        f"a fresh checkpoint: start mode {mode} puts the first output at {format_time_us(t)}, "
        "so state is rebuilt by replay rather than resumed"
    )
    if previous is not None:
        why += f" (lineage {previous.id} is left as it is)"
    return _fresh(spec, mode, t, lookback, why, log, accept_partial, fresh_id)


def _why_not_reused(spec: JobSpec, previous: PreviousLineage, fresh_checkpoint: bool) -> str:
    if previous.fingerprint != spec.fingerprint:
        return (
            f"the job's logic changed (fingerprint {previous.fingerprint[:12]} → {spec.fingerprint[:12]}), "
            f"so the checkpoint of lineage {previous.id} is not reused; state is rebuilt by replay "
            "in a fresh checkpoint"
        )
    if fresh_checkpoint:
        return (
            f"a fresh checkpoint was asked for (an engine upgrade): the checkpoint of lineage {previous.id} "
            "is not reused; state is rebuilt by replay"
        )
    return (
        f"the checkpoint of lineage {previous.id} is missing or holds no committed batch ({previous.root}), "
        "so state is rebuilt by replay in a fresh checkpoint"
    )


def _continue_in_fresh_lineage(
    spec: JobSpec,
    previous: PreviousLineage,
    why: str,
    log: PartitionedLog,
    lookback: int,
    accept_partial: bool,
    lineage_id: str,
) -> StartPlan:
    cut = previous.cut
    if not spec.needs_lookback and cut.end_offsets:
        # per-event output: continue exactly after the last batch whose rows are visible
        emit_from = {int(p): int(o) for p, o in cut.end_offsets.items()}
        partial, reason = _check_offsets(log, emit_from, accept_partial)
        offsets, input_from, missing = _read_back(log, emit_from, lookback)
        policy_partial, policy_reason = _judge(missing, accept_partial, "the policy's stretch before the last output")
        why += "; events are emitted from where the last output ended" + (
            f", the {format_duration(lookback)} before it read back to judge them" if lookback else ""
        )
        return StartPlan(
            mode="last-stopped",
            output_start_us=None,
            lookback_us=lookback,
            input_from_us=input_from,
            starting_offsets=offsets,
            checkpoint="fresh",
            reason=why,
            lineage_id=lineage_id,
            new_lineage=True,
            emit_after_us=None,
            partial=partial or policy_partial,
            partial_reason=reason or policy_reason,
            emit_from_offsets=emit_from if lookback else None,
        )
    t = cut.through_us if cut.through_us is not None else previous.output_from_us
    if t is None:
        raise ConfigError(
            f"lineage {previous.id} emitted nothing and recorded no output start, so there is no last output to follow",
            "start with --mode now, or --mode custom --at TIME",
        )
    why += f"; {cut.describe()}"
    return _fresh(spec, "last-stopped", t, lookback, why, log, accept_partial, lineage_id)


def _fresh(
    spec: JobSpec,
    mode: str,
    t: int,
    lookback: int,
    why: str,
    log: PartitionedLog,
    accept_partial: bool,
    lineage_id: str,
) -> StartPlan:
    input_from = t - lookback
    offsets, partial, reason = resolve_start(log, input_from, accept_partial)
    emit_from = None
    if not spec.needs_lookback and lookback:  # per event: what arrived before T is judged, not emitted
        emit_from, _, _ = resolve_start(log, t, accept_partial=True)  # retention was judged at T − L
    return StartPlan(
        mode=mode,
        output_start_us=t,
        lookback_us=lookback,
        input_from_us=input_from,
        starting_offsets=offsets,
        checkpoint="fresh",
        reason=why,
        lineage_id=lineage_id,
        new_lineage=True,
        emit_after_us=t if spec.needs_lookback else None,
        partial=partial,
        partial_reason=reason,
        emit_from_offsets=emit_from,
    )


def _read_back(log: PartitionedLog, emit_from: dict[int, int], lookback: int,
               ) -> tuple[dict[int, int], int | None, list[RetentionError]]:  # fmt: skip
    """Per partition, where a per-event job continuing at ``emit_from`` starts reading: the
    first event arriving within ``lookback`` of the last one the previous lineage judged
    there (the first one emitted arrived at or after it, so this reads at least the
    policy's stretch before it). Also the earliest such arrival, and what retention deleted."""
    offsets, arrivals, missing = dict(emit_from), [], []
    for p, start in emit_from.items():
        if not lookback or start <= log.start_offset(p):
            continue  # nothing before it to judge by (or nothing retained: _check_offsets said so)
        try:
            arrival = log.arrival_at(p, start - 1) - lookback
            arrivals.append(arrival)
            offsets[p] = min(start, log.offset_for_arrival(p, arrival))
        except RetentionError as exc:
            missing.append(exc)
            offsets[p] = min(start, exc.first_available_offset)
    return offsets, min(arrivals, default=None), missing


def resolve_start(
    log: PartitionedLog, arrival_us: int, accept_partial: bool
) -> tuple[dict[int, int], bool, str | None]:
    """Per partition, the first offset arriving at or after ``arrival_us``. When retention
    deleted some of that input: RetentionGuardError naming every missing span, or — with
    ``accept_partial`` — the first retained offsets and a note of what is missing."""
    offsets: dict[int, int] = {}
    missing: list[RetentionError] = []
    for p in range(log.partitions):
        try:
            offsets[p] = log.offset_for_arrival(p, arrival_us)
        except RetentionError as exc:
            missing.append(exc)
            offsets[p] = exc.first_available_offset
    return offsets, *_judge(missing, accept_partial, f"arrival {format_time_us(arrival_us)}")


def _check_offsets(log: PartitionedLog, offsets: dict[int, int], accept_partial: bool) -> tuple[bool, str | None]:
    missing = []
    for p, offset in sorted(offsets.items()):
        try:
            log.check_retained(p, offset)
        except RetentionError as exc:
            missing.append(exc)
            offsets[p] = exc.first_available_offset
    return _judge(missing, accept_partial, "the last output's input position")


def _judge(missing: Sequence[RetentionError], accept_partial: bool, wanted: str) -> tuple[bool, str | None]:
    if not missing:
        return False, None
    spans = "; ".join(_span(exc) for exc in missing)
    if not accept_partial:
        raise RetentionGuardError(
            f"the event log no longer holds the input from {wanted}: {spans}",
            "start later (--mode now or a later --at), or accept partial results with --accept-partial",
        )
    return True, f"input deleted by retention, results incomplete: {spans}"


def _span(exc: RetentionError) -> str:
    first, end = exc.missing_offsets
    a_from, a_to = exc.missing_arrivals
    arrivals = ""
    if a_from is not None or a_to is not None:
        arrivals = f", arrivals {format_time_us(a_from) or '?'} to {format_time_us(a_to) or '?'}"
    return f"partition {exc.partition} offsets {first}–{end - 1}{arrivals}"
