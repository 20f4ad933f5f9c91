"""Completeness after a recovery (semantics §8): which span to check, against what, and the record.

The span a (re)start affects begins where its output took over — the first output time of
a replay, or what its lineage had emitted before a resume — and is widened back by the
job's look-back, so the windows either side of the handover are compared too. It ends
where the output is complete now (the lineage's emitted-through cut). The reference is
the batch path over the same input: the log from the span's start minus the look-back,
closed with the log's clock, emitting windows after the span's start. Every per-event row —
a join's, an analytic job's, a plain per-event job's — is final once the watermark passes
its output time (``system_time``), as a window row is once it passes the window's close, so
the same spans hold for them, read as output times: a per-event job that hands over by
input position still has every row below the watermark final on both sides of the handover.

Targets: a region (its lineages, each over its span), ``consumer`` (the active region,
resolved once) or ``pair`` (one region against the other, over the span both cover).
Several targets checked together (:func:`check_all`) share one Spark session, one GX
project and one batch reference, computed from the earliest span's start.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from tidegate.control.db import loads
from tidegate.errors import ConfigError, TidegateError
from tidegate.eventtime.durations import format_time_us
from tidegate.jobspec import JobSpec
from tidegate.lineage.layout import LAYOUT_COLUMNS


@dataclass(frozen=True)
class CheckOutcome:
    job: str
    target: str
    span_us: tuple[int, int] | None
    success: bool
    summary: str
    data_docs: str | None
    check_id: int | None
    message: str  # what failed, with the fix; empty on success

    def to_dict(self) -> dict:
        return {
            "job": self.job,
            "target": self.target,
            "span_us": list(self.span_us) if self.span_us else None,
            "span": None
            if self.span_us is None
            else [format_time_us(self.span_us[0]), format_time_us(self.span_us[1])],
            "success": self.success,
            "summary": self.summary,
            "data_docs": self.data_docs,
            "check_id": self.check_id,
            "message": self.message,
        }


def handover_us(db, run) -> int | None:
    """Where the run's output took over from what was emitted before it."""
    context = loads(run.context) or {}
    if context.get("handover_us") is not None:
        return int(context["handover_us"])
    return run.output_start_us


def span_start(controller, run) -> int | None:
    """Where a check of what ``run`` affected begins: its handover widened back by the
    look-back, so windows either side of it are compared — unless the logic changed at the
    handover, where the output before it is the old query's and cannot equal the new one's."""
    start = handover_us(controller.db, run)
    if start is None:
        return None
    lineages = controller.db.lineages(run.job, run.region)
    ids = [row.id for row in lineages]
    before = lineages[ids.index(run.lineage) - 1] if run.lineage in ids and ids.index(run.lineage) > 0 else None
    if before is not None and before.fingerprint != run.fingerprint and run.checkpoint == "fresh":
        return start
    return start - controller.spec(run.job, run.version)[1].lookback_us


def output_begins_us(db, job: str, region: str) -> int | None:
    """Where the region's output begins: the output start of its oldest lineage whose output
    is still on disk (a lost region keeps nothing from before its restore). Windows ending
    at or before it were never the region's to emit — a job deployed with start mode ``now``
    emits nothing for the windows before its start — so no check reaches below it. None:
    the output reaches back to the start of the log."""
    from tidegate.runtime.outputs.reader import region_spans

    kept = [span for span in region_spans(db, job, region) if span.written]
    return kept[0].from_us if kept else None


def within_output(low: int, begins_us: int | None) -> int:
    """``low`` raised to where the output begins (None: it begins with the log)."""
    return low if begins_us is None else max(low, begins_us)


def affected_span(controller, job: str, region: str, run_id: int | None = None) -> tuple[int, int] | None:
    """(from, to] of window ends to check after the run ``run_id`` (default: the latest)
    caught up; None when no window has closed after the handover yet."""
    db = controller.db
    run = db.run(run_id) if run_id is not None else db.latest_run(job, region)
    if run is None:
        raise ConfigError(f"job {job} never ran in {region}", "start it first")
    low = span_start(controller, run)
    through = db.lineage(run.lineage).emitted_through_us
    if low is None or through is None:
        return None
    low = within_output(low, output_begins_us(db, job, region))
    return (low, through) if through > low else None


def consumer_span(controller, job: str, start_us: int) -> tuple[int, int] | None:
    active = controller.db.active_region(job)
    if active is None:
        return None
    through = controller.emitted_through(job, active.region)
    start_us = within_output(start_us, output_begins_us(controller.db, job, active.region))
    return (start_us, through) if through is not None and through > start_us else None


def batch_reference(spark, controller, job: str, version: int | None, span: tuple[int, int], root: Path,
                    region: str | None = None) -> Path:  # fmt: skip
    """Write the batch path's output for windows ending after ``span[0]`` under ``root``;
    the output directory. A job with reference data joins by the reference records of
    ``region``'s latest lineage (each snapshot from the effective start the stream recorded)."""
    from tidegate.spark.pipeline.runner import run_batch

    _, spec = controller.spec(job, version)
    result = run_batch(
        spark,
        spec,
        controller.input_of(spec),
        root,
        from_arrival_us=span[0] - spec.lookback_us,
        emit_after_us=span[0],
        records_of=_records_of(controller, job, region, spec),
    )
    return Path(result.paths.output)  # under root, a local folder


def _records_of(controller, job: str, region: str | None, spec: JobSpec):
    """The JobPaths of the lineage whose reference records the batch path joins by; None when
    the job has no reference or nothing ran."""
    from tidegate.lineage.layout import JobPaths

    if not spec.reference_tables:
        return None
    if region is None:
        active = controller.db.active_region(job)
        region = active.region if active is not None else None
    lineages = controller.db.lineages(job, region) if region is not None else []
    return JobPaths.at(lineages[-1].root, region=region) if lineages else None


class _SpanRead(TypedDict):
    """How :func:`check` reads either side of its span (read_region, read_consumer_view)."""

    from_us: int
    to_us: int
    missing_ok: bool


def check(
    spark,
    controller,
    job: str,
    target: str,
    span: tuple[int, int] | None,
    *,
    reference: Path | None = None,
    version: int | None = None,
    label: str | None = None,
    context: dict | None = None,
    project_dir: Path | None = None,
) -> CheckOutcome:
    """Run the GX completeness suite on ``target`` over ``span`` and record it."""
    from tidegate.runtime.outputs.reader import read_consumer_view, read_region
    from tidegate.spark.output import by_position, read_output
    from tidegate.validation import check_completeness

    db = controller.db
    _, spec = controller.spec(job, version)
    label = label or f"{job} {target}"
    if span is None:
        summary = "no window has closed in the affected span yet: nothing to check"
        check_id = db.record_check(job, target, True, summary=summary, context=context)
        return CheckOutcome(job, target, None, True, summary, None, check_id, "")
    scratch = None
    # a side with no file in the span has no rows there: compared as such (a window the other
    # side has is then missing or extra), not refused — a job whose first window has not
    # ended inside the span yet has nothing there to show
    read = _SpanRead(from_us=span[0], to_us=span[1], missing_ok=True)
    results = []  # (output, its result) for each output of the job compared
    try:
        if target not in ("pair", "consumer"):
            controller.config.region(target)
        if target != "pair" and reference is None:
            scratch = Path(tempfile.mkdtemp(prefix="tidegate-reference-"))
            reference = batch_reference(
                spark, controller, job, version, span, scratch / "batch", None if target == "consumer" else target
            )
        begins = None if target == "pair" else query_begins_by_position(db, job, target, spec)
        for name in spec.output_names:  # every output of the job: a procedure's check covers them all
            if target == "pair":
                regions = list(controller.config.regions)
                output = read_region(spark, db, job, regions[0], output=name, **read)
                ref = read_region(spark, db, job, regions[1], output=name, **read)
            else:
                if begins is not None:  # the query's rows only, against its batch path's of the same events
                    output = read_region(spark, db, job, begins[0], output=name, since_lineage=begins[1], **read)
                elif target == "consumer":
                    _, output = read_consumer_view(spark, db, job, output=name, **read)
                else:
                    output = read_region(spark, db, job, target, output=name, **read)
                assert reference is not None, "made above for every target but pair"
                ref = read_output(spark, reference_output(Path(reference), name), span[0], span[1])
                if begins is not None and ref is not None:
                    ref = by_position(ref, begins[2], before=False)
            if output is None and ref is None:
                continue
            output = output.drop(*LAYOUT_COLUMNS) if output is not None else ref.drop(*LAYOUT_COLUMNS).limit(0)
            ref = ref if ref is not None else output.limit(0)  # no rows, the other side's columns
            named = label if len(spec.output_names) == 1 else f"{label} ({name})"
            results.append(
                (
                    name,
                    check_completeness(
                        spark,
                        spec,
                        output,
                        ref,
                        span,
                        label=named,
                        output_name=name,
                        project_dir=project_dir or controller.config.gx_project,
                    ),
                )
            )
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    if not results:
        summary = "no window ended in the span on either side: nothing to compare"
        check_id = db.record_check(job, target, True, span=span, summary=summary, context=context)
        return CheckOutcome(job, target, span, True, summary, None, check_id, "")
    success = all(result.success for _, result in results)
    messages = []
    for _, result in results:
        if not result.success:
            try:
                result.raise_for_failure()
            except TidegateError as exc:
                messages.append(str(exc))
    pages = [str(r.data_docs_page or r.data_docs_index or "") for _, r in results]
    docs = next((page for page in pages if page), None)
    # each output's findings named by its output, when the job has more than one
    findings = [str(f) if len(spec.output_names) == 1 else f"{name}: {f}" for name, r in results for f in r.findings]
    summary = "\n".join(result.describe() for _, result in results)
    check_id = db.record_check(
        job, target, success, span=span, summary=summary, findings=findings, data_docs=docs, context=context
    )
    return CheckOutcome(job, target, span, success, summary, docs, check_id, "\n".join(messages))


def reference_output(reference: Path, name: str) -> Path:
    """Output ``name`` of the batch reference whose own output folder is ``reference`` (the
    folder :func:`batch_reference` gives): its named outputs sit beside it, in its lineage."""
    from tidegate.lineage.layout import JobPaths

    return Path(JobPaths(reference.parent).output_of(name))  # a local folder, as reference is


def serving_version(db, job: str, target: str, run_id: int | None = None) -> int | None:
    """The job version whose output ``target`` serves: the run's (``run_id``) or the region's
    latest lineage's; for ``consumer``, that of the region consumers read. None for ``pair``
    or where nothing ran (the latest registered version is meant).

    Halfway through a planned stop of the pair, the upgraded standby runs the new version
    while consumers still read the old one from the active region: each is checked against
    the batch path of its own version."""
    if target == "pair":
        return None
    if run_id is not None and target != "consumer":
        run = db.run(run_id)
        return run.version if run is not None else None
    region = region_of(db, job, target)
    lineages = db.lineages(job, region) if region is not None else []
    return lineages[-1].version if lineages else None


def region_of(db, job: str, target: str) -> str | None:
    """The region a target reads: the active one for ``consumer`` (None before any), else itself."""
    if target != "consumer":
        return target
    active = db.active_region(job)
    return active.region if active is not None else None


def query_begins_by_position(db, job: str, target: str, spec: JobSpec) -> tuple[str, str, dict[int, int]] | None:
    """(region, lineage, its first positions): where ``target``'s rows of ``spec`` — a per-event
    job — begin. A per-event job's output begins and hands over by input position: the rows of
    the events before the first lineage of the current query are another query's (after a
    change), or no one's (before the region's history began: an event read before the start,
    even one whose time lies after it, was never the region's to emit). The check compares the
    rows from those positions on. A region restored after losing its storage keeps only the
    replay that rebuilt it. None for window jobs, or when nothing is recorded."""
    from tidegate.runtime.outputs.reader import first_positions, region_spans

    region = None if spec.needs_lookback else region_of(db, job, target)
    # the lineages whose output is kept: a region restored after losing its storage has only
    # the replay that rebuilt it, whatever ran there before
    kept = {span.lineage for span in region_spans(db, job, region) if span.written} if region is not None else set()
    lineages = [row for row in db.lineages(job, region) if row.id in kept] if region is not None else []
    if region is None or not lineages or lineages[-1].fingerprint != spec.fingerprint:  # no region: no lineages
        return None
    first = len(lineages) - 1
    while first > 0 and lineages[first - 1].fingerprint == spec.fingerprint:
        first -= 1
    positions = first_positions(db, lineages[first])
    return (region, lineages[first].id, positions) if positions else None


def version_begins_us(db, job: str, region: str, version: int) -> int | None:
    """Where ``region``'s output of ``version`` begins: the output start of the first of its
    latest lineages that all run ``version``. Windows before it were emitted by another
    version (and checked against that one's batch path then). None: from the log's start."""
    begins = None
    for lineage in reversed(db.lineages(job, region)):
        if lineage.version != version:
            break
        begins = lineage.output_from_us
    return begins


def _within_version(
    db, job: str, target: str, span: tuple[int, int] | None, version: int | None
) -> tuple[int, int] | None:
    """``span`` from where ``target``'s output of ``version`` begins; None when it ends before."""
    region = region_of(db, job, target) if target != "pair" else None
    if span is None or version is None or region is None:
        return span
    low = within_output(span[0], version_begins_us(db, job, region, version))
    return (low, span[1]) if span[1] > low else None


def check_all(
    spark,
    controller,
    job: str,
    spans: dict[str, tuple[int, int] | None],
    *,
    reference: Path | None = None,
    version: int | None = None,
    run_id: int | None = None,
    label: str | None = None,
    context: dict | None = None,
    project_dir: Path | None = None,
) -> list[CheckOutcome]:
    """:func:`check` of each target over its span, in order, each against the version it
    serves (:func:`serving_version`, unless ``version`` is given) from where that version's
    output begins, and one batch reference per version (windows ending after the earliest
    start; each check compares only its own span). A target that cannot be checked (its
    output unreadable, its region unknown) is recorded as a failed check and the others are
    still checked, so one result file holds every target's outcome."""
    versions = {
        target: version if version is not None else serving_version(controller.db, job, target, run_id)
        for target in spans
    }
    spans = {
        target: _within_version(controller.db, job, target, span, versions[target]) for target, span in spans.items()
    }
    references: dict[int | None, Path] = {}
    scratch = None
    try:
        for shared in dict.fromkeys(versions.values()):
            starts = [
                span[0]
                for target, span in spans.items()
                if span is not None and target != "pair" and versions[target] == shared
            ]
            if reference is None and len(starts) > 1:
                scratch = scratch or Path(tempfile.mkdtemp(prefix="tidegate-reference-"))
                references[shared] = batch_reference(
                    spark, controller, job, shared, (min(starts), min(starts)), scratch / f"batch-{shared}"
                )
        outcomes = []
        for target, span in spans.items():
            try:
                outcomes.append(
                    check(
                        spark,
                        controller,
                        job,
                        target,
                        span,
                        reference=reference or references.get(versions[target]),
                        version=versions[target],
                        label=f"{label or job} {target}" if len(spans) > 1 else label,
                        context=context,
                        project_dir=project_dir,
                    )
                )
            except Exception as exc:  # this target fails alone: the others' results still stand
                outcomes.append(could_not_run(controller.db, job, target, span, exc, context))
        return outcomes
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def could_not_run(
    db, job: str, target: str, span: tuple[int, int] | None, error: BaseException | str, context: dict | None = None
) -> CheckOutcome:
    """A check that could not run, recorded as failed (it is no pass), with the error's words."""
    message = f"the completeness check of {job} on {target} could not run: {error}"
    check_id = db.record_check(
        job, target, False, span=span or (None, None), summary=message, context=(context or {}) | {"error": str(error)}
    )
    return CheckOutcome(job, target, span, False, message, None, check_id, message)


def write_outcomes(outcomes: list[CheckOutcome], path: Path) -> None:
    """The outcomes as a JSON list, one per target in the order checked."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([outcome.to_dict() for outcome in outcomes], indent=2))
