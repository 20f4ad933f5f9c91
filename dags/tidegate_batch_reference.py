"""Recompute a job as a Spark batch over a span of the log, beside its streaming output."""

from __future__ import annotations

from airflow.sdk import Param, dag

from tidegate_airflow.dag_defaults import dag_defaults, job_param, region_param
from tidegate_airflow.operators.spark_submit import TidegateBatchReferenceOperator, TidegateCompletenessOperator

DOC = """
### Batch reference

The batch path: the same job (its registered spec, **version** or the latest), recomputed
as one Spark batch over the event log from **from** minus the job's look-back, closed with
the log's clock, emitting the windows a stream started at **from** emits. The result is
written beside the region's streaming output
(`<region storage>/jobs/<job>/batch_reference/<run id>/output`; a retry's in `<run id>.try<N>`,
beside what its first attempt left), and the streaming output
of **region** over the same span is then checked against it with Great Expectations.
"""


@dag(
    dag_id="tidegate_batch_reference",
    schedule=None,
    **dag_defaults(),
    tags=["tidegate", "checks"],
    doc_md=DOC,
    params={
        "job": job_param(),
        "region": region_param("Region whose output it sits beside"),
        "from": Param("2026-01-01T00:10:00Z", type="string", title="Span start (ISO-8601, exclusive)"),
        "to": Param(
            "",
            type="string",
            title="Span end to check (ISO-8601)",
            description="empty: up to where the region's output is final now",
        ),
        "version": Param("", type="string", title="Version", description="empty: the latest registered"),
    },
)
def tidegate_batch_reference():
    reference = TidegateBatchReferenceOperator(
        task_id="batch_reference",
        job="{{ params.job }}",
        region="{{ params.region }}",
        from_time="{{ params['from'] }}",
        version="{{ params.version or None }}",
    )
    TidegateCompletenessOperator(
        task_id="check_against_stream",
        job="{{ params.job }}",
        target="{{ params.region }}",
        region="{{ params.region }}",
        span_from="{{ params['from'] }}",
        span_to="{{ params.to }}",
        reference=reference.output["output"],  # after the reference, on what it wrote
        retries=0,
    )


tidegate_batch_reference()
