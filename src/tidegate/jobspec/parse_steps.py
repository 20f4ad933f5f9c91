"""Parsing ``steps:``: a job as a chain of named steps, as Stream Analytics' ``WITH`` writes it.

```yaml
steps:
  - name: rises                 # the first step reads the job's events (from: input)
    from: input
    analytics: {previous: LAG(temperature) OVER (PARTITION BY deviceId LIMIT DURATION(minute, 10))}
    filter: temperature - previous > 5
  - name: hourly                # a later step reads an earlier one's rows
    from: rises
    window: {kind: tumbling, size: 1h}
    group_by: [deviceId]
    aggregates: {rises: count(*)}
sinks:
  output: {step: hourly}        # the step the job emits; default the last
  outputs:                      # more outputs, each named, each the rows of one step
    rises: {step: rises}        # written under outputs/rises/ beside output/
```

The first step is any query a job without steps can be (per event, windowed, a join); its
fields are read as the top level's would be (:mod:`tidegate.jobspec.parse`). A later step
reads the job's events (``from: input``) or an earlier step's rows, and is a window over them
or per event — ``analytics``, ``filter`` and ``select`` of them
(:class:`~tidegate.jobspec.step_spec.StepSpec`);
it times the rows of a step by their System.Timestamp (a window row by its ``window_end``, any
other row by its ``system_time``) and the job's events by their system time, as the first step
does. :func:`split_steps` checks the graph — unknown steps, a step reading itself or a later
one, steps that lead to no output — and the named outputs (``sinks.outputs``: each a safe
folder name and a step) before anything else is parsed; :func:`later_steps` parses the later
steps over the columns of what each reads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tidegate.errors import ConfigError, excerpt
from tidegate.jobspec.analytics import parse_analytics
from tidegate.jobspec.expressions import check_expression, normalise_expression
from tidegate.jobspec.fields import AGGREGATE_BUILTINS, BUILTIN_COLUMNS, check_fields, column_name, optional_text
from tidegate.jobspec.fields import columns as _columns
from tidegate.jobspec.fields import mapping as _mapping
from tidegate.jobspec.hints import did_you_mean
from tidegate.jobspec.joins import check_side_expression, parse_join_section, parse_join_select
from tidegate.jobspec.model import FIRST_STEP_READS, PRIMARY_OUTPUT, QUERY_FIELDS, JobSpec, StepSpec, step_columns
from tidegate.jobspec.parse_query import (
    ANALYTIC_RESERVED,
    check_output_names,
    check_query_shape,
    parse_group_by,
    parse_having,
    parse_named_exprs,
    parse_window,
)
from tidegate.jobspec.reference import check_reference_columns, check_step_reference_shape
from tidegate.jobspec.references import check_snapshot_names, parse_references

LATER_STEP_FIELDS = (
    "name", "from", "window", "group_by", "aggregates", "having", "filter", "select", "analytics", "reference", "join",
)  # fmt: skip
_JOIN_STEP_FIELDS = ("name", "join", "filter", "select")
_FIRST_STEP_FIELDS = ("name", "from") + QUERY_FIELDS
# A named output's name becomes a folder (``outputs/<name>/``): lower case, so no two names
# share a folder on a case-insensitive file system, and no leading '_' or '.', which the
# layout keeps for its own files.
_OUTPUT_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")
NamedOutputs = tuple[tuple[str, str], ...]  # (output name, the step whose rows it holds)


def split_steps(top: Mapping[str, Any],
                ) -> tuple[dict, str | None, list[tuple[int, dict]], str | None, NamedOutputs]:  # fmt: skip
    """(the top level with the first step's query fields in it, the first step's name, the
    later steps with their index, the output step named in ``sinks.output.step``, the named
    outputs of ``sinks.outputs`` with their steps). A job without ``steps`` comes back as it is."""
    top = dict(top)
    output_step = _output_step(top.get("sinks"))
    named = _named_outputs(top.get("sinks"))
    raw = top.pop("steps", None)
    if raw is None:
        if output_step is not None:
            raise ConfigError(
                "sinks.output.step is set but the job has no steps", "remove it, or write the query as steps"
            )
        if named:
            raise ConfigError(
                "sinks.outputs is set but the job has no steps: each named output holds the rows of a step",
                "write the query as steps (docs/reference/jobspec.md#steps), or remove sinks.outputs",
            )
        return top, None, [], None, ()
    if not isinstance(raw, list) or not raw:
        raise ConfigError(
            f"steps is {excerpt(raw)}",
            "write a list of steps, each a mapping with a name (see docs/reference/jobspec.md#steps)",
        )
    beside = [k for k in QUERY_FIELDS if top.get(k) is not None]
    if beside:
        raise ConfigError(
            f"{beside[0]} is set beside steps: with steps, every query field belongs to a step",
            f"move {beside[0]} into the step that computes it",
        )
    if top.get("watermark") is not None:
        raise ConfigError(
            "watermark: a percentile watermark cannot be used with steps",
            "remove watermark: its output is lossy and would not equal the batch path",
        )
    steps = [_mapping(s, f"steps[{i}]") for i, s in enumerate(raw)]
    names = [_step_name(s, i) for i, s in enumerate(steps)]
    reads = [_reads(s, i, names) for i, s in enumerate(steps)]
    joined = [_joined(s, i, names) for i, s in enumerate(steps)]  # a later join step's right step
    output = output_step or names[-1]
    if output not in names:
        raise ConfigError(
            f"sinks.output.step: {excerpt(output)} is not a step" + did_you_mean(output, names),
            f"name one of the steps: {', '.join(names)}",
        )
    outputs = _output_steps(named, output, names)
    _check_graph(names, reads, joined, outputs)
    first = steps[0]
    check_fields(first, _FIRST_STEP_FIELDS, "steps[0]")
    top |= {k: v for k, v in first.items() if k in QUERY_FIELDS}
    for i, step in enumerate(steps[1:], start=1):
        if step.get("join") is not None:
            check_fields(step, _JOIN_STEP_FIELDS, f"steps[{i}]")
        extra = [k for k in step if k in QUERY_FIELDS and k not in LATER_STEP_FIELDS]
        if extra:
            raise ConfigError(
                f"steps[{i}] ({names[i]}): {extra[0]} in a later step is not supported yet",
                "a later step is per event (analytics or reference, filter, select) or a window (window, group_by,"
                f" aggregates, having, filter) over what it reads; compute {extra[0]} in the first step",
            )
        check_fields(step, LATER_STEP_FIELDS, f"steps[{i}]")
        if reads[i] == FIRST_STEP_READS and top.get("inputs") is not None:
            raise ConfigError(
                f"steps[{i}].from: {names[i]} reads the input, and the job has several (inputs)",
                "only a job of one input has steps reading its events; read the join step's rows instead",
            )
    return top, names[0], list(enumerate(steps))[1:], output, tuple((n, outputs[n]) for n, _ in named)


def later_steps(first: JobSpec, raw: list[tuple[int, dict]]) -> tuple[StepSpec, ...]:
    """The later steps, each parsed over the columns of what it reads: an earlier step's output
    columns, or the job's events (payload and built-in columns, as the first step reads them)."""
    out: list[StepSpec] = []
    tables = {r.name: "the first step" for r in first.references}  # each table's name, once per job
    for i, step in raw:
        where = f"steps[{i}] ({step['name']})"
        try:
            if step.get("join") is not None:
                parsed = _join_step(step, replace(first, steps=tuple(out)))
            elif step["from"] == FIRST_STEP_READS:
                parsed = _later_step(step, first.row_fields, BUILTIN_COLUMNS, AGGREGATE_BUILTINS)
            else:
                # the rows read are the "payload" of the step: their types are Spark's to check when it starts
                read = step_columns(replace(first, steps=tuple(out)), step["from"])
                parsed = _later_step(step, {c: "" for c in read}, (), ())
            _check_table_names(parsed, tables)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc.problem}", exc.fix) from None
        out.append(parsed)
    return tuple(out)


def _join_step(step: dict, view: JobSpec) -> StepSpec:
    """A later step joining two earlier steps' rows: each side's columns are those of its
    rows, with ``system_time`` their System.Timestamp (a window row's end)."""
    names = [view.first_step, *(s.name for s in view.steps)]
    payloads = {n: {c: "" for c in step_columns(view, n)} | {"system_time": "timestamp"} for n in names if n}
    join = parse_join_section(step["join"], [n for n in names if n], payloads, noun="step", side_columns={})
    filter_ = optional_text(step.get("filter"), "filter")
    if filter_ is not None:
        filter_ = normalise_expression(filter_)
        check_side_expression(filter_, "filter", [join.left, join.right], payloads, {})
    select = parse_join_select(step.get("select"), join, payloads, {})
    return StepSpec(step["name"], join.left, None, filter=filter_, select=select, join=join)


def _check_table_names(step: StepSpec, tables: dict[str, str]) -> None:
    """A reference table's name is its lineage records' folder: one name, one table per job."""
    for table in step.references:
        if table.name in tables:
            raise ConfigError(
                f"reference {table.name}: {tables[table.name]} joins a table of that name too",
                "give each reference table of the job its own name (its snapshots are recorded under it)",
            )
        tables[table.name] = f"step {step.name}"


def _later_step(step: dict, fields: dict[str, str], builtins: tuple[str, ...], aggregated: tuple[str, ...]) -> StepSpec:
    """A later step over rows with ``fields`` and ``builtins`` (``aggregated``: the built-in
    columns its aggregates may read): a window, or per event."""
    window = parse_window(step.get("window"))
    check_query_shape(window, step)
    # a per-event step's analytic columns, computed first: its filter and select read them
    analytics = parse_analytics(step.get("analytics"), fields, builtins, ANALYTIC_RESERVED)
    references = parse_references(step.get("reference"), fields, builtins, ANALYTIC_RESERVED, named=True)
    if references:
        check_step_reference_shape(step)
    computed = tuple((a.name, a.name) for a in analytics) or tuple((r.name, r.name) for r in references)
    filter_ = optional_text(step.get("filter"), "filter")
    if filter_ is not None:
        filter_ = normalise_expression(filter_)
        check_expression(filter_, "filter", _columns(fields, builtins, [n for n, _ in computed]))
        check_reference_columns(filter_, "filter", references)
    if window is None:  # per event: a filter and a projection of each row read
        select = step.get("select")
        if isinstance(select, list):  # a plain list of columns keeps their names
            select = {c: c for c in select} if all(isinstance(c, str) for c in select) else select
        projection = parse_named_exprs(select, "select", fields, builtins, computed)
        check_output_names(projection, "select")
        check_snapshot_names(projection, references, named=True)
        for column, expr in projection:
            check_reference_columns(expr, f"select.{column}", references)
        return StepSpec(step["name"], step["from"], None, filter=filter_, select=projection, analytics=analytics,
                        references=references)  # fmt: skip
    group_by = parse_group_by(step.get("group_by"), fields, builtins=builtins)
    aggregates = parse_named_exprs(step.get("aggregates"), "aggregates", fields, aggregated, group_by)
    check_output_names(group_by + aggregates, "group_by and aggregates")
    having = parse_having(step.get("having"), window, group_by, aggregates)
    return StepSpec(step["name"], step["from"], window, group_by, aggregates, filter_, having)


def _output_step(sinks: Any) -> str | None:
    output = sinks.get("output") if isinstance(sinks, Mapping) else None
    step = output.get("step") if isinstance(output, Mapping) else None
    if step is not None and not isinstance(step, str):
        raise ConfigError(f"sinks.output.step is {excerpt(step)}", "name the step the output emits")
    return step


def is_output_name(name: str) -> bool:
    """True for ``output`` (the job's own output) and any name a named output may have."""
    return name == PRIMARY_OUTPUT or bool(_OUTPUT_NAME.fullmatch(name))


def _named_outputs(sinks: Any) -> list[tuple[str, Any]]:
    """``sinks.outputs`` as (name, the step it names), each name checked: it becomes a folder."""
    raw = sinks.get("outputs") if isinstance(sinks, Mapping) else None
    if raw is None:
        return []
    outputs = _mapping(raw, "sinks.outputs")
    if not outputs:
        raise ConfigError(
            "sinks.outputs is empty", "name at least one output, e.g. outputs: {archive: {step: readings}}"
        )
    named = []
    for name, body in outputs.items():
        if not isinstance(name, str) or not _OUTPUT_NAME.fullmatch(name):
            raise ConfigError(
                f"sinks.outputs: {excerpt(name)} is not an output name",
                "use lower-case letters, digits and '_', starting with a letter, at most 63 characters"
                " (the name is the output's folder)",
            )
        if name == PRIMARY_OUTPUT:
            raise ConfigError(
                "sinks.outputs: output is the name of the job's own output",
                "give the named output another name, e.g. archive",
            )
        body = _mapping(body, f"sinks.outputs.{name}")
        check_fields(body, ("step",), f"sinks.outputs.{name}")
        step = body.get("step")
        if not isinstance(step, str):
            raise ConfigError(
                f"sinks.outputs.{name}.step is {'missing' if step is None else repr(step)}",
                "name the step whose rows the output holds, e.g. step: readings",
            )
        named.append((name, step))
    return named


def _output_steps(named: list[tuple[str, str]], output: str, names: list[str]) -> dict[str, str]:
    """Every output (``output`` first, then the named ones) with the step it holds; each step
    an existing one, and no step written by two outputs."""
    outputs = {PRIMARY_OUTPUT: output}
    for name, step in named:
        if step not in names:
            raise ConfigError(
                f"sinks.outputs.{name}.step: {excerpt(step)} is not a step" + did_you_mean(step, names),
                f"name one of the steps: {', '.join(names)}",
            )
        twice = next((other for other, s in outputs.items() if s == step), None)
        if twice is not None:
            raise ConfigError(
                f"sinks.outputs.{name}.step: {step} is the step of {twice} too",
                "an output per step: remove one of them (their rows would be the same)",
            )
        outputs[name] = step
    return outputs


def _step_name(step: dict, i: int) -> str:
    name = step.get("name")
    if not isinstance(name, str):
        raise ConfigError(
            f"steps[{i}].name is {'missing' if name is None else repr(name)}",
            "give every step a name, e.g. name: hourly (later steps read it by that name)",
        )
    column_name(name, f"steps[{i}].name", frozenset((FIRST_STEP_READS,)))
    return name


def _reads(step: dict, i: int, names: list[str]) -> str | None:
    """The step ``step`` reads; None for a join step, which reads the inputs its join names."""
    if names.index(names[i]) != i:
        raise ConfigError(
            f"steps[{i}].name: {names[i]} is the name of steps[{names.index(names[i])}] too",
            "give each step its own name",
        )
    source = step.get("from")
    if i > 0 and step.get("join") is not None:
        if source is not None:
            raise ConfigError(
                f"steps[{i}].from is set on a join step", "remove it: a join step reads the two steps its join names"
            )
        return _join_side(step, i, names, "left")
    if i == 0:
        if step.get("join") is not None:
            if source is not None:
                raise ConfigError(
                    "steps[0].from is set on a join step", "remove it: a join reads the inputs its join names"
                )
            return None
        if source not in (None, FIRST_STEP_READS):
            raise ConfigError(
                f"steps[0].from: {excerpt(source)}: the first step reads the job's events",
                f"write from: {FIRST_STEP_READS} (or leave it out)",
            )
        return FIRST_STEP_READS
    if source is None:
        raise ConfigError(f"steps[{i}].from is missing", f"name the step {names[i]} reads, e.g. from: {names[i - 1]}")
    if source == FIRST_STEP_READS:  # several steps may read the job's events
        return FIRST_STEP_READS
    if source not in names:
        raise ConfigError(
            f"steps[{i}].from: {excerpt(source)} is not a step" + did_you_mean(str(source), names),
            f"name an earlier step: {', '.join(names[:i])}",
        )
    if names.index(source) >= i:
        raise ConfigError(
            f"steps[{i}].from: {names[i]} reads {source}, " + ("itself" if source == names[i] else "a later step"),
            "a step reads the input or an earlier step: steps run in the order written, so they form no cycle",
        )
    return source


def _joined(step: dict, i: int, names: list[str]) -> str | None:
    """The right step of a later join step (its left is what it reads); None for any other."""
    return _join_side(step, i, names, "right") if i > 0 and step.get("join") is not None else None


def _join_side(step: dict, i: int, names: list[str], side: str) -> str:
    """``join.<side>`` of later join step ``i``: an earlier step's name."""
    join = step["join"]
    source = join.get(side) if isinstance(join, Mapping) else None
    where = f"steps[{i}].join.{side}"
    earlier = ", ".join(names[:i])
    if not isinstance(source, str) or source not in names[:i]:
        problem = "is missing" if source is None else f": {excerpt(source)} is not an earlier step"
        if source == FIRST_STEP_READS:
            problem = ": a join step joins two steps, not the input"
        raise ConfigError(
            f"{where} {problem}".replace(" :", ":") + (did_you_mean(str(source), names) if source else ""),
            f"name an earlier step: {earlier} (to join the input, join in the first step, or read it in a"
            " per-event step and join that)",
        )
    return source


def _check_graph(names: list[str], reads: list[str | None], joined: list[str | None], outputs: dict[str, str]) -> None:
    """A graph from the input — a later step reads the input or one earlier step (a join step
    two), several may read the same one — each of whose steps is an output's step or read on
    the way to one."""
    used: set[str] = set()
    todo: list[str | None] = list(outputs.values())  # an output's step, then each it reads (None: the input)
    while todo:
        step = todo.pop()
        if step == FIRST_STEP_READS or step is None or step in used:
            continue
        used.add(step)
        n = names.index(step)
        todo += [reads[n], joined[n]]
    unused = [n for n in names if n not in used]
    if unused:
        held = ", ".join(f"{name}: {step}" for name, step in outputs.items())
        raise ConfigError(
            f"step {unused[0]} is not used: it is neither an output's step ({held}) nor read by a step that leads"
            " to one",
            f"remove {unused[0]}, read it from the next step, or name it in sinks.outputs",
        )
