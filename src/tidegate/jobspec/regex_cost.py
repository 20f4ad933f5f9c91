"""How much work a spec's regular expression may take: refused before it backtracks for ever.

Spark runs ``RLIKE``, ``regexp_*``, ``split``, ``str_to_map`` and ``LIKE`` with Java's
backtracking engine, where a pattern such as ``(a|a)*b`` or ``(a+)+$`` takes time exponential
in the text it reads, and an event's text is at most its payload (1 MiB by default). So a
pattern in a spec is held, when the spec loads, to three rules:

* **It is a string literal.** A pattern computed from the event would be chosen by whoever
  produces the events.
* **It compiles under RE2** (``google-re2``), the linear-time engine: no backreferences, no
  lookaround, no possessive or atomic groups. These are the constructs that have no bounded
  cost, and a pattern that RE2 reads means the same in Java's engine.
* **It has no shape that backtracks without bound** in Java's engine, read from its parse tree:
  a repetition inside a repetition (``(a+)+``, ``(a*b?)*``, ``(\\w+\\s?){2,}``), a repeated
  choice whose branches can start alike or be empty (``(a|a)*``, ``(a|ab)+``), and a chain of
  three or more unbounded repetitions that can each take the same characters (``.*a.*b``
  searched anywhere: cubic in the text). Up to quadratic work is accepted: a search for
  ``a*b`` tries each start.

:func:`check_edit_distance` bounds ``levenshtein``, whose cost is the product of its texts'
lengths, by :attr:`~tidegate.jobspec.limits.SpecLimits.edit_distance_cells`.
"""

from __future__ import annotations

import re
import re._constants as sre  # the parse tree's opcodes
import re._parser as sre_parse
from functools import lru_cache

from tidegate.errors import ConfigError, excerpt
from tidegate.jobspec.limits import limit_fix

try:  # RE2's grammar: what it reads has a linear-time meaning
    import re2 as _re2
except ImportError:  # pragma: no cover - a dependency of the package
    _re2 = None

_SAMPLES = tuple(chr(c) for c in range(128)) + ("é", "ß", "中", "\u2028", "\U0001f600")
_WIDE = frozenset(_SAMPLES)
_SMALL_REPEAT = 16  # a repetition of at most this many is counted, not unbounded
_POLYNOMIAL_LIMIT = 3  # degree of the search's work from which a pattern is refused
_JAVA_ONLY = (
    (re.compile(r"\\[pP]\{[A-Za-z_]+\}|\\[pP][A-Za-z]"), r"[^\n]"),  # \p{Alpha}, \pL: read as "a character"
    (re.compile(r"\\[QE]"), ""),  # Java's \Q…\E quotes; RE2 has them too
)
PATTERN_FIX = (
    "write the pattern without backreferences or lookaround, and without a repetition inside a repetition"
    " or a repeated choice whose branches overlap: e.g. '^dev-[0-9]+$' rather than '^(dev-[0-9]+)+$';"
    " for plain text, contains(), startswith() and endswith() need no pattern"
)


def check_pattern(node_text: str | None, function: str, where: str, expr: str, shown: str | None = None) -> None:
    """Refuse the pattern ``node_text`` (None: not a string literal) of ``function`` in field ``where``;
    ``shown``: the pattern as the spec wrote it, where that differs (a LIKE pattern)."""
    if node_text is None:
        raise ConfigError(
            f"{where}: {function} takes its pattern as a string literal in {excerpt(expr)}: a pattern"
            " computed from the event could take any amount of work to match",
            "write the pattern as a literal, e.g. rlike(x, '^dev-[0-9]+$')",
        )
    problem = pattern_problem(node_text)
    if problem:
        shown_as = excerpt(node_text if shown is None else shown)
        raise ConfigError(f"{where}: the pattern {shown_as} of {function} {problem}", PATTERN_FIX)


def like_pattern(pattern: str, escape: str = "\\") -> str:
    """A ``LIKE`` pattern as the regular expression Spark matches it with (``%`` any text,
    ``_`` one character)."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append("(?s:.*)" if ch == "%" else "(?s:.)" if ch == "_" else re.escape(ch))
        i += 1
    return "^" + "".join(out) + "$"


def check_edit_distance(cells: int | None, limit: int, where: str, expr: str) -> None:
    """``cells``: the product of the two texts' longest lengths, None when one grows with the event."""
    if cells is None or cells > limit:
        raise ConfigError(
            f"{where}: levenshtein() of texts this long is not allowed in {excerpt(expr)}: its work is the"
            f" product of their lengths, above {limit:,} cells"
            + (" (a text here grows with the event)" if cells is None else f" ({cells:,})"),
            "bound each text first, e.g. levenshtein(left(a, 100), left(b, 100)); " + limit_fix("edit_distance_cells"),
        )


@lru_cache(maxsize=4096)
def pattern_problem(pattern: str) -> str:
    """What is wrong with ``pattern`` (words that follow "the pattern … of f()"), or ''."""
    if _re2 is not None:
        options = _re2.Options()
        options.log_errors = False
        try:
            _re2.compile(pattern, options)
        except Exception as exc:  # re2.error: the grammar's own words
            reason = str(exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc)[:120]
            return (
                f"is not one a linear-time engine can run ({reason}):"
                " backreferences, lookaround and atomic groups have no bounded cost"
            )
    text = pattern
    for java, plain in _JAVA_ONLY:
        text = java.sub(plain, text)
    try:
        tree = sre_parse.parse(_branches_kept(text))
    except (re.error, RecursionError, OverflowError):
        return "cannot be read to bound its work"
    try:
        _nested(list(tree), outer=None)
        degree = _degree(_trimmed(_flat(list(tree))))
    except _Backtracks as exc:
        return exc.what
    if degree >= _POLYNOMIAL_LIMIT:
        return (
            f"can take work of the order of the text's length to the power {degree} (unbounded"
            " repetitions that take the same characters, one after another)"
        )
    return ""


def _branches_kept(text: str) -> str:
    """``text`` with an empty lookahead after each ``|``: Python's parser turns a choice of
    single characters into one class (``(\\w|\\d)`` into ``[\\w\\d]``), which hides the overlap
    Java's engine backtracks over; the lookahead matches nothing and keeps the choice."""
    out, escaped, in_class = [], False, False
    for c in text:
        out.append(c)
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif in_class:
            in_class = c != "]" or out[-2] == "[" or "".join(out[-3:-1]) == "[^"  # []…] and [^]…]: a ']' in it
        elif c == "[":
            in_class = True
        elif c == "|":
            out.append("(?=)")
    return "".join(out)


class _Backtracks(Exception):
    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


# -- the tree's shape ------------------------------------------------------------------


def _is_repeat(op) -> bool:
    return op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)


def _large(hi: int) -> bool:
    return hi is sre.MAXREPEAT or hi == sre.MAXREPEAT or hi > _SMALL_REPEAT


def _nested(items: list, outer: tuple[int, int] | None) -> None:
    """Raise where a large repetition holds another, or a repeated choice overlaps."""
    for op, av in items:
        if _is_repeat(op):
            lo, hi, body = av
            if outer is not None and _large(hi) and _large(outer[1]):
                raise _Backtracks(
                    "repeats a repetition inside a repetition (as in (a+)+): the ways to split"
                    " a text between them grow exponentially with its length"
                )
            if _large(hi) and _nullable(list(body)):
                raise _Backtracks("repeats something that can match nothing (as in (a?)*): its work has no bound")
            _nested(list(body), (lo, hi) if _large(hi) else outer)
        elif op is sre.SUBPATTERN:
            _nested(list(av[-1]), outer)
        elif op is sre.BRANCH:
            branches = [list(b) for b in av[1]]
            if outer is not None and _large(outer[1]) and _overlapping(branches):
                raise _Backtracks(
                    "repeats a choice whose branches can start alike or be empty (as in (a|a)*):"
                    " its work grows exponentially with the text's length"
                )
            for branch in branches:
                _nested(branch, outer)
        elif op in (sre.ASSERT, sre.ASSERT_NOT, sre.ATOMIC_GROUP):
            _nested(list(av[-1] if isinstance(av, tuple) else av), outer)


def _overlapping(branches: list[list]) -> bool:
    seen: set[str] = set()
    for branch in branches:
        if _nullable(branch):
            return True
        first = _first(branch)
        if first & seen:
            return True
        seen |= first
    return False


def _trimmed(items: list) -> list:
    """Without what can match nothing at the end: it never makes a search fail, so never backtrack."""
    while items and _nullable([items[-1]]):
        items = items[:-1]
    return items


def _flat(items: list) -> list:
    """The sequence with its groups' sequences spliced in (a group is its parts, one after
    another), and a counted repetition of an unbounded one written out (``(.*a){3}`` is
    ``.*a.*a.*a``: its chain is three long)."""
    out: list = []
    for op, av in items:
        if op is sre.SUBPATTERN:
            out.extend(_flat(list(av[-1])))
        elif _is_repeat(op) and not _large(av[1]) and av[1] > 1 and _holds_unbounded(list(av[2])):
            out.extend(_flat(list(av[2])) * av[1])
        else:
            out.append((op, av))
        if len(out) > _MAX_FLAT:
            raise _Backtracks("is too intricate to bound its work (counted repetitions of unbounded ones, nested)")
    return out


def _holds_unbounded(items: list) -> bool:
    for op, av in items:
        if _is_repeat(op) and (_large(av[1]) or _holds_unbounded(list(av[2]))):
            return True
        if op is sre.SUBPATTERN and _holds_unbounded(list(av[-1])):
            return True
        if op is sre.BRANCH and any(_holds_unbounded(list(b)) for b in av[1]):
            return True
    return False


_MAX_FLAT = 4_096


def _degree(items: list) -> int:
    """The power of the text's length the search's work grows with: one for trying each start
    (none when anchored at the start), plus the longest chain of unbounded repetitions one
    after another where each could take what the next one takes."""
    anchored = (
        bool(items) and items[0] == (sre.AT, sre.AT_BEGINNING) or items[:1] == [(sre.AT, sre.AT_BEGINNING_STRING)]
    )
    return (0 if anchored else 1) + _chain(items)


def _chain(items: list) -> int:
    best, run, prev = 0, 0, None  # prev: what the last unbounded repetition of the run takes
    for op, av in items:
        if _is_repeat(op) and _large(av[1]):
            takes = _chars(list(av[2]))
            run = run + 1 if prev is not None and takes & prev else 1
            prev = takes
            best = max(best, run, _chain(_flat(list(av[2]))))
        elif op is sre.BRANCH:
            best = max([best] + [_chain(_flat(list(b))) for b in av[1]])
            prev, run = None, 0
        elif op is sre.AT:
            continue
        elif prev is not None and not _chars([(op, av)]) <= prev:
            prev, run = None, 0  # something the last repetition cannot take: the chain breaks
    return best


# -- what the pieces match -------------------------------------------------------------


def _nullable(items: list) -> bool:
    for op, av in items:
        if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
            continue
        if _is_repeat(op):
            if av[0] > 0 and not _nullable(list(av[2])):
                return False
        elif op is sre.SUBPATTERN:
            if not _nullable(list(av[-1])):
                return False
        elif op is sre.BRANCH:
            if not any(_nullable(list(b)) for b in av[1]):
                return False
        else:
            return False
    return True


def _first(items: list) -> frozenset[str]:
    """The sample characters a match of ``items`` can start with."""
    out: set[str] = set()
    for op, av in items:
        if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
            continue
        if _is_repeat(op):
            out |= _first(list(av[2]))
            if av[0] > 0 and not _nullable(list(av[2])):
                return frozenset(out)
            continue
        if op is sre.SUBPATTERN:
            out |= _first(list(av[-1]))
            if not _nullable(list(av[-1])):
                return frozenset(out)
            continue
        if op is sre.BRANCH:
            for b in av[1]:
                out |= _first(list(b))
            if not any(_nullable(list(b)) for b in av[1]):
                return frozenset(out)
            continue
        return frozenset(out | _atom(op, av))
    return frozenset(out)


def _chars(items: list) -> frozenset[str]:
    """Every sample character a match of ``items`` can take."""
    out: set[str] = set()
    for op, av in items:
        if _is_repeat(op):
            out |= _chars(list(av[2]))
        elif op is sre.SUBPATTERN:
            out |= _chars(list(av[-1]))
        elif op is sre.BRANCH:
            for b in av[1]:
                out |= _chars(list(b))
        elif op not in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
            out |= _atom(op, av)
    return frozenset(out)


def _atom(op, av) -> frozenset[str]:
    if op is sre.LITERAL:
        return frozenset({chr(av)}) & _WIDE or frozenset({"中"})
    if op is sre.NOT_LITERAL:
        return _WIDE - {chr(av)}
    if op is sre.ANY:
        return _WIDE - {"\n"}
    if op is sre.IN:
        return _class(av)
    return _WIDE  # anything else: as if it took every character (the safe side)


_CATEGORIES = {
    sre.CATEGORY_DIGIT: str.isdigit, sre.CATEGORY_SPACE: str.isspace,
    sre.CATEGORY_WORD: lambda c: c.isalnum() or c == "_", sre.CATEGORY_LINEBREAK: lambda c: c == "\n",
}  # fmt: skip
_NEGATED = {
    sre.CATEGORY_NOT_DIGIT: sre.CATEGORY_DIGIT, sre.CATEGORY_NOT_SPACE: sre.CATEGORY_SPACE,
    sre.CATEGORY_NOT_WORD: sre.CATEGORY_WORD, sre.CATEGORY_NOT_LINEBREAK: sre.CATEGORY_LINEBREAK,
}  # fmt: skip


def _class(items) -> frozenset[str]:
    negate = False
    out: set[str] = set()
    for op, av in items:
        if op is sre.NEGATE:
            negate = True
        elif op is sre.LITERAL:
            out.add(chr(av) if chr(av) in _WIDE else "中")
        elif op is sre.RANGE:
            lo, hi = av
            out |= {c for c in _SAMPLES if lo <= ord(c) <= hi} or {"中"}
        elif op is sre.CATEGORY:
            if av in _CATEGORIES:
                out |= {c for c in _SAMPLES if _CATEGORIES[av](c)}
            elif av in _NEGATED:
                out |= {c for c in _SAMPLES if not _CATEGORIES[_NEGATED[av]](c)}
            else:
                out |= _WIDE
        else:
            out |= _WIDE
    return frozenset(_WIDE - out) if negate else frozenset(out)
