"""A translation as a job spec's YAML text: the query's names, each field with a comment
naming the query line it came from, and the spec loaded by the normal loader before it is
written (:func:`write_spec`) — the translator is no way around a spec's checks.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tidegate.asa.cross_apply import check_declared_type
from tidegate.asa.outputs import output_name
from tidegate.asa.parts import Step, StreamInput, Translation
from tidegate.asa.side_file import SideFile
from tidegate.errors import ConfigError
from tidegate.files import atomic_write_text
from tidegate.jobspec import load_spec

_NAME = re.compile(r"[^a-z0-9_-]+")


def job_name(text: str) -> str:
    """A spec name (lower case, digits, ``-`` and ``_``, at most 63) from a file's stem."""
    name = _NAME.sub("-", text.lower()).strip("-_")[:63]
    return name or "asa-job"


def payload_of(stream: StreamInput, side: SideFile) -> tuple[dict[str, str], str]:
    """An input's payload and where it came from: the side file's, or inferred from the query
    (a field the query computes with — summed, averaged, compared with a number — is ``double``,
    every other one ``string``, which the time field must be)."""
    given = side.inputs.get(stream.name)
    if given is not None and given.payload:
        return dict(given.payload), f"payload of {stream.name}: from {side.origin}"
    fields = {
        name: "double" if name in stream.numeric_fields and name != stream.timestamp_by else "string"
        for name in stream.fields_read
    }
    if not fields:
        raise ConfigError(
            f"the query reads no field of {stream.name} by name, so its payload cannot be inferred",
            f"give it in the side file: inputs: {{{stream.name}: {{payload: {{field: type}}}}}}",
        )
    return fields, (
        f"payload of {stream.name}: inferred from the query (a field it computes with is double, any other "
        f"string) — give the types under inputs.{stream.name}.payload in --inputs"
    )


def render(translation: Translation, side: SideFile, name: str, origin: str) -> str:
    """The spec's YAML text."""
    policy_note = (
        f"policy: from {side.origin}"
        if side.origin
        else "policy: Stream Analytics' defaults (no --inputs): out of order 0 s, late 5 s, Adjust"
    )
    if translation.cross_apply is not None:  # its field's type is the side file's: a query cannot tell it
        given = side.inputs.get(translation.input_name)
        check_declared_type(translation.cross_apply, translation.input_name, given.payload if given else None)
    payloads = [payload_of(stream, side) for stream in translation.inputs]
    names = " and ".join(s.name for s in translation.inputs)
    lines = [
        f"# Translated from {origin} by `tidegate asa import`: change the query and import it again.",
        f"# Input {names} → {'this job' + chr(39) + 's source' if len(payloads) == 1 else 'inputs, each its own log'}"
        f"; {_outputs_line(translation)}.",
        *(f"# {note}" for _, note in payloads),
        f"# {policy_note}",
        f"name: {_scalar(name)}",
        "version: 1",
        f"description: {_scalar(side.description or f'Stream Analytics query {Path(origin).name}, translated')}",
        "",
    ]
    if len(translation.inputs) == 1:
        lines += _input_lines(translation.inputs[0], payloads[0][0], side, "", own_log=False)
    else:
        lines.append("inputs:")
        for stream, (payload, _) in zip(translation.inputs, payloads, strict=True):
            lines += [f"  {stream.name}:", *_input_lines(stream, payload, side, "    ", own_log=True)]
    several = len(translation.references) > 1  # a list of tables, joined in the query's order
    lines += ["reference:"] if several else []
    for ref in translation.references:
        if several:
            lines += [f"  # {ref.line}", f"  - name: {ref.name}"]
        else:
            lines += [f"reference:   # {ref.line}", f"  name: {ref.name}"]
        indent = "    " if several else "  "
        lines += [f"{indent}{k}: {_scalar(v)}" for k, v in side.reference(ref.name).items()]
        lines += [f"{indent}keys: {_scalar(ref.keys)}", f"{indent}type: {ref.type}"]
    lines.append("")
    steps = translation.steps
    if len(steps) == 1 and not translation.outputs:
        lines += _step_lines(steps[0], indent="")
    else:
        lines.append("steps:")
        for i, step in enumerate(steps):
            lines += [f"  - name: {step.name}"]
            if i:
                lines.append(f"    from: {step.reads}")
            lines += _step_lines(step, indent="    ")
    return "\n".join([*lines, "", *_sink_lines(translation)]) + "\n"


def _outputs_line(translation: Translation) -> str:
    """The header's account of where each output of the query goes."""
    if not translation.outputs:
        return f"output {translation.output_name or '(none named)'} → the job's output"
    first, *named = translation.outputs
    return f"output {first} → the job's output; " + ", ".join(f"{n} → outputs/{output_name(n)}/" for n in named)


def _sink_lines(translation: Translation) -> list[str]:
    steps = translation.steps
    if not translation.outputs:
        return ["sinks:", f"  output: {{format: parquet{'' if len(steps) == 1 else ', step: ' + steps[-1].name}}}"]
    (first, step), *named = translation.outputs.items()
    lines = ["sinks:", f"  output: {{format: parquet, step: {step}}}   # INTO {first}", "  outputs:"]
    return lines + [f"    {output_name(n)}: {{step: {s}}}   # INTO {n}" for n, s in named]


def _input_lines(stream: StreamInput, payload: dict[str, str], side: SideFile, indent: str, own_log: bool) -> list[str]:
    """An input's source, payload, event time and policy: the job's, or (``own_log``) a joined input's."""
    given = side.inputs.get(stream.name)
    source = given.source if given is not None and given.source else None
    if own_log and source is None:
        source = {"event_log": f"var/event-log-{job_name(stream.name)}"}  # each stream of a join is its own log
    lines = _block("source", source, indent) if source else []
    lines += _block("payload", payload, indent)
    if stream.timestamp_by is not None:
        lines.append(indent + _field("timestamp_by", stream.timestamp_by, stream.time_lines.get("timestamp_by")))
        if given is not None and given.time_format:
            lines.append(indent + _field("time_format", given.time_format, None))
        if stream.over is not None:
            lines.append(indent + _field("over", stream.over, stream.time_lines.get("over")))
        lines += _block("policy", side.policy(), indent)
    return lines


def _step_lines(step: Step, indent: str) -> list[str]:
    out = [f"{indent}# {note}" for note in step.notes]
    for key in ("cross_apply", "join", "analytics", "select", "filter", "window", "group_by", "aggregates", "having"):
        if key in ("join", "analytics") and key in step.fields:
            out += _block(key, step.fields[key], indent, step.lines.get(key))
        elif key in step.fields:
            out.append(indent + _field(key, step.fields[key], step.lines.get(key)))
    return out


def _field(key: str, value: Any, comment: str | None) -> str:
    return f"{key}: {_scalar(value)}" + (f"   # {comment}" if comment else "")


def _block(key: str, value: dict, indent: str = "", comment: str | None = None) -> list[str]:
    head = f"{indent}{key}:" + (f"   # {comment}" if comment else "")
    return [head, *(f"{indent}  {k}: {_scalar(v)}" for k, v in value.items())]


def _scalar(value: Any) -> str:
    """``value`` as YAML on one line (flow style: mappings and lists in braces and brackets)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=1_000_000, sort_keys=False, allow_unicode=True)
    return text.strip().removesuffix("...").strip()


def checked_spec(text: str, folder: Path) -> Path:
    """``text`` written to a file in ``folder`` and loaded by :func:`~tidegate.jobspec.load_spec`:
    the path of a spec that passed every check a spec file passes."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=folder, delete=False, encoding="utf-8") as f:
        f.write(text)
    path = Path(f.name)
    try:
        load_spec(path)
    except ConfigError as exc:
        path.unlink(missing_ok=True)
        raise ConfigError(
            f"the translated spec is refused by the spec loader: {exc.problem}",
            f"{exc.fix} — change the query (or the side file) accordingly",
        ) from None
    return path


def write_spec(text: str, out: Path) -> None:
    """Write ``text`` to ``out`` once the spec loader has accepted it."""
    checked = checked_spec(text, out.parent)
    try:
        atomic_write_text(out, text)
    finally:
        checked.unlink(missing_ok=True)
