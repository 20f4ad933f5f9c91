"""The sizes an expression's values may take, and the walk that bounds a parse tree with them.

A bound is written as ``Σ cᵢ·colᵢ + b`` (:class:`Size`): ``colᵢ`` stands for the size of a
column the event brings, ``cᵢ`` for how many times a value may copy it, ``b`` for what literals
and literal counts build; a :class:`Bound` holds one for the characters of a value and one for
the elements it holds. :class:`Walk` bounds each node of a tree bottom-up with the rule of its
function (the rules: :mod:`tidegate.jobspec.expression_cost`) and refuses what passes the
limits (:mod:`tidegate.jobspec.limits`) as it goes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from tidegate.errors import ConfigError, excerpt
from tidegate.jobspec.limits import SpecLimits, limit_fix
from tidegate.jobspec.numbers import whole_number
from tidegate.jobspec.regex_cost import check_pattern, like_pattern

LONG_MAX = 2**63 - 1  # the largest integer literal Spark reads (a BIGINT)
SCALAR = 16  # characters a number, date, time, interval or flag takes (its text included)
HASH = 128  # characters of a hash's text (sha2-512 in hex)


@dataclass(frozen=True)
class Size:
    """``Σ per_column[c]·size(c) + const``."""

    per_column: Mapping[str, int] = field(default_factory=dict)
    const: int = 0

    def __add__(self, other: Size) -> Size:
        cols = dict(self.per_column)
        for name, k in other.per_column.items():
            cols[name] = cols.get(name, 0) + k
        return Size(cols, self.const + other.const)

    def times(self, k: int) -> Size:
        return Size({n: c * k for n, c in self.per_column.items()}, self.const * k)

    def most(self, other: Size) -> Size:
        cols = dict(self.per_column)
        for name, k in other.per_column.items():
            cols[name] = max(cols.get(name, 0), k)
        return Size(cols, max(self.const, other.const))

    @property
    def copies(self) -> int:
        """How many times the value may copy the event: the largest coefficient."""
        return max(self.per_column.values(), default=0)

    @property
    def grows(self) -> bool:
        return bool(self.copies)


@dataclass(frozen=True)
class Bound:
    chars: Size  # characters (text), bytes (binary) or the sum over elements (arrays, maps, structs)
    items: Size  # elements of an array or map; 1 for anything else

    def __add__(self, other: Bound) -> Bound:
        return Bound(self.chars + other.chars, self.items + other.items)

    def most(self, other: Bound) -> Bound:
        return Bound(self.chars.most(other.chars), self.items.most(other.items))


ONE = Size(const=1)
SCALAR_BOUND = Bound(Size(const=SCALAR), ONE)


def const(chars: int, items: int = 1) -> Bound:
    return Bound(Size(const=chars), Size(const=items))


def text(size: Size) -> Bound:
    return Bound(size, ONE)


def column(name: str) -> Bound:
    """A column of the event: at most the payload, as text or as elements."""
    return Bound(Size({name: 1}), Size({name: 1}))


# -- the walk ----------------------------------------------------------------------------


@dataclass
class Walk:
    where: str
    expr: str
    limits: SpecLimits
    rules: Mapping[str, Callable[[Walk, exp.Expr], Bound]]  # a function's rule, by rule_name
    params: dict[str, Bound] = field(default_factory=dict)  # a lambda's parameters, while in its body

    def fail(self, problem: str, fix: str) -> ConfigError:
        return ConfigError(f"{self.where}: {problem} in {excerpt(self.expr)}", fix)

    def literal_int(self, node: exp.Expr | None, function: str, what: str) -> int:
        """An integer literal (a BIGINT, signed): a size computed from an event is refused."""
        value, sign = node, 1
        while isinstance(value, (exp.Paren, exp.Neg)):
            sign = -sign if isinstance(value, exp.Neg) else sign
            value = value.this
        if not (isinstance(value, exp.Literal) and not value.is_string):
            raise self.fail(
                f"{function}() takes {what} as an integer literal: computed from an event, one event could build"
                " a result of any size",
                f"write {what} as a whole number up to {self.limits.built_per_call:,}",
            )
        return sign * whole_number(value.this.rstrip("LlSsYy"), f"{self.where}: {what} of {function}()", 0, LONG_MAX)

    def count(self, node: exp.Expr | None, function: str, what: str) -> int:
        """An integer literal that sizes what one call builds, within ``built_per_call``."""
        number = self.literal_int(node, function, what)
        self.within(abs(number), function, f"{what} is {number:,}")
        return number

    def within(self, size: int, function: str, said: str) -> None:
        if size > self.limits.built_per_call:
            raise self.fail(
                f"{function}() would build more than {self.limits.built_per_call:,} elements or characters ({said})",
                f"keep what one call builds within {self.limits.built_per_call:,}; " + limit_fix("built_per_call"),
            )

    def literal_text(self, node: exp.Expr | None) -> str | None:
        return node.this if isinstance(node, exp.Literal) and node.is_string else None

    def bound(self, node: exp.Expr | None) -> Bound:
        """The bound of ``node``'s value, refused past the limits: every value a node builds is
        built, even one that a later function cuts short (lpad's padding, a substring's text)."""
        result = self._bound(node)
        self.check(result)
        return result

    def check(self, result: Bound) -> None:
        for what, size in (("characters", result.chars), ("elements", result.items)):
            if size.copies > self.limits.copies_of_the_event:
                raise self.fail(
                    f"the expression could build {size.copies:,} copies of the event's text (as {what}), more than"
                    f" {self.limits.copies_of_the_event}",
                    "build less from each event (each repeat, concat and replacement multiplies what it copies); "
                    + limit_fix("copies_of_the_event"),
                )
            if size.const > self.limits.built_per_expression:
                raise self.fail(
                    f"the expression could build {size.const:,} {what} from its literals and counts, more than"
                    f" {self.limits.built_per_expression:,}",
                    "nested builders multiply (repeat(repeat(x, 100), 100) is 10,000 copies): build less; "
                    + limit_fix("built_per_expression"),
                )

    def _bound(self, node: exp.Expr | None) -> Bound:
        if node is None:
            return const(0)
        if isinstance(node, exp.Literal):
            return text(Size(const=len(node.this))) if node.is_string else SCALAR_BOUND
        if isinstance(node, (exp.Null, exp.Boolean, exp.Star, exp.Interval, exp.DataType, exp.Var)):
            return SCALAR_BOUND
        if isinstance(node, exp.Column):
            root = node.parts[0].name.lower() if node.parts else node.name.lower()
            if root in self.params:
                return self.params[root]
            return column(".".join(p.name for p in node.parts).lower() if node.parts else node.name.lower())
        if isinstance(node, exp.Identifier):  # a lambda's parameter, bare
            return self.params.get(node.name.lower(), column(node.name.lower()))
        if isinstance(node, (exp.Paren, exp.Alias, exp.Distinct, exp.Ordered, exp.IgnoreNulls, exp.RespectNulls)):
            return self.bound(node.this) if node.this is not None else SCALAR_BOUND
        if isinstance(node, (exp.PropertyEQ, exp.Kwarg)):  # named_struct's 'name', value; f(name => value)
            return self.bound(node.expression)
        if isinstance(node, exp.DPipe):
            return text((self.bound(node.this) + self.bound(node.expression)).chars)
        if isinstance(node, exp.Dot):
            return self.bound(node.this)
        rule = self.rules.get(rule_name(node))
        if rule is not None:
            return rule(self, node)
        if isinstance(node, (exp.Predicate, exp.Connector, exp.Not, exp.Neg, exp.BitwiseNot)) or (
            isinstance(node, exp.Binary) and not isinstance(node, (exp.Dot, exp.DPipe))
        ):
            self.parts(node)  # bounded for what they build inside, and their patterns checked
            if isinstance(node, (exp.Like, exp.ILike)):
                self.like(node)
            return SCALAR_BOUND
        if isinstance(node, (exp.Case, exp.If)):
            parts = self.parts(node)
            return largest(parts)
        return total(self.parts(node))  # a node of another kind: what its parts hold

    def parts(self, node: exp.Expr) -> list[Bound]:
        return [self.bound(child) for child in node.iter_expressions() if not isinstance(child, exp.Lambda)]

    def args(self, node: exp.Expr) -> list[exp.Expr]:
        return list(node.expressions) if isinstance(node, exp.Anonymous) else list(node.iter_expressions())

    def like(self, node: exp.Like | exp.ILike) -> None:
        pattern = node.expression
        patterns = (
            list(pattern.this.expressions)
            if isinstance(pattern, exp.Any) and isinstance(pattern.this, exp.Tuple)
            else [pattern]
        )
        escape = "\\"
        parent = node.parent
        if isinstance(parent, exp.Escape) and self.literal_text(parent.expression):
            escape = self.literal_text(parent.expression) or "\\"
        for p in patterns:
            literal = self.literal_text(p)
            check_pattern(
                None if literal is None else like_pattern(literal, escape), "LIKE", self.where, self.expr, shown=literal
            )

    def pattern(self, node: exp.Expr | None, function: str) -> None:
        check_pattern(self.literal_text(node), f"{function}()", self.where, self.expr)

    def lambda_body(self, node: exp.Expr | None, over: list[Bound]) -> Bound:
        """What a lambda makes from all the elements of ``over`` (one array per parameter, the
        last for any further one): its value for one element is ``Σ cₚ·p + d`` in its parameters
        ``p``, so for all of them it is ``Σ cₚ·(the array's elements) + d·(the elements' count)``."""
        if not isinstance(node, exp.Lambda) or not over:
            return SCALAR_BOUND
        saved = dict(self.params)
        names = [param.name.lower() for param in node.expressions]
        for name in names:
            self.params[name] = Bound(Size({_PARAM + name: 1}), Size({_PARAM + name: 1}))
        try:
            body = self.bound(node.this)
        finally:
            self.params = saved
        items = largest([Bound(a.items, ONE) for a in over]).chars
        chars = items.times(body.chars.const)
        for i, name in enumerate(names):
            array = over[min(i, len(over) - 1)]
            chars = chars + array.chars.times(body.chars.per_column.get(_PARAM + name, 0))
        return Bound(chars, items)


_PARAM = "\0"  # a lambda parameter's variable: no column is named so


def rule_name(node: exp.Expr) -> str:
    return node.name.lower() if isinstance(node, exp.Anonymous) else type(node).__name__


def total(bounds: list[Bound]) -> Bound:
    out = const(0, 0)
    for b in bounds:
        out = out + b
    return Bound(out.chars, out.items if bounds else ONE)


def largest(bounds: list[Bound]) -> Bound:
    out = const(0)
    for b in bounds:
        out = out.most(b)
    return out
