"""semantics §8: after a recovery, restart, replay or failover, validate the affected span.

The output of the span must be exactly the batch recomputation of the same query over the
same input (the batch path, ``runner.run_batch``), or another region's output: one row
per (window, key) that had events — none missing, none extra, none doubled —, the same
aggregates, no nulls, and windows as long as the spec says. A join's or an analytic job's
output is held to the same rules row by row, each row named by its output time and the
input position(s) it comes from (comparison.py).

The rules run as a real Great Expectations checkpoint on Spark (GX's Spark data source,
a dataframe asset, the whole-dataframe batch definition), loaded from the committed
project (project.py) over the comparison frame (comparison.py). GX decides success and
counts the rows that break each rule; the findings name the first of them from GX's
``partial_unexpected_index_list``. Data Docs go to the project's
``uncommitted/data_docs/local_site/``.

Usage, after a recovery that rewrote windows ending in ``(from_us, to_us]``::

    result = check_completeness(spark, spec, spark.read.parquet(run / "output"),
                                spark.read.parquet(reference / "output"), (from_us, to_us),
                                label="device-fleet-counts recovery")
    log.info(result.describe())
    result.raise_for_failure()  # TidegateError naming missing / doubled / wrong rows
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from urllib.parse import unquote, urlparse

from great_expectations.core.expectation_validation_result import ExpectationSuiteValidationResult
from great_expectations.core.run_identifier import RunIdentifier
from great_expectations.data_context.types.resource_identifiers import ValidationResultIdentifier
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import format_duration
from tidegate.eventtime.windows import SessionWindow, Window, close_delay_us
from tidegate.jobspec import JobSpec
from tidegate.jobspec.model import PRIMARY_OUTPUT, has_position
from tidegate.validation.comparison import Layout, comparison_frame
from tidegate.validation.project import DOCS_SITE, RULES, completeness_checkpoint, open_project
from tidegate.validation.result import CompletenessResult, Finding, RuleOutcome, Sample

RELATIVE_TOLERANCE = 1e-9  # the same events summed in another order differ in the last bits only
ROWS_PER_PARTITION = 200_000  # of the comparison frame while GX reads it


def check_completeness(
    spark: SparkSession,
    spec: JobSpec,
    output: DataFrame,
    reference: DataFrame,
    span: tuple[int, int] | None = None,
    *,
    label: str,
    project_dir: str | Path | None = None,
    data_docs: bool = True,
    relative_tolerance: float = RELATIVE_TOLERANCE,
    run_time: datetime | None = None,
    output_name: str = PRIMARY_OUTPUT,
) -> CompletenessResult:
    """Validate ``output`` against ``reference`` for window ends in ``span = (from_us, to_us]``
    (None: everything), with the rules committed in the GX project at ``project_dir``
    (default: project.default_project_dir()).

    ``label`` names the run in Data Docs and messages (e.g. "recovery 2026-01-01T00:05Z").
    ``run_time`` stamps the run; None lets GX take the wall clock. With ``data_docs=False``
    the validation runs without the checkpoint's Data Docs action (results are still stored).
    Returns the result; call :meth:`CompletenessResult.raise_for_failure` to fail the operation.
    ``output_name``: which of the job's outputs ``output`` and ``reference`` are (a job with steps
    is checked by the rows of the step that output holds: its own, or a named one's).
    """
    lookback_us = spec.lookback_us  # the whole job's: its first step is what a replay starts
    step = spec.output_step_of(output_name)
    positioned = step is None or has_position(spec, step)  # a per-event step over window rows: no position
    spec = spec.output_view(output_name)
    layout = Layout.of(spec, positioned)
    if span is not None and not span[0] < span[1]:
        raise ConfigError(
            f"completeness span ({span[0]}, {span[1]}] is empty",
            "give (from_us, to_us) with from_us < to_us: the window ends a recovery rewrote",
        )
    if not 0 <= relative_tolerance < 1:
        raise ConfigError(f"relative_tolerance {relative_tolerance} is not in [0, 1)", "e.g. 1e-9")
    context = open_project(project_dir)
    checkpoint = completeness_checkpoint(context)
    if layout.per_event:
        low, high = 0, 0
    else:
        assert spec.window is not None  # Layout.of gives window rows only to a spec with a window
        low, high = window_length_bounds_us(spec.window)
    parameters = {"relative_tolerance": relative_tolerance, "min_window_us": low, "max_window_us": high}
    run_id = RunIdentifier(run_name=label, run_time=run_time)

    spark.sparkContext.setJobDescription(f"tidegate completeness {label}")  # names its jobs in the Spark UI
    frame = None
    # each validation's result, with its identifier in the store when the checkpoint ran it
    results: list[tuple[ValidationResultIdentifier | None, ExpectationSuiteValidationResult]]
    try:
        frame, compared = _materialised(comparison_frame(layout, output, reference, span, relative_tolerance))
        if data_docs:
            run = checkpoint.run(batch_parameters={"dataframe": frame}, expectation_parameters=parameters,
                                 run_id=run_id)  # fmt: skip
            results = list(run.run_results.items())
        else:
            results = [
                (None, vd.run(batch_parameters={"dataframe": frame}, expectation_parameters=parameters,
                              result_format=checkpoint.result_format, run_id=run_id))
                for vd in checkpoint.validation_definitions
            ]  # fmt: skip
        rules, findings, failures = _read(results, spec, frame)
    finally:
        # pyspark types value as str, but None is what clears it (Java's setLocalProperty removes a null)
        spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
        if frame is not None:
            frame.unpersist()

    index = page = None
    if data_docs:
        index = _docs_path(context.get_docs_sites_urls(site_names=[DOCS_SITE]))
        page = _docs_path(context.get_docs_sites_urls(resource_identifier=results[0][0], site_names=[DOCS_SITE]))
    return CompletenessResult(
        label=label,
        job=spec.name,
        span_us=span,
        success=all(r.success for r in rules),
        rules=tuple(rules),
        findings=tuple(findings),
        compared_rows=compared,
        replay_from_us=None if span is None else span[0] - lookback_us,
        data_docs_index=index,
        data_docs_page=page,
        failures=tuple(failures),
        per_event=layout.per_event,
    )


def _materialised(frame: DataFrame) -> tuple[DataFrame, int]:
    """The frame cached in as few partitions as its size needs, and its row count.

    GX reads the frame in some thirty small Spark jobs (a few per metric), one task per
    partition each; after the join the frame has spark.sql.shuffle.partitions of them,
    mostly near-empty, and scheduling them took longer than the work.
    """
    frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
    rows = frame.count()
    narrow = frame.coalesce(max(1, -(-rows // ROWS_PER_PARTITION))).persist(StorageLevel.MEMORY_AND_DISK)
    narrow.count()
    frame.unpersist()
    return narrow, rows


def window_length_bounds_us(window: Window) -> tuple[int, int]:
    """Allowed ``end − start``: exactly the size, or for sessions (0, longest] — the longest
    being max_duration, or 2 × max when they are cut only once they have lasted it — or [0,
    longest] when they include their end: a session of one event exactly on a check point
    that cuts it ends where it starts."""
    if isinstance(window, SessionWindow):
        return 1 - close_delay_us(window), window.longest_us
    return window.size_us, window.size_us


def window_brackets(window: Window) -> str:
    """How a window row holds its edges, as findings write it: ``(]`` (Stream Analytics'),
    ``[)`` (``edges: start_inclusive``); a session holds its first event: ``[]`` or ``[)``."""
    right = "]" if close_delay_us(window) else ")"
    left = "[" if isinstance(window, SessionWindow) or not close_delay_us(window) else "("
    return left + right


def _allowed_text(window: Window | None) -> str:
    if window is None:
        return "an instant (a per-event row's start and end are its output time)"
    if isinstance(window, SessionWindow):
        low = "at least 0" if close_delay_us(window) else "longer than 0"
        most = "session maximum" if window.longest_us == window.max_duration_us else "twice the session maximum"
        return f"{low} and at most {format_duration(window.longest_us)} ({most})"
    return f"{format_duration(window.size_us)} long ({window.kind} size)"


def _read(results, spec: JobSpec, frame: DataFrame) -> tuple[list[RuleOutcome], list[Finding], list[str]]:
    """Rule outcomes in RULES order, and a finding for each failed rule."""
    window = spec.window
    brackets, instant = ("[)" if window is None else window_brackets(window)), window is None
    noun = (
        "window row"
        if window is not None
        else "join row"
        if spec.join is not None
        else "analytic row"
        if spec.emitted.analytics
        else "event row"
    )
    by_rule = {}
    for _, suite_result in results:
        for r in suite_result.results:
            by_rule[(r.expectation_config.meta or {}).get("rule", r.expectation_config.type)] = r
    outcomes, findings, failures = [], [], []
    for rule in list(RULES) + sorted(set(by_rule) - set(RULES)):
        r = by_rule.get(rule)
        if r is None:
            error: str | None = "the committed suite has no expectation for this rule"
            outcomes.append(RuleOutcome(rule, False, "", error=error))
            failures.append(f"rule {rule}: {error} (restore expectations/ from the repository)")
            continue
        error = _error(r.exception_info)
        unexpected = int(r.result.get("unexpected_count") or 0)
        outcomes.append(RuleOutcome(rule, bool(r.success), r.expectation_config.description or "", unexpected, error))
        if error:
            failures.append(f"rule {rule} could not be evaluated: {error}")
        elif not r.success:
            samples = _samples(r.result.get("partial_unexpected_index_list") or [], brackets, instant)
            total = _doubled_total(frame) if rule == "no_doubled_rows" else unexpected
            expected = _allowed_text(window) if rule == "window_size_matches_spec" else ""
            findings.append(Finding(rule, total, samples, expected, noun))
    return outcomes, findings, failures


def _error(info: dict | None) -> str | None:
    """GX's exception_info is one {raised_exception, exception_message, …} or one per metric."""
    if not info:
        return None
    if "raised_exception" in info:
        return info.get("exception_message") or "error" if info["raised_exception"] else None
    return next((_error(v) for v in info.values() if isinstance(v, dict) and _error(v)), None)


def _samples(index_rows: list[dict], brackets: str, instant: bool) -> tuple[Sample, ...]:
    seen, samples = set(), []
    for row in index_rows:
        sample = Sample.from_index(row, brackets, instant)
        if sample.identity not in seen:  # a doubled row is reported once per copy
            seen.add(sample.identity)
            samples.append(sample)
    # GX returns the first rows it met, in no particular order; show them in time order
    return tuple(sorted(samples, key=lambda s: (s.window_start_us, s.window_end_us, repr(s.key))))


def _doubled_total(frame: DataFrame) -> int:
    """GX counts the copies; an operator wants the window rows that were doubled."""
    doubled = frame.where("output_rows > 1 OR reference_rows > 1")
    return doubled.select("window_start_us", "window_end_us", "key").distinct().count()


def _docs_path(urls: list[dict]) -> Path | None:
    url = urls[0].get("site_url") if urls else None
    if not url:
        return None
    parsed = urlparse(url)
    return Path(unquote(parsed.path)) if parsed.scheme == "file" else None
