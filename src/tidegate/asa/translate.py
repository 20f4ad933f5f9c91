"""A Stream Analytics query as the parts of a job spec: each ``SELECT`` one step, each clause
the field that computes the same rows (docs/reference/stream-analytics.md).

| query | spec |
|---|---|
| ``FROM input TIMESTAMP BY t OVER k`` | ``timestamp_by: t``, ``over: k`` |
| ``WHERE c`` | ``filter: c`` |
| ``GROUP BY k, TumblingWindow(minute, 1)`` | ``group_by: [k]``, ``window: {kind: tumbling, size: 1m}`` |
| ``COUNT(*) AS n`` and the other aggregates | ``aggregates: {n: count(*)}`` |
| ``HAVING AVG(t) > 30`` | ``having: avg_t > 30``, the aggregate by the name the SELECT gives it |
| ``System.Timestamp()`` in a windowed SELECT | the row's ``window_end`` |
| ``WITH a AS (…) SELECT … FROM a`` | ``steps``: the first step reads the input, each later one a step |

What has no translation here is refused with its line and column, the construct named and the
form to write instead; nothing is left out in silence. Expressions are written in Spark SQL
(sqlglot's ``spark`` generator), except ``DATEADD`` and ``DATEDIFF``, which the spec reads in
Stream Analytics' own form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp
from sqlglot.dialects.spark import Spark

from tidegate.asa.dialect import LimitDuration, TimestampBy, parse_query, position
from tidegate.asa.windows import window_name, window_spec
from tidegate.errors import ConfigError
from tidegate.jobspec.fields import BUILTIN_COLUMNS
from tidegate.jobspec.functions import AGGREGATE_FUNCTIONS, SCALAR_FUNCTIONS

GUIDE = "docs/guide/coming-from-stream-analytics.md"
REFUSED_CALLS = {  # Stream Analytics' functions without a Spark function of their name: what to write
    "getarrayelement": "element_at(a, i + 1)",
    "getarraylength": "size(a)",
    "getrecordpropertyvalue": "r.name",
    "topone": "max_by(struct(…), x) under aggregates",
    "collecttop": "max_by(struct(…), x) under aggregates",
    "collect": "collect_list(struct(…)) under aggregates",
    "udf": "a Spark built-in (a spec calls no user functions)",
}
_SPARK_NAMES = frozenset(n.lower() for n in SCALAR_FUNCTIONS | AGGREGATE_FUNCTIONS)


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
    input_name: str
    output_name: str | None
    steps: list[Step]
    timestamp_by: str | None = None
    over: str | None = None
    time_lines: dict[str, str] = field(default_factory=dict)
    numeric_fields: set[str] = field(default_factory=set)  # fields the query computes with
    fields_read: list[str] = field(default_factory=list)  # every input field the query reads, in order


class _Translator:
    def __init__(self, text: str, origin: str) -> None:
        self.text, self.origin = text, origin

    # -- errors -------------------------------------------------------------------------
    def refuse(self, node: exp.Expr, problem: str, fix: str) -> ConfigError:
        line, col = position(node, self.text)
        return ConfigError(f"{self.origin}:{line}:{col}: {problem}", f"{fix} (the forms translated: {GUIDE})")

    def where(self, node: exp.Expr, what: str) -> str:
        """``line N: <that line of the query>`` (``what`` when the node has no position)."""
        line, _ = position(node, self.text)
        if not line:
            return what
        source = " ".join(self.text.splitlines()[line - 1].split())
        return f"line {line}: {source if len(source) <= 72 else source[:71] + '…'}"

    # -- the query ------------------------------------------------------------------------
    def translate(self) -> Translation:
        statements = parse_query(self.text, self.origin)
        if not statements:
            raise ConfigError(f"{self.origin}: the query is empty", "write SELECT … INTO output FROM input …")
        if len(statements) > 1:
            raise self.refuse(
                statements[1],
                "a second statement: several SELECT … INTO in one query are not translated yet",
                "import one SELECT … INTO per job, or write the steps and sinks.outputs by hand"
                " (jobspec.md#named-outputs)",
            )
        main = statements[0]
        if not isinstance(main, exp.Select):
            raise self.refuse(main, f"{type(main).__name__.upper()} is not a query Tidegate runs", "write SELECT …")
        selects: list[tuple[str | None, exp.Select, exp.Expr]] = []
        for cte in (main.args.get("with_") or exp.With(expressions=[])).expressions:
            if not isinstance(cte.this, exp.Select):
                raise self.refuse(cte, "a WITH step that is not one SELECT (UNION?)", "UNION is not supported")
            selects.append((cte.alias, cte.this, cte))
        into = main.args.get("into")
        output = into.this.name if into is not None else None
        selects.append((None, main, main))
        result = Translation(input_name="", output_name=output, steps=[])
        for name, select, node in selects:
            self._refuse_clauses(select, into if select is main else None)
            reads = self._from(select, result)
            known = [s.name for s in result.steps]
            if not result.steps and reads in known:
                raise self.refuse(node, "unreachable", "")
            if name is None and result.steps and _passes_through(select) and reads == result.steps[-1].name:
                break  # SELECT * INTO out FROM last: the output is that step
            step = Step(name=name or _step_name(output, known), reads=reads)
            if result.steps and reads != result.steps[-1].name:
                raise self.refuse(
                    select.args["from_"],
                    f"FROM {reads}: a step reads the step just before it",
                    "steps form one chain (jobspec.md#steps): two steps reading one step, or a later step "
                    "reading the input, are not supported",
                )
            self._body(select, step, first=not result.steps, result=result)
            result.steps.append(step)
        return result

    def _refuse_clauses(self, select: exp.Select, into: exp.Expr | None) -> None:
        refused = {
            "joins": ("JOIN is not translated yet", "write inputs and join by hand (jobspec.md#inputs-and-join)"),
            "distinct": ("SELECT DISTINCT is not supported", "group by the columns in a window instead"),
            "order": ("ORDER BY is not supported", "output rows are in window order already"),
            "limit": ("TOP/LIMIT is not supported", "remove it"),
            "laterals": ("CROSS APPLY is not supported", "one event gives one row"),
        }
        for key, (problem, fix) in refused.items():
            value = select.args.get(key)
            if value:
                raise self.refuse(value[0] if isinstance(value, list) else value, problem, fix)
        if select.args.get("into") is not None and into is None:
            raise self.refuse(select.args["into"], "INTO inside a WITH step", "write INTO in the last SELECT")

    def _from(self, select: exp.Select, result: Translation) -> str:
        source = select.args.get("from_")
        if source is None:
            raise self.refuse(select, "a SELECT without FROM", "write FROM input")
        table = source.this
        timing = None
        if isinstance(table, TimestampBy):
            timing, table = table, table.this
        if not isinstance(table, exp.Table) or table.args.get("db"):
            raise self.refuse(source, "FROM reads something that is no input or step", "write FROM input_name")
        name = table.name
        if not result.steps:
            result.input_name = name
            self.input_alias = table.alias_or_name
            if timing is not None:
                self._time(timing, result)
        elif timing is not None:
            raise self.refuse(
                timing, "TIMESTAMP BY on a step", "a step's rows are timed by their System.Timestamp; time the input"
            )
        elif name == result.input_name:
            raise self.refuse(source, f"FROM {name}: a later step reads the input", "steps form one chain")
        return name

    def _time(self, timing: TimestampBy, result: Translation) -> None:
        time = timing.expression
        if isinstance(time, exp.Column) and not time.table:
            result.timestamp_by = time.name
        else:
            result.timestamp_by = self.expression(time, windowed=False)
        result.time_lines["timestamp_by"] = self.where(timing.expression, f"TIMESTAMP BY {time.sql('tsql')}")
        over = timing.args.get("over")
        if over is not None:
            if not isinstance(over, exp.Column):
                raise self.refuse(over, "TIMESTAMP BY … OVER takes one field", "write OVER deviceId")
            result.over = over.name
            result.time_lines["over"] = self.where(over, f"OVER {over.name}")
        self._note_fields(time, result)

    # -- one SELECT -------------------------------------------------------------------------
    def _body(self, select: exp.Select, step: Step, first: bool, result: Translation) -> None:
        if first:
            self._note_fields(select, result)
        group = select.args.get("group")
        keys = list(group.expressions) if group is not None else []
        windows = [k for k in keys if window_name(k)]
        where = select.args.get("where")
        if where is not None:
            step.fields["filter"] = self.expression(where.this, windowed=False)
            step.lines["filter"] = self.where(where, "WHERE")
        if len(windows) > 1:
            raise self.refuse(windows[1], "two windows in one GROUP BY", "one window per step")
        if not windows:
            if keys:
                raise self.refuse(keys[0], "GROUP BY without a window", "add a window: GROUP BY k, TumblingWindow(…)")
            if not first:
                raise self.refuse(
                    select,
                    f"step {step.name} reads a step and has no window",
                    "a later step is a window (jobspec.md#steps)",
                )
            if select.args.get("having") is not None:
                raise self.refuse(select.args["having"], "HAVING without a window", "use WHERE")
            self._per_event(select, step)
            return
        window = windows[0]
        step.fields["window"] = window_spec(window, self.refuse)
        step.lines["window"] = self.where(window, window.sql("tsql"))
        named = {k.name.lower() for k in keys if isinstance(k, exp.Column)}
        if isinstance(window, exp.Window):
            parts = window.args.get("partition_by") or []
            if not all(isinstance(p, exp.Column) and p.name.lower() in named for p in parts):
                raise self.refuse(
                    window, "SessionWindow … OVER (PARTITION BY …) over a key that is not grouped by",
                    "group by the same keys: Tidegate's sessions are per group",
                )  # fmt: skip
        self._windowed(select, step, [k for k in keys if k is not window])

    def _per_event(self, select: exp.Select, step: Step) -> None:
        columns: dict[str, str] = {}
        for item in select.expressions:
            if isinstance(item, exp.Star):
                if len(select.expressions) > 1:
                    raise self.refuse(item, "* beside other columns", "list the columns, or write * alone")
                step.notes.append(
                    self.where(item, "SELECT *: every payload field, with partition, offset, system_time")
                )
                return
            value = item.this if isinstance(item, exp.Alias) else item
            if _is_timestamp(value):
                step.notes.append(self.where(item, "System.Timestamp(): every row carries it as system_time"))
                continue
            if isinstance(value, exp.Window):
                raise self.refuse(
                    value, "an analytic function (LAG, LAST, ISFIRST … OVER) is not translated yet",
                    "write it under analytics: (jobspec.md#analytics)",
                )  # fmt: skip
            if value.find(exp.AggFunc):
                raise self.refuse(value, "an aggregate without a window", "add GROUP BY …, TumblingWindow(…)")
            columns[self._output_name(item)] = self.expression(value, windowed=False)
        step.fields["select"] = columns
        step.lines["select"] = self.where(select, "SELECT")

    def _windowed(self, select: exp.Select, step: Step, keys: list[exp.Expr]) -> None:
        aggregates: dict[str, str] = {}
        renamed: dict[str, str] = {}  # a key selected under another name: that name
        key_sql = {k.sql("tsql").lower(): k for k in keys}
        for item in select.expressions:
            value = item.this if isinstance(item, exp.Alias) else item
            if isinstance(value, exp.Star):
                raise self.refuse(item, "SELECT * in a windowed query", "select the group keys and aggregates")
            if _is_timestamp(value):
                name = item.alias if isinstance(item, exp.Alias) else "window_end"
                step.notes.append(self.where(item, f"System.Timestamp() AS {name}: the window's end, window_end"))
                continue
            if value.sql("tsql").lower() in key_sql:
                if isinstance(item, exp.Alias) and item.alias != getattr(value, "name", None):
                    renamed[value.sql("tsql").lower()] = item.alias
                continue
            if not value.find(exp.AggFunc) and not _anonymous_aggregate(value):
                raise self.refuse(
                    value, f"{value.sql('tsql')} is neither a group key nor an aggregate",
                    "group by it, or aggregate it (MAX, AVG …)",
                )  # fmt: skip
            aggregates[self._output_name(item)] = self.expression(value, windowed=False)
        group_by: list[Any] = []
        for key in keys:
            alias = renamed.get(key.sql("tsql").lower())
            if isinstance(key, exp.Column) and not key.table and alias is None:
                group_by.append(key.name)
            elif alias is not None:
                group_by.append({alias: self.expression(key, windowed=False)})
            else:
                raise self.refuse(
                    key, f"GROUP BY {key.sql('tsql')} has no name", f"select it with a name: {key.sql('tsql')} AS name"
                )
        if group_by:
            step.fields["group_by"] = group_by
            step.lines["group_by"] = self.where(keys[0], "GROUP BY")
        if not aggregates:
            raise self.refuse(select, "a windowed SELECT without an aggregate", "add e.g. COUNT(*) AS events")
        step.fields["aggregates"] = aggregates
        first_aggregate = next(i for i in select.expressions if self._output_name(i) in aggregates)
        step.lines["aggregates"] = self.where(first_aggregate, "SELECT")
        having = select.args.get("having")
        if having is not None:
            names = {v.lower(): k for k, v in aggregates.items()}
            step.fields["having"] = self._having(having.this, names, renamed)
            step.lines["having"] = self.where(having, "HAVING")

    def _having(self, condition: exp.Expr, aggregates: dict[str, str], renamed: dict[str, str]) -> str:
        """HAVING over the window row: each aggregate by the name the SELECT gives it."""

        def by_name(node: exp.Expr) -> exp.Expr:
            if _is_timestamp(node):
                return exp.column("window_end")
            if node.sql("tsql").lower() in renamed:
                return exp.column(renamed[node.sql("tsql").lower()])
            if isinstance(node, exp.AggFunc) or _anonymous_aggregate(node):
                name = aggregates.get(self.expression(node, windowed=False).lower())
                if name is None:
                    raise self.refuse(
                        node, f"HAVING computes {node.sql('tsql')}, which the SELECT does not",
                        f"select it with a name ({node.sql('tsql')} AS name) and compare the name",
                    )  # fmt: skip
                return exp.column(name)
            return node

        return self.expression(condition.copy().transform(by_name), windowed=True)

    # -- expressions ------------------------------------------------------------------------
    def expression(self, node: exp.Expr, windowed: bool) -> str:
        """``node`` as a spec expression (Spark SQL), once every part has a Spark form."""
        for part in node.walk():
            if isinstance(part, (exp.Subquery, exp.Select)):
                raise self.refuse(part, "a subquery", "a job reads its events, not tables: use a step (WITH)")
            if isinstance(part, (exp.Window, LimitDuration)):
                raise self.refuse(part, "OVER inside an expression", "analytic functions go under analytics:")
            if _is_timestamp(part) and not windowed:
                raise self.refuse(
                    part, "System.Timestamp() here", "it is a window row's window_end; a per-event row's system_time"
                )
            if isinstance(part, exp.Anonymous) and _is_timestamp(part.parent):
                continue
            if isinstance(part, exp.Anonymous) and str(part.this).lower() not in _SPARK_NAMES:
                hint = REFUSED_CALLS.get(
                    str(part.this).lower(), "a Spark built-in on the allowlist (jobspec.md#functions)"
                )
                raise self.refuse(part, f"{part.this}() has no Tidegate form here", f"write {hint}")
        node = node.copy().transform(self._unqualified)
        return _SparkAsa().generate(node)

    def _unqualified(self, node: exp.Expr) -> exp.Expr:
        """``i.deviceId`` where ``i`` is the input's alias is ``deviceId``."""
        if isinstance(node, exp.Column) and node.table and node.table == getattr(self, "input_alias", None):
            return exp.column(node.name)
        return node

    def _output_name(self, item: exp.Expr) -> str:
        if isinstance(item, exp.Alias):
            return item.alias
        if isinstance(item, exp.Column):
            return item.name
        raise self.refuse(item, f"{item.sql('tsql')} has no name", f"write {item.sql('tsql')} AS name")

    def _note_fields(self, node: exp.Expr, result: Translation) -> None:
        """The input fields ``node`` reads (for a payload inferred from the query), and which
        of them it computes with."""
        aliases = {a.alias.lower() for a in node.find_all(exp.Alias)}
        for column in node.find_all(exp.Column):
            if column.table and column.table != getattr(self, "input_alias", None):
                continue  # a nested field (record.field): not a payload field of its own
            if column.parent is None:
                continue
            if window_name(column.parent) or isinstance(column.parent, exp.Anonymous) and column.parent.name in (
                "Duration", "Offset",
            ):  # fmt: skip
                continue  # a window's unit
            name = column.name
            if name.lower() in aliases or name in BUILTIN_COLUMNS or name in result.fields_read:
                continue
            result.fields_read.append(name)
        for column in node.find_all(exp.Column):
            parent = column.parent
            compared = isinstance(parent, (exp.GT, exp.GTE, exp.LT, exp.LTE)) and any(
                isinstance(side, exp.Literal) and not side.is_string for side in (parent.this, parent.expression)
            )
            if isinstance(parent, _NUMERIC_PARENTS) or compared:
                result.numeric_fields.add(column.name)


_NUMERIC_PARENTS = (exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Stddev, exp.Variance, exp.Add, exp.Sub, exp.Mul, exp.Div)


class _SparkAsa(Spark.Generator):  # type: ignore[misc,valid-type]
    """Spark SQL, with ``DATEADD`` and ``DATEDIFF`` in Stream Analytics' form, which the spec
    reads so (sqlglot's own Spark forms count days)."""

    TRANSFORMS = {
        **Spark.Generator.TRANSFORMS,
        exp.DateAdd: lambda self, e: self.func("DATEADD", e.unit, e.expression, e.this),
        exp.DateDiff: lambda self, e: self.func("DATEDIFF", e.unit, e.expression, e.this),
    }


def _is_timestamp(node: Any) -> bool:
    """``System.Timestamp()``."""
    return (
        isinstance(node, exp.Dot)
        and isinstance(node.this, exp.Identifier)
        and node.this.name.lower() == "system"
        and isinstance(node.expression, exp.Anonymous)
        and str(node.expression.this).lower() == "timestamp"
    )


def _anonymous_aggregate(node: exp.Expr) -> bool:
    return isinstance(node, exp.Anonymous) and str(node.this).lower() in AGGREGATE_FUNCTIONS


def _passes_through(select: exp.Select) -> bool:
    return (
        len(select.expressions) == 1
        and isinstance(select.expressions[0], exp.Star)
        and not any(select.args.get(k) for k in ("where", "group", "having"))
    )


def _step_name(output: str | None, taken: list[str]) -> str:
    name = (output or "result").lower()
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in name).lstrip("_0123456789") or "result"
    return name if name not in taken else name + "_out"


def translate(text: str, origin: str) -> Translation:
    """The query ``text`` (read from ``origin``, which errors name) as spec parts."""
    return _Translator(text, origin).translate()
