"""The Great Expectations project that holds the completeness rules: ``expectations/``.

The repository's ``expectations/`` directory *is* the GX file project (its context root:
``great_expectations.yml``, ``expectations/`` suites, ``validation_definitions/``,
``checkpoints/``, ``plugins/``; ``uncommitted/`` git-ignored). It is opened with
``gx.get_context(mode="file", context_root_dir=...)``, not ``project_root_dir=``, which
would put a ``gx/`` folder under the directory instead of using it.

The committed files are what runs: :func:`completeness_checkpoint` loads the checkpoint
``tidegate_completeness`` and through it the validation definition, the suite and the
Spark data source. Only when one is missing (a new project made with ``create=True``)
does it add it, from :func:`completeness_suite` and the names below; a test holds the
committed suite equal to that definition so the two cannot drift apart.

The data is given at run time: the data source is Spark, its one asset a dataframe asset
whose batch definition is the whole dataframe, and each check passes its comparison
frame as the batch parameter ``dataframe``. The job-specific numbers are expectation
parameters (``$PARAMETER``): ``relative_tolerance``, ``min_window_us``, ``max_window_us``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import great_expectations as gx
from great_expectations.data_context import FileDataContext
from great_expectations.data_context.types.base import ProgressBarsConfig
from great_expectations.datasource.fluent import SparkDatasource
from great_expectations.exceptions import DataContextError

from tidegate.errors import TidegateError

DATASOURCE = "tidegate_spark"
ASSET = "completeness_comparison"
BATCH_DEFINITION = "whole_dataframe"
SUITE = "tidegate_completeness"
VALIDATION = "tidegate_completeness"
CHECKPOINT = "tidegate_completeness"
DOCS_SITE = "local_site"
# what every failed expectation reports about its first rows, so findings can name them
INDEX_COLUMNS = (
    "window_start_us", "window_end_us", "key", "output_rows", "reference_rows", "null_columns", "mismatches",
)  # fmt: skip
SAMPLE_ROWS = 10
ENV_VAR = "TIDEGATE_EXPECTATIONS"

RULES = (
    "no_missing_rows",
    "no_extra_rows",
    "no_doubled_rows",
    "no_null_values",
    "values_equal_reference",
    "window_size_matches_spec",
)


def default_project_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$TIDEGATE_EXPECTATIONS``, default ``expectations`` (relative to the working
    directory, like every relative path Tidegate reads: run from the repository root)."""
    return Path((os.environ if env is None else env).get(ENV_VAR) or "expectations")


def open_project(project_dir: str | Path | None = None, *, create: bool = False) -> FileDataContext:
    """The GX file context rooted at ``project_dir``.

    Without ``create`` the directory must already be a project: GX would otherwise
    scaffold an empty one wherever a wrong path points, and every check would then run
    rules nobody committed.
    """
    root = Path(project_dir) if project_dir is not None else default_project_dir()
    if not create and not (root / "great_expectations.yml").is_file():
        raise TidegateError(
            f"{root.resolve()} is not a Great Expectations project (no great_expectations.yml)",
            f"run from the repository root (it holds expectations/), set {ENV_VAR} to the project "
            "directory, or pass project_dir",
        )
    context = gx.get_context(mode="file", context_root_dir=str(root))
    if create:
        # quiet and offline: no usage statistics, no progress bars in task logs
        context.variables.analytics_enabled = False
        context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
        context.variables.save()
    return context


def completeness_suite() -> gx.ExpectationSuite:
    """semantics §8 as expectations over the comparison frame (see comparison.py). Each carries
    its rule name in ``meta.rule``; that is how results are mapped back to rules."""
    E = gx.expectations
    rules = [
        (
            "no_missing_rows",
            "No missing window rows: every (window, key) of the batch reference is in the output (in_output is true).",
            E.ExpectColumnValuesToBeInSet(column="in_output", value_set=[True]),
        ),
        (
            "no_extra_rows",
            "No extra window rows: every (window, key) of the output is in the batch reference (in_reference is true).",
            E.ExpectColumnValuesToBeInSet(column="in_reference", value_set=[True]),
        ),
        (
            "no_doubled_rows",
            "No doubled window rows: (window_start, window_end, key) is unique over the output.",
            E.ExpectCompoundColumnsToBeUnique(column_list=["window_start", "window_end", "key"]),
        ),
        (
            "no_null_values",
            "No nulls: no output row has a null window bound, key or aggregate, nor a per-event row a null time "
            "or left position (null_values is 0; null_columns names them).",
            E.ExpectColumnValuesToBeInSet(column="null_values", value_set=[0]),
        ),
        (
            "values_equal_reference",
            "Values equal the batch reference: value_difference is at most relative_tolerance "
            "(relative for floating point, exact for other types).",
            E.ExpectColumnValuesToBeBetween(
                column="value_difference", min_value=0.0, max_value={"$PARAMETER": "relative_tolerance"}
            ),
        ),
        (
            "window_size_matches_spec",
            "Windows as long as the spec says: min_window_us <= window_us <= max_window_us (the size; "
            "sessions: 1 us to the maximum duration; per-event rows of a join or analytic job: 0, an instant).",
            E.ExpectColumnValuesToBeBetween(
                column="window_us", min_value={"$PARAMETER": "min_window_us"}, max_value={"$PARAMETER": "max_window_us"}
            ),
        ),
    ]  # fmt: skip
    suite = gx.ExpectationSuite(name=SUITE, meta={"spec": "docs/concepts/semantics.md §8 completeness checks"})
    for rule, description, expectation in rules:
        expectation.description = description
        expectation.meta = {"rule": rule}
        suite.add_expectation(expectation)
    return suite


def completeness_checkpoint(context: FileDataContext) -> gx.Checkpoint:
    """The committed checkpoint; added (with what it needs) only if the project lacks it."""
    try:
        return context.checkpoints.get(CHECKPOINT)
    except DataContextError:
        pass
    validation = _validation_definition(context)
    checkpoint = gx.Checkpoint(
        name=CHECKPOINT,
        validation_definitions=[validation],
        actions=[gx.checkpoint.UpdateDataDocsAction(name="update_data_docs", site_names=[DOCS_SITE])],
        result_format={
            "result_format": "SUMMARY",
            "partial_unexpected_count": SAMPLE_ROWS,
            "unexpected_index_column_names": list(INDEX_COLUMNS),
        },
    )
    return context.checkpoints.add(checkpoint)


def _validation_definition(context: FileDataContext) -> gx.ValidationDefinition:
    try:
        return context.validation_definitions.get(VALIDATION)
    except DataContextError:
        pass
    try:
        suite = context.suites.get(SUITE)
    except DataContextError:
        suite = context.suites.add(completeness_suite())
    try:
        source = context.data_sources.get(DATASOURCE)
    except KeyError:
        # persist=False: the check caches and releases the frame itself; GX would keep it cached.
        # No spark_config: GX then reuses the running session as it is (getOrCreate, trying
        # Spark Connect first); with one it may stop and restart the shared session.
        source = context.data_sources.add_spark(DATASOURCE, persist=False)
    if not isinstance(source, SparkDatasource):
        raise TidegateError(
            f"the GX data source {DATASOURCE!r} is a {type(source).__name__}, not a Spark data source",
            "fix or remove it in the project's great_expectations.yml",
        )
    try:
        asset = source.get_asset(ASSET)
    except LookupError:
        asset = source.add_dataframe_asset(ASSET)
    try:
        batch = asset.get_batch_definition(BATCH_DEFINITION)
    except KeyError:
        batch = asset.add_batch_definition_whole_dataframe(BATCH_DEFINITION)
    return context.validation_definitions.add(gx.ValidationDefinition(name=VALIDATION, data=batch, suite=suite))
