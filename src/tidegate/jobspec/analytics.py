"""The ``analytics`` section: LAG, LAST and ISFIRST as a spec writes them, read without Spark.

Each entry is an output column and one function call in Azure Stream Analytics' form::

    analytics:
      prev_temperature: LAG(temperature) OVER (PARTITION BY deviceId LIMIT DURATION(minute, 10))
      first_in_hour: ISFIRST(hour, 1) OVER (PARTITION BY deviceId)
      last_hot_at: LAST(event_time) OVER (PARTITION BY deviceId LIMIT DURATION(hour, 1) WHEN temperature > 30)

What the functions compute, and when a result is final, is :mod:`tidegate.eventtime.analytics`'s.
Here: the text is split into its parts (:func:`parse_analytics`), the function named is looked
up in the registry (:mod:`tidegate.eventtime.analytic_functions`), which reads its
arguments, each Spark SQL part is
checked like any spec expression, and what can be told without Spark about types is told
(:func:`_check_types`): a WHEN that is not boolean, a default of another type than the value.
Errors name the field (``analytics.prev_temperature``) and the fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tidegate.errors import ConfigError, excerpt
from tidegate.eventtime.analytic_functions import Call, forms, lookup
from tidegate.eventtime.analytics import Analytic
from tidegate.eventtime.durations import MAX_DURATION_US
from tidegate.jobspec.expressions import canonical_expression, check_expression, normalise_expression, token_spans
from tidegate.jobspec.fields import BUILTIN_TYPES, added_column_name, mapping
from tidegate.jobspec.numbers import whole_number

# Stream Analytics' time units and their abbreviations, in µs
TIME_UNITS = {
    "day": 86_400_000_000, "dd": 86_400_000_000, "d": 86_400_000_000,
    "hour": 3_600_000_000, "hh": 3_600_000_000,
    "minute": 60_000_000, "mi": 60_000_000, "n": 60_000_000,
    "second": 1_000_000, "ss": 1_000_000, "s": 1_000_000,
    "millisecond": 1_000, "ms": 1_000,
    "microsecond": 1, "mcs": 1,
}  # fmt: skip
WRITTEN_UNITS = (("day", 86_400_000_000), ("hour", 3_600_000_000), ("minute", 60_000_000),
                  ("second", 1_000_000), ("millisecond", 1_000), ("microsecond", 1))  # fmt: skip
UNIT_HINT = "use day, hour, minute, second, millisecond or microsecond (or dd, hh, mi, ss, ms, mcs)"
_TYPE_FAMILY = {"int": "number", "bigint": "number", "double": "number", "float": "number", "string": "string",
                "boolean": "boolean", "timestamp": "timestamp", "date": "date"}  # fmt: skip


@dataclass(frozen=True)
class AnalyticSpec:
    """One analytic column: the function with its span, and its Spark SQL parts."""

    name: str
    function: Analytic
    expression: str | None = None  # LAG / LAST: the value looked up
    default: str | None = None  # LAG / LAST: when no event qualifies (NULL when absent)
    when: str | None = None
    partition_by: tuple[str, ...] = ()

    @property
    def span_us(self) -> int:
        return self.function.span_us

    def text(self) -> str:
        """The spec's form, normalised: ``parse_analytics`` reads it back to an equal value."""
        fn = self.function
        call = f"{fn.name}({', '.join(fn.text_args(self.expression, self.default, written_unit))})"
        over = []
        if self.partition_by:
            over.append("PARTITION BY " + ", ".join(self.partition_by))
        if fn.limit_us is not None:
            unit, count = written_unit(fn.limit_us)
            over.append(f"LIMIT DURATION({unit}, {count})")
        if self.when is not None:
            over.append(f"WHEN {self.when}")
        return call + (f" OVER ({' '.join(over)})" if over else "")

    def canonical(self) -> list:
        """What the fingerprint hashes: kind, span in µs, offset and each part token by token;
        for ISFIRST also its intervals' edges (a changed convention is a changed query)."""

        def c(expr: str | None) -> str | None:
            return None if expr is None else canonical_expression(expr)

        n = self.function.fingerprint_n
        return [
            self.name,
            self.function.kind,
            self.span_us,
            n,
            c(self.expression),
            c(self.default),
            c(self.when),
            [c(p) for p in self.partition_by],
        ] + self.function.fingerprint_extra()


def written_unit(us: int) -> tuple[str, int]:
    for unit, size in WRITTEN_UNITS:
        if us % size == 0:
            return unit, us // size
    raise AssertionError(us)  # every duration is a whole number of µs


def parse_analytics(value: Any, payload: Mapping[str, str], builtins: Iterable[str],
                    reserved: frozenset[str]) -> tuple[AnalyticSpec, ...]:  # fmt: skip
    """The ``analytics`` section: output column → function call, in the order written.

    All functions of a job share one PARTITION BY: the stage orders each key's events once.
    """
    if value is None:
        return ()
    items = mapping(value, "analytics")
    if not items:
        raise ConfigError(
            "analytics is empty", "add e.g. prev_t: LAG(t) OVER (LIMIT DURATION(minute, 10)), or remove it"
        )
    known = list(payload) + [b for b in builtins if b not in payload]
    out = []
    for name, text in items.items():
        where = f"analytics.{name}"
        added_column_name(name, where, reserved, payload, "analytic column", "_lag")
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(
                f"{where} is {excerpt(text)}", "write one call, e.g. LAG(temperature) OVER (LIMIT DURATION(minute, 10))"
            )
        out.append(_parse_one(name, normalise_expression(text), where, known, payload))
    keys = {tuple(canonical_expression(p) for p in a.partition_by) for a in out}
    if len(keys) > 1:
        raise ConfigError(
            "analytics: the functions partition by different keys ("
            + "; ".join(f"{a.name}: {', '.join(a.partition_by) or 'none'}" for a in out)
            + ")",
            "give every function the same PARTITION BY (or none); split the job in two for different keys",
        )
    return tuple(out)


def _parse_one(name: str, text: str, where: str, known: list[str], payload: Mapping[str, str]) -> AnalyticSpec:
    try:
        toks = token_spans(text)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc.problem}", exc.fix) from None
    head = toks[0][1].upper() if toks and toks[0][0] == "word" else ""
    if lookup(head) is None or len(toks) < 2 or toks[1][1] != "(":
        raise ConfigError(
            f"{where}: {excerpt(text)} is not an analytic function call",
            f"write {forms()}; plain expressions go under select",
        )
    args, after = _group(toks, 1, text, where)
    over: dict[str, Any] = {}
    if after < len(toks):
        if toks[after][1].upper() != "OVER" or after + 1 >= len(toks) or toks[after + 1][1] != "(":
            raise ConfigError(
                f"{where}: unexpected {excerpt(toks[after][1])} after {head}(…)", "write OVER ( … ) or nothing"
            )
        clause, end = _group(toks, after + 1, text, where, split=False)
        if end < len(toks):
            raise ConfigError(
                f"{where}: unexpected {excerpt(toks[end][1])} after OVER ( … )", "end the call with OVER's ')'"
            )
        over = _over(clause[0] if clause else "", where)
    for i, arg in enumerate(args):
        if not arg:
            raise ConfigError(f"{where}: argument {i + 1} of {head} is empty", "remove the extra comma")
    spec = _function(name, head, args, over, where)
    for part, expr in (("expression", spec.expression), ("default", spec.default), ("WHEN", spec.when)):
        if expr is not None:
            check_expression(expr, f"{where} ({part})", known)
    for expr in spec.partition_by:
        check_expression(expr, f"{where} (PARTITION BY)", known)
    _check_types(spec, where, payload)
    return spec


def _function(name: str, head: str, args: list[str], over: dict, where: str) -> AnalyticSpec:
    """The registered function ``head`` reads its arguments (and OVER's LIMIT DURATION)."""
    function = lookup(head)
    assert function is not None  # the caller checked that head names a registered function
    parsed = function.parse(Call(where, args, over.get("limit"), _span))
    return AnalyticSpec(
        name, parsed.function, parsed.expression, parsed.default, over.get("when"), tuple(over.get("partition_by", ()))
    )


def _group(toks: list, open_at: int, text: str, where: str, split: bool = True) -> tuple[list[str], int]:
    """The text inside the brackets opening at token ``open_at`` (split at top-level commas),
    and the index of the token after the closing bracket."""
    depth, start, parts = 0, toks[open_at][3], []
    for i in range(open_at, len(toks)):
        sym = toks[i][1] if toks[i][0] == "symbol" else ""
        if sym in ("(", "[", "{"):
            depth += 1
        elif sym in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                parts.append(text[start : toks[i][2]].strip())
                return ([] if parts == [""] else parts), i + 1
        elif sym == "," and depth == 1 and split:
            parts.append(text[start : toks[i][2]].strip())
            start = toks[i][3]
    raise ConfigError(f"{where}: a bracket opened in {excerpt(text)} is not closed", "close it with ')'")


def _over(clause: str, where: str) -> dict[str, Any]:
    """PARTITION BY …, LIMIT DURATION(unit, n), WHEN … — in that order, each optional."""
    toks = token_spans(clause)
    words = [t[1].upper() if t[0] == "word" else "" for t in toks]
    depth, marks = 0, []
    for i, t in enumerate(toks):
        if t[1] in ("(", "[", "{") and t[0] == "symbol":
            depth += 1
        elif t[1] in (")", "]", "}") and t[0] == "symbol":
            depth -= 1
        elif (
            depth == 0
            and i + 1 < len(toks)
            and (words[i], words[i + 1]) in (("PARTITION", "BY"), ("LIMIT", "DURATION"))
        ):
            marks.append((words[i], i, i + 2))
        elif depth == 0 and words[i] == "WHEN" and not any(m[0] == "WHEN" for m in marks):
            marks.append(("WHEN", i, i + 1))
    if not marks or marks[0][1] != 0:
        raise ConfigError(
            f"{where}: cannot read OVER ({clause})",
            "write OVER ([PARTITION BY key] [LIMIT DURATION(unit, n)] [WHEN condition]), in that order",
        )
    order = [m[0] for m in marks]
    if order != sorted(order, key=["PARTITION", "LIMIT", "WHEN"].index) or len(set(order)) != len(order):
        raise ConfigError(
            f"{where}: OVER ({clause}) repeats or reorders its parts",
            "write PARTITION BY, then LIMIT DURATION, then WHEN, each at most once",
        )
    out: dict[str, Any] = {}
    for j, (kind, _, body) in enumerate(marks):
        end = toks[marks[j + 1][1]][2] if j + 1 < len(marks) else len(clause)
        piece = clause[toks[body][2] : end].strip() if body < len(toks) else ""
        if not piece:
            raise ConfigError(f"{where}: {kind} in OVER ( … ) is empty", "complete it or remove it")
        if kind == "PARTITION":
            out["partition_by"] = _group(token_spans(f"({piece})"), 0, f"({piece})", where)[0]
        elif kind == "WHEN":
            out["when"] = piece
        else:
            inner = _group(token_spans(piece), 0, piece, where) if piece.startswith("(") else ([], 0)
            if len(inner[0]) != 2 or inner[1] != len(token_spans(piece)):
                raise ConfigError(
                    f"{where}: cannot read LIMIT DURATION{piece}", "write LIMIT DURATION(unit, n), e.g. (minute, 10)"
                )
            out["limit"] = _span(inner[0][0], inner[0][1], f"{where} (LIMIT DURATION)")
    return out


def _span(unit: str, count: str, where: str) -> int:
    size = TIME_UNITS.get(unit.lower()) or TIME_UNITS.get(unit.lower().rstrip("s"))
    if size is None:
        raise ConfigError(f"{where}: {excerpt(unit)} is not a time unit", UNIT_HINT)
    return whole_number(count, f"{where}: the count of {unit}s", 0, MAX_DURATION_US // size, f"{unit}s") * size


def type_family(expr: str | None, payload: Mapping[str, str]) -> str | None:
    """The type family of a single column or literal; None for anything else (left to Spark)."""
    if expr is None:
        return None
    toks = token_spans(expr)
    if len(toks) == 2 and toks[0][1] == "-" and toks[1][0] == "number":
        toks = toks[1:]
    if len(toks) != 1:
        return None
    kind, text = toks[0][0], toks[0][1]
    if kind == "number":
        return "number"
    if kind == "string":
        return "string"
    name = text.strip("`")
    if text.lower() in ("true", "false"):
        return "boolean"
    if text.lower() == "null":
        return "null"
    typ = next((t for f, t in payload.items() if f.lower() == name.lower()), BUILTIN_TYPES.get(name.lower()))
    return None if typ is None else _TYPE_FAMILY.get(typ, "number" if typ.startswith("decimal") else None)


def _check_types(spec: AnalyticSpec, where: str, payload: Mapping[str, str]) -> None:
    when = type_family(spec.when, payload)
    if when not in (None, "boolean", "null"):
        raise ConfigError(
            f"{where}: WHEN {spec.when} is a {when}, not a condition",
            f"write a boolean condition, e.g. WHEN {spec.when} IS NOT NULL",
        )
    value, default = type_family(spec.expression, payload), type_family(spec.default, payload)
    if value and default and "null" not in (value, default) and value != default:
        raise ConfigError(
            f"{where}: the default {spec.default} is a {default} but {spec.expression} is a {value}",
            "give a default of the value's type (Stream Analytics requires the same type), or leave it out for NULL",
        )
