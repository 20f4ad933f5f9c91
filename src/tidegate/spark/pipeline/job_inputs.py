"""A job's inputs as the engine reads them: how each row is parsed, judged, and which input it is.

A job reads one source; a join job two inputs, each either the job's source through its
``filter`` (both then share the payload, event time, policy and partitions) or its own log
with its own payload, event time and policy (:mod:`tidegate.inputs.log_set`: its own partitions of
the job's partition space). :class:`JobInputs` answers, for either kind:

* how a row is parsed — one :class:`~tidegate.spark.pipeline.parse.EventShape` per input
  with its own log, applying to that input's partitions; else the job's one shape;
* which policy judges a partition — its input's, else the job's;
* which rows an input takes — its partitions (own log) and its ``filter``.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from tidegate.errors import ConfigError
from tidegate.eventtime.policy import TimePolicy
from tidegate.inputs.log_set import InputLayout
from tidegate.jobspec import JobSpec
from tidegate.jobspec.joins import InputSpec
from tidegate.jobspec.source import InputSource
from tidegate.spark.pipeline.parse import EventShape
from tidegate.spark.spec_columns import spec_column


class JobInputs:
    def __init__(self, spec: JobSpec, layout: InputLayout | None) -> None:
        if spec.own_logs and (layout is None or layout.names != tuple(i.name for i in spec.inputs)):
            raise ConfigError(
                f"job {spec.name}: its inputs read their own logs, but the engine was given "
                + ("one log" if layout is None else f"the logs of {', '.join(layout.names)}"),
                "read the job's input through tidegate.inputs.log.input_location(spec, …), "
                "which names each input's log",
            )
        self.spec = spec
        self.layout = layout if spec.own_logs else None
        self.by_partition: dict[int, TimePolicy] = {}
        if self.layout is not None:
            for i in spec.inputs:
                self.by_partition |= {p: _own(i).policy for p in self.layout.span(i.name)}

    def _rows(self, name: str) -> Column:
        assert self.layout is not None  # called only for inputs that read their own logs
        span = self.layout.span(name)
        return F.col("partition").between(span.start, span.stop - 1)

    @property
    def shapes(self) -> list[EventShape]:
        spec = self.spec
        if self.layout is None:
            return [EventShape(spec.payload, spec.timestamp_by, spec.time_format)]
        return [EventShape(_own(i).payload, _own(i).timestamp_by, _own(i).time_format, self._rows(i.name))
                for i in spec.inputs]  # fmt: skip

    @property
    def time_sources(self) -> list[tuple[dict[str, str], str | None, str]]:
        """Each event time the job reads: (payload, ``timestamp_by``, the field that names it)."""
        if self.layout is None:
            return [(self.spec.payload, self.spec.timestamp_by, "timestamp_by")]
        return [(_own(i).payload, _own(i).timestamp_by, f"inputs.{i.name}.timestamp_by") for i in self.spec.inputs]

    def policy_of(self, partition: int) -> TimePolicy:
        return self.by_partition.get(partition, self.spec.policy)

    def members(self) -> dict[str, Column]:
        """Per input, the condition a kept event meets when the input takes it."""
        out = {}
        for i in self.spec.inputs:
            take = F.lit(True) if i.filter is None else spec_column(i.filter).cast("boolean")
            out[i.name] = take if self.layout is None else self._rows(i.name) & take
        return out


def _own(i: InputSpec) -> InputSource:
    """The input's own log's fields: when one input has them, every input does
    (:func:`tidegate.jobspec.joins.parse_inputs`)."""
    assert i.own is not None  # asked only of a job whose inputs read their own logs
    return i.own
