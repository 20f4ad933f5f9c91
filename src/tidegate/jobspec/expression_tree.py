"""A spec expression read as a parse tree: what it may be made of, and how much it may build.

Job specs are written by job authors, not administrators, and their expressions run inside
the platform's Spark sessions. Finding calls in the token stream
(:mod:`tidegate.jobspec.expressions`) says which functions an expression calls; this module
says what the expression *is*. It parses the text with a Spark SQL grammar (sqlglot's
``spark`` dialect: pure Python, so the controller and Airflow check specs without a JVM) and
holds every node of the tree to two rules:

* **What it is made of.** Every node is of a kind on :data:`ALLOWED_NODES`: columns,
  literals, operators, calls of functions, casts, ``CASE``, lambdas and the few clauses an
  aggregate takes (``FILTER (WHERE …)``, ``WITHIN GROUP (ORDER BY …)``, ``DISTINCT``).
  Anything that reads beyond the event — a subquery in any form (``SELECT``, ``FROM``-first,
  ``TABLE``, ``VALUES``, ``EXISTS``, ``IN (…)``), a table or file, a table-valued function,
  a window (``OVER``), a parameter or a session variable — is refused, naming the field, the
  construct and what to write instead. Text the grammar cannot read is refused too: what is
  not understood is not run.
* **How much it builds.** One event must not make a gigabyte. The functions whose result
  size is an argument (``sequence``, ``repeat``, ``array_repeat``, ``space``, ``lpad``,
  ``rpad``, ``array_insert``'s position, ``format_string``/``printf`` widths,
  ``format_number``'s digits) take it as an integer literal within :data:`MAX_BUILT`; the
  folds (``aggregate``, ``reduce``), whose accumulator can double per element, are refused;
  a lambda's body computes from its own parameters and literals only, with no builder or
  lambda inside it. Together these bound what an expression allocates by its own length
  times the event's size plus :data:`MAX_BUILT`.

The grammar is not Spark's own, so it is never the only gate: the token checks of
:mod:`tidegate.jobspec.expressions` run first (and refuse ``${``, comments and the words
that start a query), and every Spark session Tidegate builds parses each expression again
with Spark's parser before it runs (:mod:`tidegate.spark.expression_guard`) and turns
variable substitution and SQL on files off (:mod:`tidegate.spark.session`).
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from tidegate.errors import ConfigError
from tidegate.jobspec.functions import check_function

MAX_BUILT = 10_000  # elements or characters a size-bearing builder may make from one call
MAX_COLUMN_REPEAT = 16  # times repeat() may repeat a non-literal (a column's) text
MAX_FORMAT_DIGITS = 100  # format_number's decimal places

# -- what an expression may be made of ---------------------------------------------------
ALLOWED_NODES: tuple[type[exp.Expression], ...] = (
    exp.Column, exp.Identifier, exp.Literal, exp.Null, exp.Boolean, exp.Star, exp.Var,
    exp.DataType, exp.DataTypeParam, exp.ColumnDef,  # cast(x AS struct<a: decimal(10, 2)>)
    exp.Interval, exp.Bracket, exp.Tuple, exp.In, exp.Between, exp.Lambda,
    exp.Filter, exp.Where,  # count(*) FILTER (WHERE …)
    exp.WithinGroup, exp.Order, exp.Ordered,  # percentile_cont(0.5) WITHIN GROUP (ORDER BY t)
    exp.IgnoreNulls, exp.RespectNulls, exp.Distinct,
    exp.Any,  # x LIKE ANY ('a%', 'b%'); over a query it is refused below
    exp.JSONPath, exp.JSONPathPart,  # get_json_object(x, '$.a'): the path literal, read
    exp.Binary, exp.Unary,  # operators, comparisons, field access, parentheses, NOT, minus
    exp.Func,  # calls: their names are held to tidegate.jobspec.functions' allowlist
)  # EXISTS (…) over a query is refused through the query inside it; exists(xs, x -> …) is a call
# kinds refused although a base kind above would admit them, with what each is in words
_REFUSED_NODES: tuple[tuple[type[exp.Expression], str], ...] = (
    (exp.Query, "a subquery"),
    (exp.Subquery, "a subquery"),
    (exp.Table, "a table or file"),
    (exp.From, "a FROM clause"),
    (exp.UDTF, "a table-valued function"),
    (exp.Window, "a window function (OVER …)"),
    (exp.Placeholder, "a parameter"),
    (exp.Parameter, "a parameter"),
    (exp.SessionParameter, "a session variable"),
)
_SUBQUERY_FIX = (
    "compute from the event's own columns; a job reads its events, never tables or files"
    " (to enrich events, join another input); a payload field named like a keyword is written `in backticks`"
)


def check_tree(expr: str, where: str) -> None:
    """Parse ``expr`` (field ``where``) and hold its tree to this module's two rules.
    Raises ConfigError naming the field, the construct and the fix."""
    tree = _parse(expr, where)
    for node in tree.walk():
        _check_node(node, where, expr)
    for node in tree.find_all(exp.Lambda):
        _check_lambda(node, where, expr)


def _parse(expr: str, where: str) -> exp.Expression:
    try:
        tree = sqlglot.parse_one(expr, read="spark")
    except SqlglotError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(
            f"{where}: cannot read {expr!r} as a Spark SQL expression ({first[:200]})",
            "write one Spark SQL expression over the event's columns; check brackets, quotes and commas",
        ) from None
    if tree is None:
        raise ConfigError(f"{where}: the expression is empty", "write a Spark SQL expression, e.g. temperature > 30")
    return tree


def _check_node(node: exp.Expression, where: str, expr: str) -> None:
    for kind, what in _REFUSED_NODES:
        if isinstance(node, kind):
            raise ConfigError(f"{where}: {what} is not allowed in {expr!r}: subqueries are not allowed", _SUBQUERY_FIX)
    if isinstance(node, exp.Any) and not isinstance(node.this, (exp.Tuple, exp.Paren, exp.Literal)):
        raise ConfigError(f"{where}: ANY over a query is not allowed in {expr!r}: subqueries are not allowed", _SUBQUERY_FIX)
    if isinstance(node, exp.In) and (node.args.get("query") is not None or node.args.get("unnest") is not None):
        raise ConfigError(f"{where}: IN over a query is not allowed in {expr!r}: subqueries are not allowed", _SUBQUERY_FIX)
    if not isinstance(node, ALLOWED_NODES) or isinstance(node, exp.Alias):
        raise ConfigError(
            f"{where}: {_kind(node)} is not allowed in {expr!r}",
            "spec expressions are computed from the event's columns: operators, casts, CASE and"
            " Spark's built-in functions (docs/reference/jobspec.md, 'Functions')",
        )
    if isinstance(node, exp.Anonymous):  # a call the grammar does not know by name
        check_function(node.name.lower(), where, aggregates=True)
    _check_size(node, where, expr)


def _kind(node: exp.Expression) -> str:
    words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", type(node).__name__).lower()
    return f"{words!r} ({node.sql(dialect='spark')[:60]!r})"


# -- how much an expression may build ----------------------------------------------------


def _check_size(node: exp.Expression, where: str, expr: str) -> None:
    if isinstance(node, exp.Reduce):
        raise ConfigError(
            f"{where}: aggregate()/reduce() is not allowed in {expr!r}: its accumulator can grow without bound"
            " (concat(acc, acc) doubles it per element)",
            "use the array functions that return one value: array_max, array_min, array_join, size, filter, exists",
        )
    if isinstance(node, exp.GenerateSeries):
        _bounded_sequence(node, where, expr)
    elif isinstance(node, exp.Repeat):
        times = _literal_int(node.args.get("times"), "repeat", "its count", where, expr)
        text = node.this
        if isinstance(text, exp.Literal) and text.is_string:
            _within("repeat", len(text.this) * times, f"{len(text.this)} characters × {times}", where, expr)
        elif times > MAX_COLUMN_REPEAT:
            raise ConfigError(
                f"{where}: repeat() of a column more than {MAX_COLUMN_REPEAT} times is not allowed in {expr!r}:"
                " one event could build a string of any size",
                f"repeat a column at most {MAX_COLUMN_REPEAT} times, or repeat a literal up to {MAX_BUILT:,} characters",
            )
    elif isinstance(node, exp.Pad):
        _within(node.sql_name().lower(), _literal_int(node.expression, "lpad/rpad", "its length", where, expr),
                "its length", where, expr)
    elif isinstance(node, exp.Space):
        _within("space", _literal_int(node.this, "space", "its count", where, expr), "its count", where, expr)
    elif isinstance(node, exp.ArrayInsert):
        position = abs(_literal_int(node.args.get("position"), "array_insert", "its position", where, expr))
        _within("array_insert", position, "its position", where, expr)
    elif isinstance(node, exp.Format) or (isinstance(node, exp.Anonymous) and node.name.lower() == "printf"):
        fmt = node.this if isinstance(node, exp.Format) else (node.expressions or [None])[0]
        _bounded_format(fmt, where, expr)
    elif isinstance(node, exp.Anonymous) and node.name.lower() == "array_repeat":
        args = node.expressions
        count = _literal_int(args[1] if len(args) > 1 else None, "array_repeat", "its count", where, expr)
        _within("array_repeat", count, "its count", where, expr)
    elif isinstance(node, exp.Anonymous) and node.name.lower() == "format_number":
        args = node.expressions
        if len(args) > 1 and not (isinstance(args[1], exp.Literal) and args[1].is_string):
            digits = _literal_int(args[1], "format_number", "its decimal places", where, expr)
            if digits > MAX_FORMAT_DIGITS:
                raise ConfigError(
                    f"{where}: format_number() with {digits} decimal places is not allowed in {expr!r}",
                    f"ask for at most {MAX_FORMAT_DIGITS} decimal places",
                )


def _bounded_sequence(node: exp.GenerateSeries, where: str, expr: str) -> None:
    start = _literal_int(node.args.get("start"), "sequence", "its start", where, expr)
    end = _literal_int(node.args.get("end"), "sequence", "its stop", where, expr)
    step_node = node.args.get("step")
    step = _literal_int(step_node, "sequence", "its step", where, expr) if step_node is not None else (1 if end >= start else -1)
    count = 0 if step == 0 else (end - start) // step + 1
    _within("sequence", count, f"{count:,} elements", where, expr)


def _bounded_format(fmt: exp.Expression | None, where: str, expr: str) -> None:
    if not (isinstance(fmt, exp.Literal) and fmt.is_string):
        raise ConfigError(
            f"{where}: format_string()/printf() with a computed format is not allowed in {expr!r}:"
            " a width in it could build a string of any size",
            "write the format as a string literal, e.g. format_string('%05d', n)",
        )
    widths = [int(w) for w in re.findall(r"%[-#+ 0,(<]*(\d+)", fmt.this)]
    widths += [int(p) for p in re.findall(r"\.(\d+)", fmt.this)]
    if widths and max(widths) > MAX_BUILT:
        raise ConfigError(
            f"{where}: a width of {max(widths):,} in format_string()/printf() is not allowed in {expr!r}",
            f"widths and precisions up to {MAX_BUILT:,}",
        )


def _literal_int(node: exp.Expression | None, function: str, what: str, where: str, expr: str) -> int:
    value = node
    sign = 1
    while isinstance(value, (exp.Paren, exp.Neg)):
        sign = -sign if isinstance(value, exp.Neg) else sign
        value = value.this
    if isinstance(value, exp.Literal) and not value.is_string and re.fullmatch(r"\d+[LlSsYy]?", value.this):
        return sign * int(value.this.rstrip("LlSsYy"))
    raise ConfigError(
        f"{where}: {function}() takes {what} as an integer literal in {expr!r}: computed from an event,"
        " one event could build a result of any size",
        f"write {what} as a whole number up to {MAX_BUILT:,}",
    )


def _within(function: str, size: int, said: str, where: str, expr: str) -> None:
    if size > MAX_BUILT:
        raise ConfigError(
            f"{where}: {function}() would build more than {MAX_BUILT:,} elements or characters ({said}) in {expr!r}",
            f"keep what one call builds within {MAX_BUILT:,}",
        )


def _check_lambda(node: exp.Lambda, where: str, expr: str) -> None:
    params = {p.name.lower() for p in node.expressions}
    body = node.this
    for inner in body.walk():
        if inner is body and isinstance(inner, exp.Lambda):
            continue
        if isinstance(inner, exp.Lambda) or isinstance(
            inner, (exp.GenerateSeries, exp.Repeat, exp.Pad, exp.Space, exp.ArrayInsert, exp.Split, exp.Transform)
        ) or (isinstance(inner, exp.Anonymous) and inner.name.lower() in ("array_repeat", "str_to_map")):
            raise ConfigError(
                f"{where}: a lambda may not build arrays or strings or hold another lambda in {expr!r}:"
                " applied per element, it multiplies what one event builds",
                "compute each element from the lambda's own parameters, e.g. transform(xs, x -> x * 2)",
            )
        root = inner.parts[0].name if isinstance(inner, exp.Column) and inner.parts else ""
        if isinstance(inner, exp.Column) and root.lower() not in params:
            raise ConfigError(
                f"{where}: the lambda in {expr!r} reads the column {root!r}; a lambda's body reads only its"
                " own parameters",
                "compute the column's part outside the lambda, or filter first and compare after",
            )
