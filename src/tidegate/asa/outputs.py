"""A query's several ``SELECT … INTO`` as the fewest jobs that hold them.

Each ``SELECT … INTO`` translates to a chain of steps (:func:`tidegate.asa.translate.translate`).
A job's steps begin with one first step, each later step a window over the first or another
later step, several of them may read one; each of its outputs holds the rows of one step
(jobspec.md#steps, #named-outputs). So the outputs go into one job when their chains begin with
the same first step and agree on every step they share: ``WITH r AS (…) SELECT * INTO archive
FROM r; SELECT … INTO alerts FROM r GROUP BY …`` is the steps ``r → alerts``, ``archive`` the
rows of ``r``; two windows over ``r`` are two steps reading ``r``. Stream Analytics' own
pattern, ``SELECT * INTO archive FROM input`` beside a windowed ``SELECT … INTO alerts FROM
input``, is one job too: the window reads the rows of the ``SELECT *``, which are the input's
events, each timed by its event time as the input's are. Outputs that fork at the input — two
filters of it, the input timed two ways — are one job each, every job the chain its output
reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from tidegate.asa.parts import Step, StreamInput, Translation
from tidegate.errors import ConfigError
from tidegate.jobspec.model import PRIMARY_OUTPUT
from tidegate.jobspec.parse_steps import LATER_STEP_FIELDS, is_output_name

_LATER = frozenset(LATER_STEP_FIELDS) - {"name", "from"}


@dataclass(frozen=True)
class TranslatedJob:
    """One job a query becomes: its name, its spec's YAML, and where each output goes."""

    name: str
    text: str
    outputs: dict[str, str]  # the query's INTO name → the job's output: "output", or a named output


def output_name(into: str) -> str:
    """The spec's name for the output a query writes ``INTO``: lower case, ``_`` for any other
    character, beginning with a letter (a named output's name is a folder)."""
    name = re.sub(r"[^a-z0-9_]", "_", into.lower()).lstrip("_0123456789")[:63]
    return name or "out"


def check_declared(declared: tuple[str, ...], written: list[str], origin: str | None) -> None:
    """When the side file lists ``outputs``, the query writes those and no others, as a Stream
    Analytics job's query may name only the outputs the job defines (names compared without
    case, as the query's are)."""
    if not declared:
        return
    known = {d.lower() for d in declared}
    for into in written:
        if into.lower() not in known:
            raise ConfigError(
                f"{origin}: the query writes INTO {into}, which its outputs do not list",
                f"add {into} under outputs:, or write INTO one of {', '.join(declared)}",
            )
    unwritten = sorted(d for d in declared if d.lower() not in {w.lower() for w in written})
    if unwritten:
        raise ConfigError(
            f"{origin}: outputs lists {', '.join(unwritten)}, which no SELECT … INTO writes",
            "remove it from outputs:, or write it: SELECT … INTO name FROM …",
        )


def one_job(translations: list[Translation]) -> Translation | None:
    """Every translation as the steps of one job, with ``outputs`` naming each one's step; None
    when they begin with different first steps, or their inputs are read differently (another
    ``TIMESTAMP BY``)."""
    if len(translations) == 1:
        return translations[0]
    first = translations[0]
    if any(t.cross_apply is not None for t in translations):
        return None  # cross_apply is not combined with steps
    if any(_timing(t) != _timing(first) or t.references != first.references for t in translations):
        return None
    chains = _lifted([list(t.steps) for t in translations])
    steps: dict[str, Step] = {}
    for chain in chains:
        for step in chain:
            if steps.setdefault(step.name, step) != step:
                return None  # one name, two different steps
    if len({chain[0].name for chain in chains}) > 1:
        return None  # forks at the input: a job has one first step
    names = [output_name(t.output_name or "") for t in translations]
    if len(set(names)) < len(names) or not all(is_output_name(n) and n != PRIMARY_OUTPUT for n in names[1:]):
        return None
    return Translation(
        output_name=first.output_name,
        steps=list(steps.values()),  # each reads one before it: its chain's step before it
        inputs=_inputs(translations),
        references=first.references,
        outputs={t.output_name or "": chain[-1].name for t, chain in zip(translations, chains, strict=True)},
    )


def _timing(t: Translation) -> list[tuple[str, str | None, str | None]]:
    return [(s.name, s.timestamp_by, s.over) for s in t.inputs]


def _lifted(chains: list[list[Step]]) -> list[list[Step]]:
    """The chains with a window over the input made a window over a ``SELECT *`` of it, where one
    output is that ``SELECT *`` (a step without fields): its rows are the input's events."""
    bare = next((c[0] for c in chains if len(c) == 1 and not c[0].fields), None)
    if bare is None:
        return chains
    out = []
    for chain in chains:
        head = chain[0]
        if head is not bare and head.reads == bare.reads and "window" in head.fields and set(head.fields) <= _LATER:
            chain = [bare, replace(head, reads=bare.name), *chain[1:]]
        out.append(chain)
    return out


def _inputs(translations: list[Translation]) -> list[StreamInput]:
    """The inputs of the joined translations: the fields each one reads, together."""
    merged = [replace(s, fields_read=list(s.fields_read), numeric_fields=set(s.numeric_fields))
              for s in translations[0].inputs]  # fmt: skip
    for t in translations[1:]:
        for into, stream in zip(merged, t.inputs, strict=True):
            into.fields_read += [f for f in stream.fields_read if f not in into.fields_read]
            into.numeric_fields |= stream.numeric_fields
    return merged
