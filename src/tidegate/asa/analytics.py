"""Stream Analytics' analytic functions as the spec's ``analytics`` (jobspec.md#analytics).

``LAG(x[, n][, default])``, ``LAST(x)`` and ``ISFIRST(unit, n)`` with their ``OVER
([PARTITION BY k] [LIMIT DURATION(unit, n)] [WHEN c])``, and the aggregates over a duration
``SUM``, ``AVG``, ``MIN``, ``MAX`` and ``COUNT`` ``(x) OVER ([PARTITION BY k] LIMIT
DURATION(unit, n) [WHEN c])``, are written in the spec as Stream Analytics writes them; each
gets an output column, and the WHERE or SELECT that called it reads that column. A call the
SELECT names (``LAG(t) OVER (…) AS previous``) is that column; one inside an expression or a
WHERE gets a name of its own (``lag_t``). Both compute the same value for each event: the
spec's functions see every kept event before ``filter``, as Stream Analytics' see every event
before ``WHERE``.

What the spec cannot hold is refused: another function ``OVER (…)``, ``LAG``, ``LAST`` or an
aggregate without ``LIMIT DURATION`` (the spec bounds their state by it), ``ISFIRST`` with
one, two ``PARTITION BY`` in one query (the spec orders each key's events once), ``T-SQL's``
``ORDER BY`` in ``OVER``.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlglot
from sqlglot import exp

from tidegate.asa.dialect import LimitDuration
from tidegate.asa.parts import whole_record
from tidegate.asa.top import TOP_VALUE, is_top, ranked, top_over_duration
from tidegate.asa.windows import UNITS, Refuse, window_name

Expression = Callable[[exp.Expr], str]  # a node as a spec expression
_NEAREST = "write LAG, LAST, ISFIRST, or SUM, AVG, MIN, MAX or COUNT with LIMIT DURATION"
# the aggregates over a duration: an aggregate call with OVER
_OVER_DURATION: dict[type, str] = {exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max", exp.Count: "count"}
_TOP = {"topone": "TopOne", "collecttop": "CollectTop"}  # over a duration: a record's MAX or MIN


def analytic_name(node: exp.Expr) -> str | None:
    """``lag``, ``last`` or ``isfirst`` for an analytic call (with or without ``OVER``), ``sum``,
    ``avg``, ``min``, ``max`` or ``count`` for an aggregate ``OVER (…)``, None for any other
    node; any other function ``OVER (…)`` is ``over``."""
    call = node.this if isinstance(node, exp.Window) else node
    if isinstance(node, exp.Window) and type(call) in _OVER_DURATION:
        return _OVER_DURATION[type(call)]
    if isinstance(call, exp.Lag):
        return "lag"
    if isinstance(call, (exp.Last, exp.LastValue)):
        return "last"
    if isinstance(call, exp.Anonymous) and str(call.this).lower() == "isfirst":
        return "isfirst"
    if isinstance(node, exp.Window) and is_top(node):  # over a duration, or an aggregate of a windowed SELECT
        return str(call.this).lower() if isinstance(node.args.get("order"), LimitDuration) else None
    return "over" if isinstance(node, exp.Window) and not window_name(node) else None


class AnalyticColumns:
    """The analytic calls of one SELECT, each as a spec ``analytics`` entry and its column."""

    def __init__(self, refuse: Refuse, expression: Expression, taken: set[str], whole: list[str] | None = None) -> None:
        self.refuse, self.expression, self.taken = refuse, expression, taken
        self.whole = whole  # the input's payload fields, which LAG(*) returns as a record (None: not given)
        self.columns: dict[str, str] = {}  # column → the call, in the spec's words
        self.partition: tuple[exp.Expr, str] | None = None  # the first PARTITION BY, and its text
        self.first: exp.Expr | None = None  # the first call, which the spec's comment names

    def name(self, item: exp.Alias) -> None:
        """The column of a call the SELECT names: its alias."""
        text = self.text(item.this)
        if text not in self.columns.values():
            self.columns[item.alias] = text
            self.taken.add(item.alias.lower())

    def replace(self, node: exp.Expr) -> exp.Expr:
        """``node`` with every analytic call its column (TopOne's: the value of its column's record)."""
        return node.copy().transform(lambda n: self._reference(n) if analytic_name(n) else n)

    def _reference(self, node: exp.Expr) -> exp.Expr:
        name = self._column(node)
        kind = analytic_name(node)
        if kind == "collecttop":  # its column holds the records in order: numbered as Stream Analytics does
            return sqlglot.parse_one(ranked(name), read="spark")
        return exp.column(TOP_VALUE, table=name) if kind == "topone" else exp.column(name)

    def _column(self, node: exp.Expr) -> str:
        text = self.text(node)
        for name, known in self.columns.items():
            if known == text:
                return name
        kind = str(analytic_name(node))
        arg = (node.this if isinstance(node, exp.Window) else node).this
        base = f"{kind}_{arg.name}" if kind != "isfirst" and isinstance(arg, exp.Column) else f"{kind}_value"
        name, n = base, 1
        while name.lower() in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.columns[name] = text
        self.taken.add(name.lower())
        return name

    def text(self, node: exp.Expr) -> str:
        """The call as the spec's ``analytics`` writes it."""
        kind = str(analytic_name(node))
        window = node if isinstance(node, exp.Window) else None
        call = node.this if window is not None else node
        if kind == "over":
            raise self.refuse(
                node, f"{call.sql('tsql')} OVER (…): this function has no form over a duration here", _NEAREST
            )
        limit = window.args.get("order") if window is not None else None
        order = limit.args.get("order") if isinstance(limit, LimitDuration) else limit
        if order is not None and kind not in _TOP:
            raise self.refuse(order, "ORDER BY in OVER", "remove it: events are in time order (then arrival)")
        over = self._partition(window) if window is not None else []
        if kind == "isfirst":
            args = list(call.expressions)
            if len(args) != 2:
                raise self.refuse(call, "ISFIRST takes a unit and a size", "write ISFIRST(minute, 10)")
            head = f"ISFIRST({_unit(args[0], self.refuse)}, {_whole(args[1], self.refuse)})"
            if limit is not None and limit.args.get("unit") is not None:
                raise self.refuse(limit, "ISFIRST with LIMIT DURATION", "ISFIRST's interval is its own: remove it")
        elif kind in _TOP:
            head = top_over_duration(call, order, self.expression, self.refuse, self.whole)
            over.append(self._duration(node, limit, f"{_TOP[kind]}(…) OVER", "the duration is the group's length"))
        elif kind in _OVER_DURATION.values():
            over.append(self._duration(node, limit, f"{kind.upper()}(…) OVER", "the duration is the group's length"))
            star = isinstance(call.this, exp.Star)
            if (star and kind != "count") or isinstance(call.this, exp.Distinct):
                raise self.refuse(call, f"{call.sql('tsql')} OVER (…)", f"name one value: {kind.upper()}(column)")
            head = f"{kind.upper()}({'*' if star else self.expression(call.this)})"
        else:
            over.append(self._duration(node, limit, kind.upper(), "the spec bounds what it keeps by the duration"))
            args = [call.this] + ([call.args[k] for k in ("offset", "default") if call.args.get(k) is not None])
            texts = [self._star(call, kind) if isinstance(a, exp.Star) else self.expression(a) for a in args]
            head = f"{kind.upper()}({', '.join(texts)})"
        if limit is not None and limit.args.get("when") is not None:
            over.append(f"WHEN {self.expression(limit.args['when'])}")
        return f"{head} OVER ({' '.join(over)})" if over else head

    def _star(self, call: exp.Expr, kind: str) -> str:
        """``LAG(*)``, ``LAST(*)``: the whole earlier (or latest matching) event, a record of
        the input's payload fields."""
        if kind not in ("lag", "last"):
            raise self.refuse(call, f"{kind.upper()}(*)", f"one {kind.upper()} per column")
        name = kind.upper()
        if not self.whole:
            raise self.refuse(
                call, f"{name}(*) returns the whole event, whose fields this query does not say",
                f"give the input's payload in the side file (inputs.<name>.payload), or name the value: {name}(x)",
            )  # fmt: skip
        return whole_record(self.whole)

    def _duration(self, node: exp.Expr, limit: exp.Expr | None, written: str, why: str) -> str:
        """``LIMIT DURATION(unit, n)`` as the spec writes it; refused when the call has none."""
        if not isinstance(limit, LimitDuration) or limit.args.get("unit") is None:
            name = written.split("(")[0]
            raise self.refuse(
                node, f"{written} without LIMIT DURATION",
                f"write {name}(…) OVER ([PARTITION BY k] LIMIT DURATION(unit, n)): {why}",
            )  # fmt: skip
        return f"LIMIT DURATION({_unit(limit.args['unit'], self.refuse)}, {_whole(limit.args['size'], self.refuse)})"

    def _partition(self, window: exp.Window) -> list[str]:
        parts = window.args.get("partition_by") or []
        text = ", ".join(self.expression(p) for p in parts)
        if self.partition is None:
            self.partition = (window, text)
        elif self.partition[1] != text:
            raise self.refuse(
                window, f"PARTITION BY {text or '(none)'} beside PARTITION BY {self.partition[1] or '(none)'}",
                "all analytic functions of a query share one PARTITION BY (the spec orders each key's events once):"
                " split the query into two jobs",
            )  # fmt: skip
        return [f"PARTITION BY {text}"] if text else []


def _unit(node: exp.Expr, refuse: Refuse) -> str:
    name = node.name.lower() if isinstance(node, (exp.Column, exp.Var, exp.Identifier)) else ""
    if name not in UNITS:
        raise refuse(node, f"{node.sql()!r} is not a time unit", "write day, hour, minute, second or millisecond")
    return name


def _whole(node: exp.Expr, refuse: Refuse) -> str:
    if not (isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit()):
        raise refuse(node, f"{node.sql()!r} is not a whole number", "durations are whole numbers of the unit")
    return str(int(node.this))
