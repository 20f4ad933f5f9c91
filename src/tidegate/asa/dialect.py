"""Stream Analytics' query language read as a parse tree: sqlglot's T-SQL grammar, extended by
the few clauses T-SQL does not have.

What sqlglot 30's ``tsql`` dialect reads as it stands (checked when this module was written):
``SELECT … INTO out FROM in``, ``WITH step AS (…)``, ``WHERE``, ``HAVING``, ``GROUP BY k,
TumblingWindow(minute, 1)`` (the window is a call of an unknown function, ``exp.Anonymous``),
``SessionWindow(…) OVER (PARTITION BY k)`` (an ``exp.Window``) and ``System.Timestamp()`` (an
``exp.Dot``). What it does not read, and :class:`AsaParser` adds:

* Statements without ``;`` between them. A Stream Analytics query writes several outputs as
  several ``SELECT … INTO`` one after the other, separated by nothing but a line break; T-SQL's
  parser wants ``;``. A ``SELECT`` outside brackets, after the statement's own ``SELECT`` and not
  after ``UNION``, ``ALL``, ``EXCEPT`` or ``INTERSECT``, begins the next statement, as does a
  ``WITH`` after one (which the translator refuses by name: the steps come first).

* ``FROM input [alias] TIMESTAMP BY expr [OVER key]`` — the table becomes a :class:`TimestampBy`
  node holding the table, the time expression and the substream key. Plain T-SQL would take
  ``TIMESTAMP`` for the table's alias and stop at ``BY``.
* ``OVER (PARTITION BY k LIMIT DURATION(unit, n) [WHEN cond])`` — the analytic functions' window
  (``LAG``, ``LAST``, ``ISFIRST``): a :class:`LimitDuration` node in the window's ``order`` slot,
  where T-SQL's own ``ORDER BY`` would stand (Stream Analytics has none there). ``ISFIRST``'s
  ``OVER (PARTITION BY k WHEN cond)`` has no duration: the node holds the condition alone.

Errors say where: :func:`parse_query` raises :class:`~tidegate.errors.ConfigError` with the
line and column of the token the grammar stopped at, never sqlglot's own message (which prints
the query's text back with terminal colours).
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.tsql import TSQL
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from tidegate.errors import ConfigError

MAX_QUERY_CHARS = 200_000  # a Stream Analytics query is limited to 512,000 characters; ours to less


class TimestampBy(exp.Expression):
    """``this TIMESTAMP BY expression [OVER over]``: an input read with its event time."""

    arg_types = {"this": True, "expression": True, "over": False}


class LimitDuration(exp.Expression):
    """``[ORDER BY …] [LIMIT DURATION(unit, n)] [WHEN condition]`` inside an analytic function's
    ``OVER`` (``order``: TopOne's and CollectTop's keys, which only they take)."""

    arg_types = {"unit": False, "size": False, "when": False, "order": False}


_SET_OPERATORS = (TokenType.UNION, TokenType.ALL, TokenType.EXCEPT, TokenType.INTERSECT, TokenType.DISTINCT)


def separated(tokens: list[Token]) -> list[Token]:
    """``tokens`` with a ``;`` before each ``SELECT`` that begins a statement of its own: one
    outside brackets, after the current statement's own ``SELECT``, and not after a set
    operator (``UNION [ALL] SELECT`` continues a statement)."""
    out: list[Token] = []
    depth, seen_select = 0, False
    for token in tokens:
        kind = token.token_type
        if kind == TokenType.SEMICOLON:
            seen_select = False
        elif kind in (TokenType.L_PAREN, TokenType.R_PAREN):
            depth += 1 if kind == TokenType.L_PAREN else -1
        elif kind == TokenType.WITH and depth == 0 and seen_select:  # WITH after a statement: the next one's
            out.append(Token(TokenType.SEMICOLON, ";", token.line, token.col, token.start, token.start))
            seen_select = False
        elif kind == TokenType.SELECT and depth == 0:
            if seen_select and out and out[-1].token_type not in _SET_OPERATORS:
                out.append(Token(TokenType.SEMICOLON, ";", token.line, token.col, token.start, token.start))
            seen_select = True
        out.append(token)
    return out


class AsaParser(TSQL.Parser):  # type: ignore[misc,valid-type]
    def parse(self, raw_tokens: list[Token], sql: str) -> list[exp.Expr | None]:
        return super().parse(separated(raw_tokens), sql)

    def _parse_table_alias(self, alias_tokens=None):
        if self._curr and self._next and self._curr.text.upper() == "TIMESTAMP" and self._next.text.upper() == "BY":
            return None  # TIMESTAMP BY follows the table: not its alias
        return super()._parse_table_alias(alias_tokens=alias_tokens)

    def _parse_table(self, *args, **kwargs):
        table = super()._parse_table(*args, **kwargs)
        if table is None or not self._match_text_seq("TIMESTAMP", "BY"):
            return table
        time = self._parse_assignment()
        over = self._parse_assignment() if self._match(TokenType.OVER) else None
        return self.expression(TimestampBy(this=table, expression=time, over=over))

    def _parse_id_var(self, *args, **kwargs):
        if self._curr and self._next and self._curr.text.upper() == "LIMIT" and self._next.text.upper() == "DURATION":
            return None  # OVER (LIMIT DURATION …) without PARTITION BY: not a window's name
        return super()._parse_id_var(*args, **kwargs)

    def _parse_partition_and_order(self):
        partition, order = super()._parse_partition_and_order()
        if self._match(TokenType.WHEN):  # ISFIRST(…) OVER (PARTITION BY k WHEN c): no duration
            return partition, self.expression(LimitDuration(when=self._parse_assignment()))
        if not self._match_text_seq("LIMIT", "DURATION"):
            return partition, order
        self._match_l_paren()
        unit = self._parse_var(any_token=True)
        self._match(TokenType.COMMA)
        size = self._parse_assignment()
        self._match_r_paren()
        when = self._parse_assignment() if self._match(TokenType.WHEN) else None
        return partition, self.expression(LimitDuration(unit=unit, size=size, when=when, order=order))


class Asa(TSQL):
    """Azure Stream Analytics' query language: T-SQL with ``TIMESTAMP BY`` and ``LIMIT DURATION``."""

    Parser = AsaParser


def parse_query(text: str, origin: str) -> list[exp.Expr]:
    """The statements of a query (``;`` between them), or a :class:`ConfigError` naming
    ``origin:line:column`` and what the grammar expected there."""
    if len(text) > MAX_QUERY_CHARS:
        raise ConfigError(
            f"{origin}: the query is {len(text):,} characters, more than {MAX_QUERY_CHARS:,}",
            "check that the path names a query (.asaql), not a data file",
        )
    try:
        statements = Asa().parse(text)
    except ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        where = f"{origin}:{first.get('line', '?')}:{first.get('col', '?')}"
        what = str(first.get("description") or "text the grammar cannot read")
        raise ConfigError(
            f"{where}: {what} (near {first.get('highlight', '')!r})",
            "write the query in Stream Analytics' grammar; the forms the translator reads are in "
            "docs/guide/coming-from-stream-analytics.md",
        ) from None
    except TokenError as exc:
        raise ConfigError(f"{origin}: {exc}", "close every quote and bracket") from None
    return [s for s in statements if s is not None]


def position(node: exp.Expr, text: str) -> tuple[int, int]:
    """(line, column), both from 1, of the first token of ``node`` in ``text``: the smallest
    start among the tokens its subtree kept (sqlglot keeps them on identifiers, literals and
    calls). (0, 0) when none was kept."""
    starts = [n.meta["start"] for n in node.walk() if isinstance(n, exp.Expr) and "start" in n.meta]
    if not starts:
        return 0, 0
    start = min(starts)
    line = text.count("\n", 0, start) + 1
    return line, start - (text.rfind("\n", 0, start) + 1) + 1
