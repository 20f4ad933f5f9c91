"""The parts a translation is made of — each SELECT a :class:`Step`, the inputs it reads, the
reference data it joins — and what the translator offers the modules that read one clause
(:class:`Translator`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlglot import exp


def whole_record(fields: list[str]) -> str:
    """The whole event as a spec expression: a struct of its payload ``fields``, each name quoted."""
    return "struct(" + ", ".join("`" + f.replace("`", "``") + "`" for f in fields) + ")"


@dataclass
class StreamInput:
    """An input the query reads as a stream: its time, and the fields the query reads of it."""

    name: str
    timestamp_by: str | None = None
    over: str | None = None
    time_lines: dict[str, str] = field(default_factory=dict)
    fields_read: list[str] = field(default_factory=list)
    numeric_fields: set[str] = field(default_factory=set)  # fields the query computes with


@dataclass(frozen=True)
class ReferenceJoin:
    name: str
    keys: list[str]
    type: str  # inner or left
    line: str


@dataclass(frozen=True)
class AppliedField:
    """The field ``CROSS APPLY`` turns into rows, and where the query says so."""

    name: str  # the rows' column: the query's alias
    kind: str  # elements or properties
    field: str  # the payload field
    call: str  # the query's text of the call, e.g. GetArrayElements(e.readings)
    at: str  # origin:line:col of the CROSS APPLY
    columns: tuple[str, str]  # the rows' two columns, spelt as the spec spells them

    def spec(self) -> dict[str, str]:
        return {"name": self.name, self.kind: self.field}


@dataclass
class Step:
    """One SELECT as spec fields, with the query line each field came from."""

    name: str
    reads: str  # the input's name, or the step it reads
    fields: dict[str, Any] = field(default_factory=dict)
    lines: dict[str, str] = field(default_factory=dict)  # field → "line N: the construct"
    notes: list[str] = field(default_factory=list)


@dataclass
class Translation:
    output_name: str | None
    steps: list[Step]
    inputs: list[StreamInput] = field(default_factory=list)  # one, or the two of a join (left first)
    references: list[ReferenceJoin] = field(default_factory=list)  # reference data joined, in order
    cross_apply: AppliedField | None = None
    # a job of several outputs (:mod:`tidegate.asa.outputs`): each INTO's name → the step it
    # holds, in the query's order; the first is the job's own output, the others named outputs
    outputs: dict[str, str] = field(default_factory=dict)

    @property
    def input_name(self) -> str:
        return self.inputs[0].name

    @property
    def reference(self) -> ReferenceJoin | None:
        """The first reference data joined (None: none): whether the query joins any."""
        return self.references[0] if self.references else None

    @property
    def timestamp_by(self) -> str | None:
        return self.inputs[0].timestamp_by

    @property
    def over(self) -> str | None:
        return self.inputs[0].over


class Translator(Protocol):
    """What :mod:`~tidegate.asa.joins` and :mod:`~tidegate.asa.windowed` use of the translator."""

    origin: str
    text: str
    aliases: dict[str, str]
    join: dict[str, Any] | None
    on_filters: list[exp.Expr]

    def refuse(self, node: exp.Expr, problem: str, fix: str) -> Exception: ...

    def where(self, node: exp.Expr, what: str) -> str: ...

    def expression(self, node: exp.Expr, windowed: bool) -> str: ...

    def time(self, timing: Any, stream: StreamInput) -> None: ...

    def output_name(self, item: exp.Expr) -> str: ...
