"""Spark SQL expressions in a job spec, read without Spark: tokens, columns and calls.

A spec's ``filter``, ``select``, ``group_by`` and ``aggregates`` are Spark SQL the engine
runs. Spec parsing must stay cheap and JVM-free (the controller and Airflow parse specs), so
Spark's own parser is not available here; instead a tokenizer that reads literals the way
Spark's lexer does (quotes, backslash escapes, raw ``r'…'`` strings, backquoted names)
finds every identifier and every ``name(`` call, and :func:`check_expression` holds them to
two rules:

* every identifier that is not a function, keyword, literal, struct field, alias or lambda
  parameter is a known column (a typo is caught when the spec is loaded);
* every call is one :mod:`tidegate.jobspec.functions` allows. Qualified or computed
  function names, subqueries and window functions (``OVER``) are refused here, with the
  field named. Comments are refused too: Spark would read less of the text than was checked,
  and so is ``${`` anywhere: Spark could substitute settings and environment variables there.

Then the expression is read as a parse tree (:mod:`tidegate.jobspec.expression_tree`): what
it is made of, and how much one event may make it build.

The check does not type-check; Spark reports what is left when the query starts
(``tidegate query test`` finds it early). tests/jobspec holds Spark's parser to the same
answer on a corpus of expressions.

The same tokenizer gives the two forms the rest of the spec code stores:
:func:`normalise_expression` (what a spec keeps) and :func:`canonical_expression` (what
the fingerprint hashes).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from tidegate.errors import ConfigError, excerpt
from tidegate.jobspec.asa_dates import PART_CALLS, PARTS_FIX, date_part
from tidegate.jobspec.expression_tree import check_tree
from tidegate.jobspec.functions import check_function as _check_function
from tidegate.jobspec.hints import did_you_mean
from tidegate.jobspec.limits import limit_fix, spec_limits

PLAIN_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")  # a column name that needs no backquotes

_TOKEN = re.compile(
    r"""(?P<space>\s+)
    |(?P<comment>--|/\*)
    |(?P<string>[rR]'[^']*'|[rR]"[^"]*"|'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    |(?P<quoted>`(?:[^`]|``)*`)
    |(?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?[A-Za-z]*)
    |(?P<word>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<symbol>->|=>|<=>|<=|>=|<>|!=|==|\|\||::|<<|>>|[-+*/%=<>!&|^~(),.\[\]:?{}])
    |(?P<bad>.)""",
    re.X | re.S,
)
# words that are never columns: keywords, type names, datetime units, functions used without ()
_SQL_WORDS = frozenset(
    """and or not in is null true false like ilike rlike regexp between case when then else end as
    distinct all any some exists escape div filter where within group by order asc desc nulls first
    last over partition rows range unbounded preceding following current row respect ignore from to
    for at zone trailing leading both placing interval x string int integer bigint long smallint
    tinyint short byte double float real boolean decimal dec numeric binary varchar char array map
    struct date timestamp timestamp_ltz timestamp_ntz time year years month months week weeks day
    days hour hours minute minutes second seconds millisecond milliseconds microsecond microseconds
    quarter dayofweek dow doy current_date current_timestamp current_timezone current_user user
    session_user current_database current_catalog unknown""".split()
)
# keywords Spark may write before "(" without calling anything: x IN (…), CASE (…), WITHIN GROUP (…)
_NOT_CALLS = frozenset(
    """in within and or not when then else as by from case is distinct all interval for to partition
    order group where leading trailing both""".split()
)
# words that start a query: inside an expression they make a subquery, which may read tables
_SUBQUERY_WORDS = frozenset(("select", "table", "values"))
# "(FROM t)": Spark reads a FROM-first query (FROM t SELECT …, or FROM t alone) in brackets
_QUERY_OPENERS = frozenset(("(", ","))
# type names that take arguments after AS or :: (cast(x AS varchar(10)), x::decimal(10, 2))
_TYPE_CALLS = frozenset(("decimal", "dec", "numeric", "varchar", "char", "character"))


# -- tokens ----------------------------------------------------------------------------


def token_spans(expr: str) -> list[tuple[str, str, int, int]]:
    """Every token of ``expr`` but spaces: (kind, text, start, end), kind one of ``word``,
    ``quoted``, ``string``, ``number``, ``symbol``, ``comment``. Raises ConfigError for a
    character no token starts with."""
    out = []
    for m in _TOKEN.finditer(expr):
        if m.lastgroup == "bad":
            raise ConfigError(
                f"cannot read {m.group()!r} at position {m.start() + 1} of {excerpt(expr)}",
                "check quotes and brackets: strings in 'single quotes',"
                " column names with odd characters in `backticks`",
            )
        if m.lastgroup != "space":
            out.append((m.lastgroup or "", m.group(), m.start(), m.end()))
    return out


def _tokens(expr: str) -> list[tuple[str, str]]:
    out = []
    for m in _TOKEN.finditer(expr):
        if m.lastgroup == "bad":
            token_spans(expr)  # raises, naming the character
        out.append((m.lastgroup or "", m.group()))
    return out


def normalise_expression(expr: str) -> str:
    """Runs of whitespace outside string literals become one space; ends are trimmed."""
    try:
        return "".join(" " if kind == "space" else text for kind, text in _tokens(expr)).strip()
    except ConfigError:
        return " ".join(expr.split())  # unreadable: check_expression reports it with the field


def canonical_expression(expr: str) -> str:
    """Whitespace- and keyword-case-insensitive form, for fingerprints: tokens joined by one
    space, keywords and function names lower-cased, `plain` backticks dropped."""
    toks = [(k, t) for k, t in _tokens(expr) if k != "space"]
    out = []
    for i, (kind, text) in enumerate(toks):
        nxt = toks[i + 1][1] if i + 1 < len(toks) else ""
        if kind == "word" and (text.lower() in _SQL_WORDS or nxt == "("):
            text = text.lower()
        if text in _MEANING_CHANGED and nxt == "(" and _MEANING_CHANGED[text](toks, call_arguments(toks, i + 1)):
            # Stream Analytics' meaning, not Spark's, after 0.7 (tidegate.jobspec.asa_functions):
            # hashed apart from what every fingerprint before held
            text += "_boundaries" if text == "datediff" else "_asa"
        elif kind == "quoted" and PLAIN_NAME.fullmatch(text[1:-1]):
            text = text[1:-1]
        elif kind == "string" and text[0] in "rR":  # read as two tokens before raw strings were known:
            out.append(text[0])  # keep the text (and so every fingerprint) as it was
            text = text[1:]
        out.append(text)
    return " ".join(out)


def _shortens(toks: Sequence[Sequence], args: list[tuple[int, int]]) -> bool:
    """SUBSTRING(s, start, length) may read differently in Spark: its start is no number from 1 up."""
    if len(args) != 3:
        return False
    first, last = args[1]
    start = toks[first][1] if last - first == 1 and toks[first][0] == "number" else ""
    return not (start.isdigit() and start.strip("0"))  # never int() of the text: it may be thousands of digits


# the calls whose meaning became Stream Analytics' after Spark's: when a call of that name has it
_MEANING_CHANGED = {
    "datediff": lambda toks, args: len(args) == 3,
    "substring": _shortens,
    "len": lambda toks, args: len(args) == 1,
}


def call_arguments(toks: Sequence[Sequence], opening: int) -> list[tuple[int, int]]:
    """The top-level arguments of the call whose ``(`` is token ``opening`` of ``toks`` (tokens
    whose second item is their text, as :func:`token_spans` gives them): (first, after last)
    token indexes; the last argument's end is the index of the call's ``)``."""
    args: list[tuple[int, int]] = []
    depth, first = 0, opening + 1
    for j in range(opening, len(toks)):
        symbol = toks[j][1]
        if symbol in ("(", "["):
            depth += 1
        elif symbol in (")", "]"):
            depth -= 1
            if depth == 0:
                return args + [(first, j)] if j > first else args
        elif symbol == "," and depth == 1:
            args.append((first, j))
            first = j + 1
    return []


# -- the check -------------------------------------------------------------------------


def check_expression(expr: str, where: str, known: list[str], *, aggregates: bool = False) -> list[str]:
    """Check one expression of field ``where`` (e.g. ``select.temp_f``); returns its function
    calls, lower-cased. ``aggregates``: aggregate functions are allowed (the ``aggregates`` field).
    Raises ConfigError naming the field, the refused function or unknown column, and the fix."""
    _refuse_substitution(expr, where)
    limits = spec_limits()
    if len(expr) > limits.expression_chars:
        raise ConfigError(f"{where}: the expression is {len(expr):,} characters long, more than"
                          f" {limits.expression_chars:,}", "write it shorter, or compute parts of it in"
                          " earlier steps (steps:); " + limit_fix("expression_chars"))  # fmt: skip
    try:
        toks = [(k, t) for k, t in _tokens(expr) if k != "space"]
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc.problem}", exc.fix) from None
    _refuse_comments_and_subqueries(toks, where, expr)
    _refuse_session_words(toks, where, expr, known)
    parts = _date_parts(toks, where, expr)
    calls = _calls(toks, where)
    for name in calls:
        _check_function(name, where, aggregates)
    check_tree(expr, where, limits)
    _check_columns(toks, where, expr, known, parts)
    return list(calls)


def function_calls(expr: str) -> list[str]:
    """The functions ``expr`` calls, lower-cased, in order of first appearance."""
    return list(_calls([(k, t) for k, t in _tokens(expr) if k != "space"], "expression"))


def reads_column(expr: str, column: str) -> bool:
    """Whether ``expr`` names the column ``column`` (any case, quoted or not): not a struct field
    of that name, an alias, a named argument, a call or a lambda parameter."""
    toks = [(k, t) for k, t in _tokens(expr) if k != "space"]
    params = _lambda_params(toks)
    for i, (kind, text) in enumerate(toks):
        if kind not in ("word", "quoted"):
            continue
        name = text[1:-1].replace("``", "`") if kind == "quoted" else text
        prev = toks[i - 1][1].lower() if i else ""
        nxt = toks[i + 1][1] if i + 1 < len(toks) else ""
        if name.lower() == column.lower() and prev not in (".", "as") and nxt not in ("(", "=>"):
            return kind == "quoted" or name.lower() not in params
    return False


def _refuse_substitution(expr: str, where: str) -> None:
    """``${…}`` anywhere, strings included: a Spark session with variable substitution on
    replaces it with an environment variable, a system property or a setting before it parses
    the text. Tidegate's sessions turn substitution off; the spec is refused all the same."""
    if "${" in expr:
        raise ConfigError(
            f"{where}: '${{' is not allowed in {excerpt(expr)}: Spark can replace ${{…}} with environment"
            " variables, system properties and settings before it reads the expression",
            "to compare with the text '${', build it from parts: concat('$', '{')",
        )


def _refuse_comments_and_subqueries(toks: list[tuple[str, str]], where: str, expr: str) -> None:
    for i, (kind, text) in enumerate(toks):
        if kind == "comment":
            raise ConfigError(
                f"{where}: comments (-- or /* */) are not allowed in expressions: Spark would skip"
                f" text the check has read ({excerpt(expr)})",
                "remove the comment; for a minus sign before a negative number write - -5 or -(-5)",
            )
        prev = toks[i - 1][1] if i else ""
        if kind == "word" and text.lower() == "from" and (i == 0 or prev in _QUERY_OPENERS):
            raise ConfigError(
                f"{where}: subqueries are not allowed (FROM in {excerpt(expr)}):"
                " a job reads its events, not tables or files",
                "compute from the event's own columns; a payload field named from must be written `from`",
            )
        if kind == "word" and text.lower() in _SUBQUERY_WORDS and prev != ".":
            raise ConfigError(
                f"{where}: subqueries are not allowed ({text.upper()} in {excerpt(expr)}):"
                " a job reads its events, not tables",
                f"compute from the event's own columns; a payload field named {text} must be written `{text}`",
            )


def _refuse_session_words(toks: list[tuple[str, str]], where: str, expr: str, known: list[str]) -> None:
    """``current_user``, ``user``, ``session_user``, ``current_database`` … written bare are not
    calls, so the allowlist never sees them, and Spark answers them from the session or the
    operating system (``SPARK_USER``, the OS user, the catalog's names). A payload field of the
    same name is the field: Spark resolves a column before such a word."""
    known_lower = {k.lower() for k in known}
    for i, (kind, text) in enumerate(toks):
        prev = toks[i - 1][1] if i else ""
        if kind == "word" and text.lower() in _SESSION_WORDS and prev != "." and text.lower() not in known_lower:
            raise ConfigError(
                f"{where}: {text} is not allowed in {excerpt(expr)}: it reads the session's user, catalog or"
                " database from the platform, not the event",
                f"a payload field named {text} must be in the payload (and may be written `{text}`);"
                " a job computes from its events only",
            )


# niladic words Spark answers from the session or the operating system
_SESSION_WORDS = frozenset(
    ("current_user", "user", "session_user", "current_database", "current_schema", "current_catalog")
)


def _calls(toks: list[tuple[str, str]], where: str) -> dict[str, int]:
    """Every function call, in order of appearance: ``name(``, `` `name`( ``, ``a.b(``."""
    calls: dict[str, int] = {}
    for i, (kind, text) in enumerate(toks):
        nxt = toks[i + 1][1] if i + 1 < len(toks) else ""
        prev = toks[i - 1][1] if i else ""
        lower = text.lower()
        if kind == "word" and lower == "over" and nxt == "(":
            raise ConfigError(
                f"{where}: window functions (OVER …) are not allowed: their results depend on how the"
                " stream is cut into micro-batches",
                "use the spec's window section for event-time windows, and aggregates for what they compute",
            )
        if nxt != "(" or kind not in ("word", "quoted", "number"):
            continue
        if kind == "word" and lower in _NOT_CALLS:
            continue
        if kind == "word" and lower == "filter" and prev == ")":  # count(*) FILTER (WHERE …)
            continue
        if kind == "word" and lower in ("any", "some") and prev.lower() in ("like", "ilike", "rlike"):
            continue  # x LIKE ANY ('a%', 'b%')
        if prev.lower() in ("as", "::") and lower in _TYPE_CALLS:
            continue  # a type with arguments: cast(x AS decimal(10, 2))
        name = text[1:-1].replace("``", "`") if kind == "quoted" else text
        if prev == ".":
            raise ConfigError(
                f"{where}: {_qualified(toks, i)}() is not allowed: a qualified function name can name"
                " a catalog function",
                "call Spark's built-in functions by their plain name, e.g. upper(x)",
            )
        calls.setdefault(name.lower(), i)
    return calls


def _qualified(toks: list[tuple[str, str]], i: int) -> str:
    parts = []
    while i >= 0 and toks[i][0] in ("word", "quoted"):
        kind, text = toks[i]
        parts.append(text[1:-1].replace("``", "`") if kind == "quoted" else text)
        if i < 2 or toks[i - 1][1] != ".":
            break
        i -= 2
    return ".".join(reversed(parts)).lower()


def _date_parts(toks: list[tuple[str, str]], where: str, expr: str) -> set[int]:
    """The tokens that are a date part (``DATEPART(dw, t)``, ``DATEADD(ms, n, t)``…), which are
    no columns. A word there that names no Stream Analytics date part is refused; so is a
    ``DATENAME`` whose part is not a word. ``datepart('YEAR', t)`` is Spark's, and left to it."""
    parts: set[int] = set()
    for i, (kind, text) in enumerate(toks[:-1]):
        arity = PART_CALLS.get(text.lower()) if kind == "word" else None
        if arity is None or toks[i + 1][1] != "(" or (i and toks[i - 1][1] == "."):
            continue
        args = call_arguments(toks, i + 1)
        if len(args) != arity:
            continue
        first, last = args[0]
        word = toks[first][1] if last - first == 1 and toks[first][0] == "word" else None
        if word is not None and date_part(word) is not None:
            parts.add(first)
        elif word is not None or text.lower() == "datename":
            shown = word or " ".join(t for _, t in toks[first:last])
            raise ConfigError(
                f"{where}: {text.upper()}'s first argument {excerpt(shown)} is not a Stream Analytics date part"
                f" (in {excerpt(expr)})",
                PARTS_FIX,
            )
    return parts


def _check_columns(
    toks: list[tuple[str, str]], where: str, expr: str, known: list[str], parts: Collection[int] = ()
) -> None:
    """Every identifier that is not a function call, a struct field, an alias, a lambda
    parameter, a keyword, a literal or a date part (token indexes ``parts``) must be a known column."""
    lambda_params = _lambda_params(toks)
    known_lower = {k.lower() for k in known}
    unknown: list[str] = []
    for i, (kind, text) in enumerate(toks):
        if kind not in ("word", "quoted") or i in parts:
            continue
        prev = toks[i - 1][1].lower() if i else ""
        nxt = toks[i + 1][1] if i + 1 < len(toks) else ""
        if nxt == "(":  # a call or a keyword before a bracket: checked by _calls
            continue
        if prev in (".", "as") or nxt == "=>":  # struct field, alias, named argument
            continue
        name = text[1:-1].replace("``", "`") if kind == "quoted" else text
        if name.lower() in known_lower:
            continue
        if kind == "word" and (name.lower() in _SQL_WORDS or name.lower() in lambda_params):
            continue
        if name not in unknown:
            unknown.append(name)
    if unknown:
        hints = "".join(did_you_mean(name, known) for name in unknown)
        raise ConfigError(
            f"{where}: unknown column{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} in {excerpt(expr)}{hints}",
            f"use the known columns ({', '.join(known)}); to read another JSON field, add it to payload with its type",
        )


def _lambda_params(toks: list[tuple[str, str]]) -> set[str]:
    """``x -> x + 1`` and ``(acc, x) -> acc + x``: the names before ``->``."""
    params: set[str] = set()
    for i, (_, text) in enumerate(toks):
        if text != "->" or i == 0:
            continue
        j = i - 1
        if toks[j][1] == ")":
            while j > 0 and toks[j][1] != "(":
                j -= 1
                if toks[j][0] == "word":
                    params.add(toks[j][1].lower())
        elif toks[j][0] == "word":
            params.add(toks[j][1].lower())
    return params
