"""``GetMetadataPropertyValue(input, 'property')``: an event's metadata as the built-in columns.

| property | spec expression |
|---|---|
| ``'[User].[name]'`` (a user property: a Kafka record header) | ``headers['name']`` |
| ``'EventEnqueuedUtcTime'`` | ``arrival_time`` |
| ``'PartitionId'`` | ``partition`` |
| ``'Offset'`` | ``offset`` |

The property is a text literal, matched without regard to case; any other property, or a first
argument that is not the input, is refused naming it and the properties translated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

from sqlglot import exp

from tidegate.errors import ConfigError
from tidegate.jobspec.fields import HEADERS

FUNCTION = "getmetadatapropertyvalue"
COLUMNS = {"eventenqueuedutctime": "arrival_time", "partitionid": "partition", "offset": "offset"}
_USER = re.compile(r"\[user\]\.\[(?P<name>[^\]]+)\]", re.IGNORECASE)
SUPPORTED = (
    "'[User].[name]' (headers['name']), 'EventEnqueuedUtcTime' (arrival_time), 'PartitionId' (partition), "
    "'Offset' (offset)"
)

Refuse = Callable[[exp.Expr, str, str], ConfigError]


def is_metadata(node: exp.Expr) -> bool:
    return isinstance(node, exp.Anonymous) and str(node.this).lower() == FUNCTION


def metadata_column(node: exp.Anonymous, inputs: Collection[str], refuse: Refuse) -> exp.Expr:
    """The built-in column (or header) a ``GetMetadataPropertyValue`` call reads; ``inputs``: the
    names (lower case) that name the input read, its alias among them."""
    args = node.expressions
    shown = f"GetMetadataPropertyValue({', '.join(a.sql('tsql') for a in args)})"
    if len(args) != 2 or not (isinstance(args[1], exp.Literal) and args[1].is_string):
        raise refuse(
            node, f"{shown}: GetMetadataPropertyValue takes the input and a property's name as text",
            f"write GetMetadataPropertyValue(input, 'EventEnqueuedUtcTime'); translated: {SUPPORTED}",
        )  # fmt: skip
    source = args[0]
    if not (isinstance(source, exp.Column) and not source.table and source.name.lower() in inputs):
        raise refuse(node, f"{shown}: the first argument is not the input the query reads",
                     "name the input of FROM (or its alias): GetMetadataPropertyValue(input, …)")  # fmt: skip
    prop = args[1].name.strip()
    user = _USER.fullmatch(prop)
    if user is not None:
        return exp.Bracket(this=exp.column(HEADERS), expressions=[exp.Literal.string(user.group("name"))])
    if prop.lower() in COLUMNS:
        return exp.column(COLUMNS[prop.lower()])
    raise refuse(node, f"{shown}: the metadata property {prop!r} has no Tidegate form",
                 f"the properties translated are {SUPPORTED}; other metadata properties are not supported")  # fmt: skip
