"""Completeness checks (semantics §8) with Great Expectations, on Spark.

Imports pyspark and great_expectations, never airflow: Airflow tasks call
:func:`check_completeness` and fail on :meth:`CompletenessResult.raise_for_failure`.
"""

from tidegate.validation.completeness import RELATIVE_TOLERANCE, check_completeness, window_length_bounds_us
from tidegate.validation.project import completeness_checkpoint, completeness_suite, default_project_dir, open_project
from tidegate.validation.result import CompletenessResult, Finding, Mismatch, RuleOutcome, Sample

__all__ = [
    "RELATIVE_TOLERANCE",
    "CompletenessResult",
    "Finding",
    "Mismatch",
    "RuleOutcome",
    "Sample",
    "check_completeness",
    "completeness_checkpoint",
    "completeness_suite",
    "default_project_dir",
    "open_project",
    "window_length_bounds_us",
]
