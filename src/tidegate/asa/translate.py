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
| ``LAG``, ``LAST``, ``ISFIRST`` … ``OVER (…)`` | ``analytics`` (:mod:`tidegate.asa.analytics`) |
| ``JOIN`` of two streams, of reference data | ``inputs`` and ``join``, ``reference`` (:mod:`tidegate.asa.joins`) |
| ``CROSS APPLY GetArrayElements(e.f) AS a`` | ``cross_apply`` (:mod:`tidegate.asa.cross_apply`) |
| ``GetMetadataPropertyValue(input, '[User].[h]')`` | ``headers['h']``, … (:mod:`tidegate.asa.metadata`) |

What has no translation here is refused with its line and column, the construct named and the
form to write instead; nothing is left out in silence. Expressions are written in Spark SQL
(sqlglot's ``spark`` generator), except ``DATEADD`` and ``DATEDIFF``, which the spec reads in
Stream Analytics' own form.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlglot import exp

from tidegate.asa.analytics import AnalyticColumns, analytic_name
from tidegate.asa.cross_apply import applied_column, applied_lateral, read_apply
from tidegate.asa.dialect import LimitDuration, TimestampBy, parse_query, position
from tidegate.asa.expressions import (
    NUMERIC_PARENTS,
    REFUSED_CALLS,
    SPARK_NAMES,
    SparkAsa,
    is_timestamp,
)
from tidegate.asa.joins import read_join
from tidegate.asa.metadata import is_metadata, metadata_column
from tidegate.asa.parts import AppliedField, Step, StreamInput, Translation
from tidegate.asa.statements import statement_steps, steps_read
from tidegate.asa.top import is_top
from tidegate.asa.windowed import windowed_step
from tidegate.asa.windows import window_name, window_spec
from tidegate.errors import ConfigError
from tidegate.jobspec.fields import BUILTIN_COLUMNS

GUIDE = "docs/guide/coming-from-stream-analytics.md"


class _Translator:
    def __init__(
        self, text: str, origin: str, references: frozenset[str], payloads: Mapping[str, list[str]] | None = None
    ) -> None:
        self.text, self.origin, self.references = text, origin, references
        self.payloads = payloads or {}  # an input's name (lower case) → its payload fields, from the side file
        self.aliases: dict[str, str] = {}  # an input's alias (lower case) → its name in expressions ('' : none)
        self.join: dict[str, Any] | None = None  # the spec's join, for a join of two streams
        self.on_filters: list[exp.Expr] = []  # conditions of an inner join's ON beside keys and bound
        self.analytics: AnalyticColumns | None = None  # the analytic calls of the SELECT being read
        self.applied: AppliedField | None = None  # the field CROSS APPLY turns into rows

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
    def chain(self, ctes: list[tuple[str, exp.Select, exp.Expr]], main: exp.Select) -> Translation:
        """The steps of ``main`` (a ``SELECT … INTO``) with the ``WITH`` steps ``ctes`` it reads."""
        into = main.args.get("into")
        output = into.this.name if into is not None else None
        selects: list[tuple[str | None, exp.Select, exp.Expr]] = [*ctes, (None, main, main)]
        result = Translation(output_name=output, steps=[])
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
                    "reading the input, are not supported in one SELECT … INTO's steps",
                )
            self._body(select, step, first=not result.steps, result=result)
            result.steps.append(step)
        if result.cross_apply is not None and len(result.steps) > 1:
            raise self.refuse(
                selects[0][1].args["joins"][0], "CROSS APPLY in a query of steps: cross_apply cannot be combined"
                " with steps", "flatten and aggregate in one SELECT, or flatten in one job and read it in a second",
            )  # fmt: skip
        return result

    def _refuse_clauses(self, select: exp.Select, into: exp.Expr | None) -> None:
        refused = {
            "distinct": ("SELECT DISTINCT is not supported", "group by the columns in a window instead"),
            "order": ("ORDER BY is not supported", "output rows are in window order already"),
            "limit": ("TOP/LIMIT is not supported", "remove it"),
            "laterals": ("LATERAL is not supported", "write CROSS APPLY GetArrayElements(e.field) AS a"),
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
        lateral = applied_lateral(self, select, later=bool(result.steps))
        if select.args.get("joins") and lateral is None:
            if result.steps:
                raise self.refuse(select.args["joins"][0], "JOIN in a later step", "join in the first SELECT")
            return read_join(self, select, result, self.references)
        table = source.this
        timing = None
        if isinstance(table, TimestampBy):
            timing, table = table, table.this
        if not isinstance(table, exp.Table) or table.args.get("db"):
            raise self.refuse(source, "FROM reads something that is no input or step", "write FROM input_name")
        name = table.name
        if not result.steps:
            if name.lower() in self.references:
                raise self.refuse(table, f"FROM {name}: reference data alone", "join it: FROM stream JOIN {name} ON …")
            result.inputs.append(StreamInput(name))
            self.aliases = {table.alias_or_name.lower(): ""}
            if timing is not None:
                self.time(timing, result.inputs[0])
            if lateral is not None:
                self.applied = result.cross_apply = read_apply(self, lateral)
        elif timing is not None:
            raise self.refuse(
                timing, "TIMESTAMP BY on a step", "a step's rows are timed by their System.Timestamp; time the input"
            )
        elif name == result.input_name:
            raise self.refuse(source, f"FROM {name}: a later step reads the input", "steps form one chain")
        return name

    def time(self, timing: TimestampBy, stream: StreamInput) -> None:
        """``stream``'s ``timestamp_by`` and ``over`` from its ``TIMESTAMP BY … [OVER k]``."""
        time = timing.expression
        if isinstance(time, exp.Column) and not time.table:
            stream.timestamp_by = time.name
        else:
            stream.timestamp_by = self.expression(time, windowed=False)
        stream.time_lines["timestamp_by"] = self.where(timing.expression, f"TIMESTAMP BY {time.sql('tsql')}")
        over = timing.args.get("over")
        if over is not None:
            if not isinstance(over, exp.Column):
                raise self.refuse(over, "TIMESTAMP BY … OVER takes one field", "write OVER deviceId")
            if self.join is not None or len(self.aliases) > 1 and "" not in self.aliases.values():
                raise self.refuse(over, "TIMESTAMP BY … OVER in a join", "remove OVER: a join has one watermark")
            stream.over = over.name
            stream.time_lines["over"] = self.where(over, f"OVER {over.name}")
        self._note_fields(time, stream)

    # -- one SELECT -------------------------------------------------------------------------
    def _body(self, select: exp.Select, step: Step, first: bool, result: Translation) -> None:
        if first:
            self._note_fields(select, result)
        group = select.args.get("group")
        keys = list(group.expressions) if group is not None else []
        windows = [k for k in keys if window_name(k)]
        self.analytics = self._analytics(select, step, first, result, windowed=bool(windows))
        if first and (self.join is not None or result.reference is not None) and windows:
            raise self.refuse(
                windows[0], "a window in the SELECT that joins",
                "join in a WITH step and window that step: WITH j AS (SELECT … JOIN …) SELECT … FROM j GROUP BY …",
            )  # fmt: skip
        if first and self.applied is not None:
            step.fields["cross_apply"] = self.applied.spec()
            step.lines["cross_apply"] = self.where(select.args["joins"][0], "CROSS APPLY")
        if first and self.join is not None:
            step.fields["join"] = self.join
            step.lines["join"] = self.where(select.args["joins"][0], "JOIN")
        where = select.args.get("where")
        conditions = ([where.this] if where is not None else []) + (self.on_filters if first else [])
        if conditions:
            joined = conditions[0] if len(conditions) == 1 else exp.and_(*(exp.paren(c) for c in conditions))
            step.fields["filter"] = self.expression(joined, windowed=False)
            step.lines["filter"] = self.where(where if where is not None else conditions[0], "WHERE")
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
            if self.analytics is not None and self.analytics.columns:
                step.fields["analytics"] = dict(self.analytics.columns)
                step.lines["analytics"] = self.where(self.analytics.first or select, "OVER")
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
        whole = self.payloads.get(result.input_name.lower()) if first and len(result.inputs) == 1 else None
        windowed_step(self, select, step, [k for k in keys if k is not window], whole)

    def _analytics(
        self, select: exp.Select, step: Step, first: bool, result: Translation, windowed: bool
    ) -> AnalyticColumns | None:
        """The SELECT's analytic calls, named: None when it has none."""
        calls = [n for n in select.walk(prune=lambda n: isinstance(n, exp.With)) if analytic_name(n)]
        if not calls:
            return None
        problem = (
            "an analytic function in a windowed SELECT" if windowed
            else "an analytic function in a later step" if not first
            else "an analytic function in a join" if self.join is not None or result.reference is not None
            else None
        )  # fmt: skip
        if self.applied is not None:
            raise self.refuse(
                calls[0], "an analytic function beside CROSS APPLY: cross_apply cannot be combined with analytics",
                "compute it in one job and CROSS APPLY that job's output in a second",
            )  # fmt: skip
        if problem:
            raise self.refuse(
                calls[0], problem, "compute it in the first SELECT, which reads the input alone and has no window"
                " (WITH a AS (SELECT …, LAG(…) OVER (…) AS p FROM input) SELECT … FROM a GROUP BY …)",
            )  # fmt: skip
        taken = {f.lower() for f in result.inputs[0].fields_read} | {a.alias.lower() for a in select.expressions
                                                                    if isinstance(a, exp.Alias)}  # fmt: skip
        whole = self.payloads.get(result.input_name.lower()) if len(result.inputs) == 1 else None
        columns = AnalyticColumns(self.refuse, lambda n: self.expression(n, windowed=False), taken, whole)
        columns.first = calls[0]
        for item in select.expressions:
            if isinstance(item, exp.Alias) and analytic_name(item.this):
                columns.name(item)
        return columns

    def _per_event(self, select: exp.Select, step: Step) -> None:
        columns: dict[str, str] = {}
        for item in select.expressions:
            if isinstance(item, exp.Star):
                if self.join is not None:
                    raise self.refuse(item, "SELECT * in a join of two streams", "list the columns: orders.id AS id")
                if len(select.expressions) > 1:
                    raise self.refuse(item, "* beside other columns", "list the columns, or write * alone")
                step.notes.append(
                    self.where(item, "SELECT *: every payload field, with partition, offset, system_time")
                )
                return
            value = item.this if isinstance(item, exp.Alias) else item
            if is_timestamp(value):
                step.notes.append(self.where(item, "System.Timestamp(): every row carries it as system_time"))
                continue
            if (self.analytics.replace(value) if self.analytics else value).find(exp.AggFunc):
                raise self.refuse(value, "an aggregate without a window", "add GROUP BY …, TumblingWindow(…)")
            name = self.output_name(item)
            if name in columns:
                raise self.refuse(item, f"two columns named {name}", f"name one of them: … AS other_{name}")
            columns[name] = self.expression(value, windowed=False)
        step.fields["select"] = columns
        step.lines["select"] = self.where(select, "SELECT")

    # -- expressions ------------------------------------------------------------------------
    def expression(self, node: exp.Expr, windowed: bool) -> str:
        """``node`` as a spec expression (Spark SQL), once every part has a Spark form; an
        analytic call is its column under ``analytics``."""
        if self.analytics is not None:
            node = self.analytics.replace(node)
        node = node.copy().transform(self._metadata)
        for part in node.walk():
            if isinstance(part, (exp.Subquery, exp.Select)):
                raise self.refuse(part, "a subquery", "a job reads its events, not tables: use a step (WITH)")
            if isinstance(part, exp.Window) and is_top(part):  # a windowed SELECT's is an aggregate, not here
                name = "CollectTop" if str(part.this.this).lower() == "collecttop" else "TopOne"
                raise self.refuse(
                    part, f"{name} on each event without LIMIT DURATION",
                    f"write {name}(…) OVER ([PARTITION BY k] ORDER BY o LIMIT DURATION(unit, n)), or OVER (ORDER BY o) "
                    "in a windowed SELECT",
                )  # fmt: skip
            if isinstance(part, (exp.Window, LimitDuration)):
                raise self.refuse(part, "OVER inside an expression", "analytic functions go under analytics:")
            if is_timestamp(part) and not windowed:
                raise self.refuse(
                    part, "System.Timestamp() here", "it is a window row's window_end; a per-event row's system_time"
                )
            if isinstance(part, exp.Anonymous) and is_timestamp(part.parent):
                continue
            if isinstance(part, exp.Anonymous) and str(part.this).lower() not in SPARK_NAMES:
                hint = REFUSED_CALLS.get(
                    str(part.this).lower(), "a Spark built-in on the allowlist (jobspec.md#functions)"
                )
                raise self.refuse(part, f"{part.this}() has no Tidegate form here", f"write {hint}")
        node = node.copy().transform(self._unqualified)
        return SparkAsa(dialect="spark").generate(node)

    def _metadata(self, node: exp.Expr) -> exp.Expr:
        """``GetMetadataPropertyValue(input, 'p')`` as the built-in column it reads (:mod:`tidegate.asa.metadata`)."""
        if not is_metadata(node):
            return node
        if self.join is not None or len(self.aliases) != 1:
            raise self.refuse(node, "GetMetadataPropertyValue in a join", "read the metadata in a job of its own")
        assert isinstance(node, exp.Anonymous)  # is_metadata says so
        return metadata_column(node, self.aliases, self.refuse)

    def _unqualified(self, node: exp.Expr) -> exp.Expr:
        """``i.deviceId`` where ``i`` is the only input's alias is ``deviceId``; where ``o`` is
        the alias of a joined input ``orders``, ``o.id`` is ``orders.id``."""
        if isinstance(node, exp.Column) and self.applied is not None:
            node = applied_column(self, self.applied, node)
        if isinstance(node, exp.Column) and node.table and node.table.lower() in self.aliases:
            name = self.aliases[node.table.lower()]
            return exp.column(node.name, table=name) if name else exp.column(node.name)
        return node

    def output_name(self, item: exp.Expr) -> str:
        if isinstance(item, exp.Alias):
            return item.alias
        if isinstance(item, exp.Column):
            return item.name
        raise self.refuse(item, f"{item.sql('tsql')} has no name", f"write {item.sql('tsql')} AS name")

    def _note_fields(self, node: exp.Expr, into: Translation | StreamInput) -> None:
        """The input fields ``node`` reads (for a payload inferred from the query), and which
        of them it computes with: a column by its alias, an unqualified one of the only input."""
        streams = {s.name: s for s in (into.inputs if isinstance(into, Translation) else [into])}
        aliases = {a.alias.lower() for a in node.find_all(exp.Alias)}
        for column in node.find_all(exp.Column):
            owner = self.aliases.get(column.table.lower()) if column.table else ""
            stream = streams.get(owner) if owner else (next(iter(streams.values())) if len(streams) == 1 else None)
            if stream is None or owner is None or column.parent is None:
                continue  # a nested field (record.field), reference data, or a bare field of a join
            if (
                window_name(column.parent)
                or isinstance(column.parent, exp.Anonymous)
                and str(column.parent.name).lower() in ("duration", "offset", "isfirst")
            ):
                continue  # a window's or ISFIRST's unit
            name = column.name
            if column.name.lower() in self.aliases and not column.table:
                continue  # DATEDIFF(unit, a, b)'s inputs
            if (name.lower() in aliases and not column.table) or name in BUILTIN_COLUMNS:
                continue
            if name not in stream.fields_read:
                stream.fields_read.append(name)
            parent = column.parent
            compared = isinstance(parent, (exp.GT, exp.GTE, exp.LT, exp.LTE)) and any(
                isinstance(side, exp.Literal) and not side.is_string for side in (parent.this, parent.expression)
            )
            if isinstance(parent, NUMERIC_PARENTS) or compared:
                stream.numeric_fields.add(column.name)


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


def translate(
    text: str, origin: str, references: frozenset[str] = frozenset(), payloads: Mapping[str, list[str]] | None = None
) -> list[Translation]:
    """The query ``text`` (read from ``origin``, which errors name) as spec parts, one
    :class:`Translation` per ``SELECT … INTO`` (:mod:`tidegate.asa.outputs` joins them into as few
    jobs as hold them); ``references`` names the inputs that are reference data (the side file's
    ``type: Reference``), ``payloads`` each input's payload fields (lower-case name; what
    ``TopOne()``, ``CollectTop(n)`` and ``LAG(*)`` return). A query nested past what the
    parser's recursion reaches is refused, not a traceback."""
    refs = frozenset(r.lower() for r in references)
    fields = {k.lower(): v for k, v in (payloads or {}).items()}
    try:
        statements = parse_query(text, origin)
        probe = _Translator(text, origin, refs, fields)
        if not statements:
            raise ConfigError(f"{origin}: the query is empty", "write SELECT … INTO output FROM input …")
        selects, ctes = statement_steps(statements, probe.refuse)
        if len(selects) == 1:
            return [_Translator(text, origin, refs, fields).chain(ctes, selects[0])]
        return [
            _Translator(text, origin, refs, fields).chain([c for c in ctes if c[0].lower() in needed], main)
            for main, needed in steps_read(selects, ctes, probe.refuse)
        ]
    except RecursionError:
        raise ConfigError(
            f"{origin}: the query is nested too deeply to read",
            "a query is a few levels deep: look for runaway parentheses or nested subqueries",
        ) from None
