"""Reading a job spec: YAML text or a mapping in, a frozen :class:`JobSpec` out.

:func:`load_spec` reads a file (YAML that refuses a key written twice, errors with the
file's line), :func:`parse_spec` a mapping; both return a :class:`JobSpec` or raise
:class:`ConfigError` naming the field (``window.size``, ``aggregates.events``) and the fix.
This module parses the top level and where a job writes (name, version, over, filter, the
inputs, watermark, sinks); what a job reads and how it times its events (source, payload,
timestamp_by, time_format, policy — the job's and each input's own) are
:mod:`tidegate.jobspec.parse_events`'s, the query sections :mod:`tidegate.jobspec.parse_query`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from tidegate.errors import ConfigError, excerpt
from tidegate.examples import DEMO_SPEC
from tidegate.jobspec.analytics import parse_analytics
from tidegate.jobspec.cross_apply import STEPS_REFUSED, check_select_names, parse_cross_apply, row_fields
from tidegate.jobspec.expressions import check_expression, normalise_expression
from tidegate.jobspec.fields import AGGREGATE_BUILTINS, BUILTIN_COLUMNS
from tidegate.jobspec.fields import SINKS_FIELDS as _SINKS_FIELDS
from tidegate.jobspec.fields import check_fields as _check_fields
from tidegate.jobspec.fields import columns as _columns
from tidegate.jobspec.fields import field_ref as _field_ref
from tidegate.jobspec.fields import mapping as _mapping
from tidegate.jobspec.fields import optional_text as _optional_text
from tidegate.jobspec.folders import check_places
from tidegate.jobspec.joins import (
    check_join_shape,
    check_side_expression,
    parse_inputs,
    parse_join,
    parse_join_select,
    side_payloads,
    union_payload,
)
from tidegate.jobspec.limits import SpecLimits, limit_fix, spec_limits
from tidegate.jobspec.model import JobSpec, SinksSpec
from tidegate.jobspec.parse_events import (
    event_time,
    input_source,
    payload_fields,
    policy_spec,
    source_spec,
)
from tidegate.jobspec.parse_query import (
    ANALYTIC_RESERVED,
    check_output_names,
    check_query_shape,
    parse_group_by,
    parse_having,
    parse_named_exprs,
    parse_select,
    parse_window,
)
from tidegate.jobspec.parse_steps import later_steps, split_steps
from tidegate.jobspec.reference import check_reference_columns, check_reference_shape
from tidegate.jobspec.references import check_snapshot_names, parse_references
from tidegate.jobspec.spec_yaml import TOO_DEEP, read_spec_yaml
from tidegate.jobspec.window_cost import check_window_cost
from tidegate.storage.uri import StorageRoot

OUTPUT_FORMATS = ("parquet",)

_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")

_TOP_FIELDS = (
    "name", "version", "description", "source", "payload", "timestamp_by", "time_format", "over",
    "policy", "filter", "select", "window", "group_by", "aggregates", "having", "sinks", "analytics", "watermark",
    "inputs", "join", "steps", "reference", "cross_apply",
)  # fmt: skip

REPO_JOBS = Path(__file__).resolve().parents[3] / "jobs"  # src/tidegate/jobspec/parse.py → the checkout


def default_spec(name: str = DEMO_SPEC) -> Path:
    """A spec of the checkout's ``jobs/``: the demo's, and the class archive's workload's (from
    the working directory, else the checkout this package lies in)."""
    for candidate in (Path("jobs") / name, REPO_JOBS / name):
        if candidate.exists():
            return candidate
    raise ConfigError(
        f"no job spec given and jobs/{name} not found",
        "run from the Tidegate checkout, or pass --spec PATH",
    )


def load_spec(
    path: str | Path,
    *,
    log_dirs: Sequence[Path] | None = None,
    reference_dirs: Sequence[Path | StorageRoot] | None = None,
) -> JobSpec:
    """Read a YAML job spec file. Errors name the file, and for YAML syntax the line. The
    places it names must lie where the operator allows (:func:`~tidegate.jobspec.folders.check_places`):
    its event logs in ``log_dirs``, its reference folder in ``reference_dirs`` (default: those
    of this process's environment, ``TIDEGATE_LOG_DIRS`` and ``TIDEGATE_REFERENCE_DIRS``)."""
    path = Path(path)
    data = read_spec_yaml(path)
    spec = parse_spec(data, origin=str(path))
    try:
        _refuse_sinks_paths(data)
        check_places(spec, log_dirs, references=reference_dirs)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc.problem}", exc.fix) from None
    return spec


def parse_spec(mapping: Mapping[str, Any], origin: str = "<string>") -> JobSpec:
    """Validate a spec given as a mapping (as read from YAML). ``origin`` prefixes errors."""
    try:
        return _parse(mapping)
    except ConfigError as exc:
        raise ConfigError(f"{origin}: {exc.problem}", exc.fix) from None
    except RecursionError:  # a value nested thousands deep (e.g. from json.loads): even its repr fails
        raise ConfigError(f"{origin}: {TOO_DEEP[0]}", TOO_DEEP[1]) from None


def _parse(data: Any) -> JobSpec:
    limits = spec_limits()
    _prescan(data, limits)
    top = _mapping(data, "the job spec")
    _check_fields(top, _TOP_FIELDS, "")
    top, first_step, later, output_step, outputs = split_steps(top)  # the first step's query is read as the top level's
    spec = _parse_query(top, limits)
    if first_step is not None:
        if spec.cross_apply is not None:
            raise ConfigError(*STEPS_REFUSED)
        spec = replace(spec, first_step=first_step, sinks=replace(spec.sinks, output_step=output_step, outputs=outputs))
        spec = replace(spec, steps=later_steps(spec, later))
    check_window_cost(spec, limits)
    return spec


def _parse_query(top: dict, limits: SpecLimits) -> JobSpec:
    without_payload = _inputs_without(top.get("inputs"), "payload")
    for required in ("name", "version", "payload"):
        if top.get(required) is None and not (required == "payload" and without_payload == []):
            if required == "payload" and without_payload:  # some inputs have their own: name one that has none
                raise ConfigError(f"inputs.{without_payload[0]}.payload is missing, and the job has no payload",
                                  f"give inputs.{without_payload[0]} its payload, "
                                  "or the job one for its inputs")  # fmt: skip
            raise ConfigError(
                f"{required} is missing", f"add it; see docs/reference/jobspec.md ({_REQUIRED_HINT[required]})"
            )
    name, version = _name(top["name"]), _version(top["version"])
    if top.get("payload") is None:  # every input has its own: the job has no event of its own to time
        for key in ("timestamp_by", "time_format", "policy"):
            if top.get(key) is not None:
                raise ConfigError(f"{key} is set but the job has no payload: each input has its own",
                                  f"move {key} into each input (inputs.<name>.{key}), "
                                  "or add the job's payload")  # fmt: skip
    payload = payload_fields(top["payload"]) if top.get("payload") is not None else {}
    timestamp_by, time_format = event_time(top, payload, "")
    policy = policy_spec(top.get("policy"), timestamp_by)

    own_input = partial(
        input_source, payload=payload, timestamp_by=timestamp_by, time_format=time_format, policy=policy
    )  # an input's own fields over the job's
    inputs = parse_inputs(top.get("inputs"), payload, BUILTIN_COLUMNS, ANALYTIC_RESERVED, own_input)
    payloads = side_payloads(inputs, payload)
    payload = union_payload(inputs, payload)
    join = parse_join(top.get("join"), inputs, payloads)
    if join is not None:
        check_join_shape(top)
    cross_apply = parse_cross_apply(top.get("cross_apply"), top, payload, limits)
    fields = row_fields(payload, cross_apply)  # what the query's expressions read
    window = parse_window(top.get("window"))
    check_query_shape(window, top)
    group_by = parse_group_by(top.get("group_by"), fields)
    aggregates = parse_named_exprs(top.get("aggregates"), "aggregates", fields, AGGREGATE_BUILTINS, group_by)
    analytics = parse_analytics(top.get("analytics"), payload, BUILTIN_COLUMNS, ANALYTIC_RESERVED)
    references = parse_references(top.get("reference"), payload, BUILTIN_COLUMNS, ANALYTIC_RESERVED)
    if references:
        check_reference_shape(top)
    # select and filter read the analytic columns (they are computed first, as in Stream Analytics)
    # and the reference tables', as <name>.<column>
    analytic_columns = tuple((a.name, a.name) for a in analytics) or tuple((r.name, r.name) for r in references)
    if join is None:
        select = parse_select(top.get("select"), fields, analytic_columns)
        check_snapshot_names(select, references)
        check_select_names(select, cross_apply)
        for column, expr in select:
            check_reference_columns(expr, f"select.{column}", references)
    else:
        select = parse_join_select(top.get("select"), join, payloads)
    check_output_names(group_by + aggregates, "group_by and aggregates")
    having = parse_having(top.get("having"), window, group_by, aggregates)
    filter_ = _optional_text(top.get("filter"), "filter")
    if filter_ is not None:
        filter_ = normalise_expression(filter_)
        if join is None:
            check_expression(filter_, "filter", _columns(fields, BUILTIN_COLUMNS, [n for n, _ in analytic_columns]))
            check_reference_columns(filter_, "filter", references)
        else:  # a join's filter reads the joined row, before its select
            check_side_expression(filter_, "filter", [join.left, join.right], payloads)
    return JobSpec(
        name=name,
        version=version,
        description=_optional_text(top.get("description"), "description") or "",
        source=source_spec(top.get("source")),
        payload=payload,
        timestamp_by=timestamp_by,
        time_format=time_format,
        over=_field_ref(top.get("over"), "over", payload),
        policy=policy,
        filter=filter_,
        select=select,
        window=window,
        group_by=group_by,
        aggregates=aggregates,
        having=having,
        sinks=_sinks(top.get("sinks")),
        analytics=analytics,
        watermark_percentile=_watermark(top.get("watermark")),
        inputs=inputs,
        join=join,
        references=references,
        cross_apply=cross_apply,
    )


def _prescan(data: Any, limits: SpecLimits) -> None:
    """Before any field is read: refuse ``${`` in any key or value of the spec, not only in its
    expressions (a topic, a client id, a path or a description may reach a Spark setting or a
    SQL text, where Spark would replace ``${…}`` with an environment variable, a system property
    or a setting), nesting past :data:`_MAX_DEPTH`, and more than ``limits.spec_values`` keys
    and values (each aggregate or column is planned by Spark: tens of thousands of them take
    the driver minutes and gigabytes before the job reads one event)."""
    seen = 0
    pending: list[tuple[Any, str, int]] = [(data, "", 0)]
    while pending:
        value, where, depth = pending.pop()
        seen += 1
        if seen > limits.spec_values:
            raise ConfigError(f"the job spec holds more than {limits.spec_values:,} keys and values",
                              "a job is a few dozen fields: split it into several jobs, or "
                              + limit_fix("spec_values"))  # fmt: skip
        if depth > _MAX_DEPTH:
            raise ConfigError(TOO_DEEP[0], TOO_DEEP[1])
        if isinstance(value, str):
            if "${" in value:
                raise ConfigError(
                    f"{where or 'the spec'}: '${{' is not allowed anywhere in a job spec: Spark can"
                    " replace ${…} with environment variables, system properties and settings",
                    "to compare with the text '${' in an expression, build it from parts: concat('$', '{')",
                )
        elif isinstance(value, Mapping):
            for key, item in value.items():
                name = (f"{where}.{key}" if where else str(key))[:200]
                pending += [(key, name, depth + 1), (item, name, depth + 1)]
        elif isinstance(value, (list, tuple)):
            pending += [(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]


_MAX_DEPTH = 64  # levels of a spec's mappings and lists: a spec is a few deep

_REQUIRED_HINT = {
    "name": "e.g. name: device-fleet-counts",
    "version": "e.g. version: 1, bumped on every change",
    "payload": "the JSON fields the job reads, e.g. payload: {deviceId: string, temperature: double}",
}


def _name(value: Any) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value) or len(value) > 63:
        raise ConfigError(
            f"name {excerpt(value)} is not a valid job name",
            "use 1–63 lower-case letters, digits, '-' or '_', starting with a letter or digit,"
            " e.g. device-fleet-counts",
        )
    return value


def _version(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            f"version {excerpt(value)} is not a positive whole number",
            "write e.g. version: 3 (no quotes), and bump it on every change",
        )
    return value


def _watermark(value: Any) -> float | None:
    """``watermark: {percentile: p}``: the lossy early-output mode (semantics §4); absent, the
    job watermark is the minimum over its units."""
    if value is None:
        return None
    section = _mapping(value, "watermark")
    _check_fields(section, ("percentile",), "watermark")
    p = section.get("percentile")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p < 100:
        raise ConfigError(
            f"watermark.percentile is {excerpt(p)}",
            "use a number above 0 and below 100, e.g. 95 (output waits for 95 % of the units); "
            "remove watermark for the default, which waits for every unit",
        )
    return float(p)


def _sinks(value: Any) -> SinksSpec:
    sinks = _mapping(value or {}, "sinks")
    _check_fields(sinks, _SINKS_FIELDS, "sinks")
    if sinks.get("output") is False:
        raise ConfigError("sinks.output cannot be turned off: it is what the job produces", "remove sinks.output")
    output = _mapping(sinks.get("output") or {}, "sinks.output")
    _check_fields(output, ("path", "format", "step"), "sinks.output")
    fmt = output.get("format") or "parquet"
    if fmt not in OUTPUT_FORMATS:
        raise ConfigError(f"sinks.output.format {excerpt(fmt)} is not supported", "use parquet")
    audit = sinks.get("audit", True)
    if not isinstance(audit, bool):
        raise ConfigError(f"sinks.audit is {excerpt(audit)}", "write true (the default: per-event outcomes) or false")
    quarantine = sinks.get("quarantine")
    if quarantine is False:
        raise ConfigError(
            "sinks.quarantine cannot be turned off: bad input is never silently lost (semantics §9)",
            "remove sinks.quarantine: the platform writes bad input to quarantine/ " + _LINEAGE_FOLDER,
        )
    quarantine = {} if quarantine in (None, True) else _mapping(quarantine, "sinks.quarantine")
    _check_fields(quarantine, ("path",), "sinks.quarantine")
    # output.path and quarantine.path: never read, and refused in a spec file (load_spec); a version
    # registered when they were accepted still holds them, and reads back without them
    return SinksSpec(output_format=fmt, audit=audit)


_LINEAGE_FOLDER = "of the lineage's folder under the region's storage root, <root>/jobs/<job>/lineages/<id>/"


def _refuse_sinks_paths(data: Mapping[str, Any]) -> None:
    """``sinks.output.path`` and ``sinks.quarantine.path`` in a spec file: a job does not choose
    where it writes (``data`` is a spec :func:`parse_spec` has read)."""
    sinks = data.get("sinks") or {}
    for section, what in (("output", "its results to output/"), ("quarantine", "its bad input to quarantine/")):
        given = sinks.get(section)
        if isinstance(given, Mapping) and given.get("path") is not None:
            where = f"sinks.{section}.path"
            raise ConfigError(
                f"{where} cannot be set: a job does not choose where it writes — the platform writes "
                f"{what} {_LINEAGE_FOLDER} (docs/concepts/output-layout.md)",
                f"remove {where}",
            )


def _inputs_without(inputs: Any, key: str) -> list[str] | None:
    """The inputs that do not give ``key``; None when none gives it (or there are no inputs)."""
    if not isinstance(inputs, Mapping) or not inputs:
        return None
    bodies = {name: body if isinstance(body, Mapping) else {} for name, body in inputs.items()}
    if all(body.get(key) is None for body in bodies.values()):
        return None
    return [name for name, body in bodies.items() if body.get(key) is None]
