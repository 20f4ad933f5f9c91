"""Job spec files: what a job reads, how it times events, and what it computes.

A spec is YAML (reference: docs/reference/jobspec.md). :func:`load_spec` reads a file,
:func:`parse_spec` a mapping; both return a frozen :class:`JobSpec` or raise
:class:`ConfigError` naming the field (``window.size``, ``aggregates.events``) and the fix.

The modules, each owning one thing:

* :mod:`~tidegate.jobspec.model` — the frozen dataclasses, and what the runtime takes from
  them: the look-back (semantics §6), the fingerprint, the normalised dict, a one-line description;
  :mod:`~tidegate.jobspec.source` — the part that says where events come from (the job's
  source, payload limits, an input's own log).
* :mod:`~tidegate.jobspec.parse` — YAML or a mapping into the model: the top level and sinks;
  :mod:`~tidegate.jobspec.parse_events` — source, payload, timing and policy (the job's and
  an input's own); :mod:`~tidegate.jobspec.joins` — inputs and join;
  :mod:`~tidegate.jobspec.parse_query` — select, window, group_by and aggregates;
  :mod:`~tidegate.jobspec.fields` — the names a spec uses and the readers of one field they share.
* :mod:`~tidegate.jobspec.expressions` — Spark SQL expressions read without Spark (tokens,
  columns, calls, normal and canonical forms); :mod:`~tidegate.jobspec.functions` — which
  Spark functions they may call; :mod:`~tidegate.jobspec.hints` — "did you mean …?".

Import from here: the names below are the package's public face.
"""

from __future__ import annotations

from tidegate.jobspec.expressions import (
    canonical_expression,
    check_expression,
    normalise_expression,
)
from tidegate.jobspec.fields import AGGREGATE_BUILTINS, BUILTIN_COLUMNS, ENGINE_COLUMNS
from tidegate.jobspec.functions import is_aggregate_function
from tidegate.jobspec.model import FINGERPRINT_FORMAT, JobSpec, NamedExprs, SinksSpec
from tidegate.jobspec.parse import OUTPUT_FORMATS, default_spec, load_spec, parse_spec
from tidegate.jobspec.parse_events import ON_CORRUPT_FRAME, PAYLOAD_TYPES
from tidegate.jobspec.parse_query import WINDOW_KINDS
from tidegate.jobspec.source import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_MAX_PAYLOAD_DEPTH,
    KafkaSpec,
    PayloadLimits,
    SourceSpec,
    tidegate_home,
)

__all__ = [
    "AGGREGATE_BUILTINS",
    "BUILTIN_COLUMNS",
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "DEFAULT_MAX_PAYLOAD_DEPTH",
    "ENGINE_COLUMNS",
    "FINGERPRINT_FORMAT",
    "ON_CORRUPT_FRAME",
    "OUTPUT_FORMATS",
    "PAYLOAD_TYPES",
    "WINDOW_KINDS",
    "JobSpec",
    "KafkaSpec",
    "NamedExprs",
    "PayloadLimits",
    "SinksSpec",
    "SourceSpec",
    "canonical_expression",
    "check_expression",
    "default_spec",
    "is_aggregate_function",
    "load_spec",
    "normalise_expression",
    "parse_spec",
    "tidegate_home",
]
