"""The outputs of a job with steps: each output's rows, the rows of the step it names.

A job writes its own output (``sinks.output.step``, default the last step) and any named
outputs of ``sinks.outputs`` beside it, each the rows of one step — a pass-through archive of
the first step beside the alert a later step windows from it. Every output is cut at the
lineage's first output time ``T`` as the job's own output is: a row is written when its
System.Timestamp (a window row's ``window_end``, any other row's ``system_time``) is after
``T``. The steps themselves are not cut, except those no step reads: the rows at or before
``T`` are what the next step's first windows are rebuilt from (semantics §6).

Each output is filed by the same System.Timestamp (:func:`output_time`) in its own folder
(:meth:`tidegate.lineage.layout.JobPaths.output_of`), batch by batch, so a re-run batch
rewrites the same folders of every output: exactly once, as the job's own output.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from tidegate.jobspec import JobSpec
from tidegate.jobspec.model import PRIMARY_OUTPUT
from tidegate.spark.pipeline.step_stage import leaves


def output_time(spec: JobSpec, name: str = PRIMARY_OUTPUT) -> Column:
    """What output ``name``'s rows are timed and filed by: its step's System.Timestamp."""
    return F.col("window_end") if spec.output_view(name).window is not None else F.col("system_time")


def step_outputs(spec: JobSpec, by_step: dict[str, DataFrame], emit_after_us: int | None,
                 ) -> tuple[DataFrame, dict[str, DataFrame]]:  # fmt: skip
    """``by_step``: every step's rows of the batch, by step name (those of the steps no step
    reads already cut at ``emit_after_us``). (The job's own output's rows, each named output's
    rows by name.)"""
    cut = leaves(spec)

    def rows_of(name: str) -> DataFrame:
        step = spec.output_step_of(name)
        assert step is not None  # the job has steps: each output holds one
        rows = by_step[step]
        if emit_after_us is None or step in cut:
            return rows
        return rows.where(F.unix_micros(output_time(spec, name)) > F.lit(int(emit_after_us)))

    return rows_of(PRIMARY_OUTPUT), {name: rows_of(name) for name, _ in spec.sinks.outputs}
