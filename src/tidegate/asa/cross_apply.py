"""Stream Analytics' ``CROSS APPLY`` as the spec's ``cross_apply`` (jobspec.md#cross_apply).

* ``FROM input e CROSS APPLY GetArrayElements(e.readings) AS a`` — ``cross_apply: {name: a,
  elements: readings}``: one row per element, read as ``a.ArrayIndex`` and ``a.ArrayValue``;
* ``CROSS APPLY GetRecordProperties(e.rec) AS p`` — ``cross_apply: {name: p, properties: rec}``:
  one row per property, read as ``p.PropertyName`` and ``p.PropertyValue``.

Only where the spec holds it: one ``CROSS APPLY`` over a field of the only input, in a query of
one SELECT without analytic functions. ``OUTER APPLY`` (a row for an empty array too), a second
``CROSS APPLY``, one beside a ``JOIN``, in a ``WITH`` chain or a later step are refused with
their line and column. The query cannot tell an array's type: the side file must declare it
(:func:`check_declared_type`), never guessed.
"""

from __future__ import annotations

from sqlglot import exp

from tidegate.asa.dialect import position
from tidegate.asa.parts import AppliedField, Translator
from tidegate.errors import ConfigError

# a function CROSS APPLY calls → the spec's field for it and the two columns of its rows
FUNCTIONS = {
    "getarrayelements": ("elements", ("ArrayIndex", "ArrayValue")),
    "getrecordproperties": ("properties", ("PropertyName", "PropertyValue")),
}
SPLIT = "flatten in one job and read its output in a second job"


def applied_lateral(tr: Translator, select: exp.Select, later: bool) -> exp.Lateral | None:
    """The SELECT's one ``CROSS APPLY``; None when it has none. Refused: ``OUTER APPLY``, a
    second one, one beside a ``JOIN`` or in a step that reads a step."""
    joins = select.args.get("joins") or []
    applies = [j for j in joins if isinstance(j.this, exp.Lateral)]
    if not applies:
        return None
    first = applies[0]
    if first.this.args.get("cross_apply") is not True:
        raise tr.refuse(first, "OUTER APPLY is not supported",
                        "write CROSS APPLY: an event whose array or record is empty or NULL gives no row")  # fmt: skip
    if len(applies) > 1:
        raise tr.refuse(applies[1], "a second CROSS APPLY: a job flattens one field", f"one per job: {SPLIT}")
    other = next((j for j in joins if j is not first), None)
    if other is not None:
        raise tr.refuse(other, "CROSS APPLY beside a JOIN: cross_apply cannot be combined with a join",
                        f"{SPLIT}, which joins")  # fmt: skip
    if later:
        raise tr.refuse(first, "CROSS APPLY in a step that reads a step", "apply it to the input, in the first SELECT")
    return first.this


def read_apply(tr: Translator, lateral: exp.Lateral) -> AppliedField:
    """The spec's ``cross_apply`` of ``CROSS APPLY Function(alias.field) AS name``."""
    call = lateral.this
    known = FUNCTIONS.get(str(call.this).lower()) if isinstance(call, exp.Anonymous) else None
    if known is None:
        raise tr.refuse(call, f"CROSS APPLY {call.sql('tsql')}: only GetArrayElements and GetRecordProperties",
                        "write GetArrayElements(e.array) AS a or GetRecordProperties(e.record) AS p")  # fmt: skip
    kind, columns = known
    args = call.expressions
    arg = args[0] if len(args) == 1 else None
    if not isinstance(arg, exp.Column) or arg.args.get("db") or (arg.table and arg.table.lower() not in tr.aliases):
        raise tr.refuse(arg or call, f"{call.this}() takes one field of the input",
                        f"write {call.this}(e.field); a field nested in a record has no form: {SPLIT}")  # fmt: skip
    name = lateral.alias
    if not name:
        raise tr.refuse(lateral, f"CROSS APPLY {call.this}(…) without a name", f"write … AS a after {call.this}(…)")
    if name.lower() in tr.aliases:
        raise tr.refuse(lateral, f"CROSS APPLY … AS {name}: the input's name", "give the rows another name")
    line, col = position(lateral, tr.text)
    text = f"{call.this}({arg.sql('tsql')})"
    return AppliedField(name, kind, arg.name, text, f"{tr.origin}:{line}:{col}", columns)


def applied_column(tr: Translator, applied: AppliedField, node: exp.Column) -> exp.Expr:
    """``node`` (a copy: it is changed) as the spec spells it, ``a.arrayvalue.x`` as
    ``a.ArrayValue.x``; a column the rows do not have is refused."""
    parts = node.parts
    if len(parts) < 2 or parts[0].name.lower() != applied.name.lower():
        return node
    spelt = next((c for c in applied.columns if c.lower() == parts[1].name.lower()), None)
    if spelt is None:
        raise tr.refuse(node, f"{node.sql('tsql')}: the rows of {applied.call} have no {parts[1].name}",
                        f"read {applied.name}.{applied.columns[0]} or {applied.name}.{applied.columns[1]}")  # fmt: skip
    parts[0].set("this", applied.name)
    parts[1].set("this", spelt)
    return node


def check_declared_type(applied: AppliedField, stream: str, payload: dict[str, str] | None) -> None:
    """The applied field is declared in the side file with a type ``cross_apply`` turns into rows."""
    example = (
        "array<double> (array<struct<name:type,…>> for records)"
        if applied.kind == "elements"
        else "map<string,double> (or struct<name:type,…>, every field one type)"
    )
    typ = (payload or {}).get(applied.field)
    if typ is None:
        raise ConfigError(f"{applied.at}: {applied.call}: the type of {applied.field} is not declared,"
                          " and a query cannot tell it",
                          f"declare it in the side file (--inputs): inputs: {{{stream}: {{payload: {{"
                          f"{applied.field}: …, every other field}}}}}}, {applied.field} as {example}")  # fmt: skip
    fits = typ.startswith("array<") if applied.kind == "elements" else typ.startswith(("struct<", "map<string,"))
    if not fits:
        raise ConfigError(f"{applied.at}: {applied.call}: the side file declares {applied.field} {typ}",
                          f"declare it as {example} in inputs.{stream}.payload")  # fmt: skip
