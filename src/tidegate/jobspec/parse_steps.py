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
fields are read as the top level's would be (:mod:`tidegate.jobspec.parse`). A later step is a
window over the step it reads, whose rows it times by their System.Timestamp (a window row by
its ``window_end``, any other row by its ``system_time``). :func:`split_steps` checks the graph —
unknown steps, a step reading itself or a later one, steps that lead to no output, two steps
reading one — and the named outputs (``sinks.outputs``: each a safe folder name and a step)
before anything else is parsed; :func:`later_steps` parses the later steps over
the columns of the step each reads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tidegate.errors import ConfigError, excerpt
from tidegate.jobspec.expressions import check_expression, normalise_expression
from tidegate.jobspec.fields import check_fields, column_name, optional_text
from tidegate.jobspec.fields import mapping as _mapping
from tidegate.jobspec.hints import did_you_mean
from tidegate.jobspec.model import FIRST_STEP_READS, PRIMARY_OUTPUT, QUERY_FIELDS, JobSpec, StepSpec
from tidegate.jobspec.parse_query import (
    check_output_names,
    parse_group_by,
    parse_having,
    parse_named_exprs,
    parse_window,
)

LATER_STEP_FIELDS = ("name", "from", "window", "group_by", "aggregates", "having", "filter")
_FIRST_STEP_FIELDS = ("name", "from") + QUERY_FIELDS
_WINDOW_OUTPUT = ("window_start", "window_end")
_EVENT_OUTPUT = ("partition", "offset", "system_time")
_JOIN_OUTPUT = ("partition", "offset", "right_partition", "right_offset", "system_time")
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
    output = output_step or names[-1]
    if output not in names:
        raise ConfigError(
            f"sinks.output.step: {excerpt(output)} is not a step" + did_you_mean(output, names),
            f"name one of the steps: {', '.join(names)}",
        )
    outputs = _output_steps(named, output, names)
    _check_graph(names, reads, outputs)
    first = steps[0]
    check_fields(first, _FIRST_STEP_FIELDS, "steps[0]")
    top |= {k: v for k, v in first.items() if k in QUERY_FIELDS}
    for i, step in enumerate(steps[1:], start=1):
        extra = [k for k in step if k in QUERY_FIELDS and k not in LATER_STEP_FIELDS]
        if extra:
            raise ConfigError(
                f"steps[{i}] ({names[i]}): {extra[0]} in a step that reads another step is not supported yet",
                "a later step is a window over the step it reads (window, group_by, aggregates, filter); compute"
                f" {extra[0]} in the first step, which reads the job's events",
            )
        check_fields(step, LATER_STEP_FIELDS, f"steps[{i}]")
    return top, names[0], list(enumerate(steps))[1:], output, tuple((n, outputs[n]) for n, _ in named)


def later_steps(first: JobSpec, raw: list[tuple[int, dict]]) -> tuple[StepSpec, ...]:
    """The later steps, each parsed over the output columns of the step it reads."""
    columns = {first.first_step: output_columns(first)}
    out: list[StepSpec] = []
    for i, step in raw:
        name, where = step["name"], f"steps[{i}] ({step['name']})"
        try:
            parsed = _later_step(step, columns[step["from"]])
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc.problem}", exc.fix) from None
        columns[name] = _WINDOW_OUTPUT + tuple(n for n, _ in parsed.group_by + parsed.aggregates)
        out.append(parsed)
    return tuple(out)


def output_columns(spec: JobSpec) -> tuple[str, ...]:
    """The columns of the rows a step without steps of its own emits (what a later step reads)."""
    if spec.join is not None:
        return tuple(n for n, _ in spec.select) + _JOIN_OUTPUT
    if spec.window is not None:
        return _WINDOW_OUTPUT + tuple(n for n, _ in spec.group_by + spec.aggregates)
    fields = [n for n, _ in spec.select] or [*spec.payload, *(a.name for a in spec.analytics)]
    return tuple(fields) + _EVENT_OUTPUT


def _later_step(step: dict, read: tuple[str, ...]) -> StepSpec:
    # the rows read are the "payload" of the step: their types are Spark's to check when it starts
    fields = {c: "" for c in read}
    window = parse_window(step.get("window"))
    if window is None:
        raise ConfigError(
            "window is missing",
            "a step that reads another step is a window over its rows, e.g."
            " window: {kind: tumbling, size: 1h}, with aggregates",
        )
    if not step.get("aggregates"):
        raise ConfigError("aggregates are missing", "add what to compute per window, e.g. aggregates: {n: count(*)}")
    group_by = parse_group_by(step.get("group_by"), fields, builtins=())
    aggregates = parse_named_exprs(step.get("aggregates"), "aggregates", fields, (), group_by)
    check_output_names(group_by + aggregates, "group_by and aggregates")
    having = parse_having(step.get("having"), window, group_by, aggregates)
    filter_ = optional_text(step.get("filter"), "filter")
    if filter_ is not None:
        filter_ = normalise_expression(filter_)
        check_expression(filter_, "filter", list(read))
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
    if source == FIRST_STEP_READS:
        raise ConfigError(
            f"steps[{i}].from: {names[i]} reads the input: only the first step reads the job's events yet",
            "two steps over one input are not supported yet (docs/limitations.md); read an earlier step"
            " instead, and name it in sinks.outputs to write its rows too",
        )
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


def _check_graph(names: list[str], reads: list[str | None], outputs: dict[str, str]) -> None:
    """A tree from the first step — a later step reads one earlier step, several may read the
    same one — each of whose steps is an output's step or read on the way to one."""
    used: set[str] = set()
    step: str | None  # an output's step, then each step it reads (None: the input)
    for step in outputs.values():
        while step != FIRST_STEP_READS and step is not None and step not in used:
            used.add(step)
            step = reads[names.index(step)]
    unused = [n for n in names if n not in used]
    if unused:
        held = ", ".join(f"{name}: {step}" for name, step in outputs.items())
        raise ConfigError(
            f"step {unused[0]} is not used: it is neither an output's step ({held}) nor read by a step that leads"
            " to one",
            f"remove {unused[0]}, read it from the next step, or name it in sinks.outputs",
        )
