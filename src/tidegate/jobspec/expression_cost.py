"""How much one expression may build for one event: a bound composed through every nesting.

Each node of an expression's parse tree gets an upper bound on the characters (or bytes) of
its value and on the elements it holds, written as ``Σ cᵢ·colᵢ + b``: ``colᵢ`` stands for
the size of a column the event brings, ``cᵢ`` for how many times the value may copy it, and
``b`` for what literals and literal counts build. Every column of an event comes from one
payload, so together they are at most the payload's size: the value is at most
``max(cᵢ)·payload + b`` (``headers``, which come beside the payload, are bounded by the readers
at 64 KiB: :mod:`tidegate.inputs.kafka.headers`). Functions compose these bounds (``concat``
adds them, ``repeat(x, 16)`` multiplies by 16, ``regexp_replace(x, p, 'r$1')`` multiplies by
the replacement's length plus one per group it quotes, ``to_json`` by the six characters an
escape may take), so nesting cannot slip past them: ``repeat(repeat('a', 10000), 16)`` is 160,000 characters, and four
levels of it are 655 million.

An expression is refused when its bound passes the limits of :mod:`tidegate.jobspec.limits`:
more than ``copies_of_the_event`` copies of the event, or more than ``built_per_expression``
characters or elements beyond it. A builder's count is an integer literal within
``built_per_call``, and a bound that would grow with the square of the event (a replacement
or a padding computed from the event) is refused outright. Every function on the allowlist
has its rule in :data:`RULES` (a test holds that), and a node of any other kind is bounded as
the sum of its parts. The sizes and the walk that applies the rules are
:mod:`tidegate.jobspec.expression_bounds`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sqlglot import exp

from tidegate.jobspec.expression_bounds import (
    HASH,
    LONG_MAX,
    ONE,
    SCALAR,
    SCALAR_BOUND,
    Bound,
    Size,
    Walk,
    const,
    largest,
    rule_name,
    text,
    total,
)
from tidegate.jobspec.limits import SpecLimits
from tidegate.jobspec.regex_cost import check_edit_distance, check_pattern

# -- the rules -------------------------------------------------------------------------
Rule = Callable[[Walk, exp.Expr], Bound]


def _scalar(w: Walk, node: exp.Expr) -> Bound:
    w.parts(node)
    return SCALAR_BOUND


def _hash(w: Walk, node: exp.Expr) -> Bound:
    w.parts(node)
    return const(HASH)


def _same(w: Walk, node: exp.Expr) -> Bound:
    """At most the first argument (trims, substrings, extracts, casts to its own kind)."""
    parts = w.parts(node)
    return parts[0] if parts else SCALAR_BOUND


def _scaled(k: int, plus: int = 0, *, items: bool = False) -> Rule:
    """``k`` characters per character of the first argument, plus ``plus`` (encodings, escapes, case)."""

    def rule(w: Walk, node: exp.Expr) -> Bound:
        parts = w.parts(node)
        first = parts[0] if parts else SCALAR_BOUND
        chars = first.chars.times(k) + Size(const=plus)
        return Bound(chars, first.chars + ONE if items else ONE)

    return rule


def _all(w: Walk, node: exp.Expr) -> Bound:
    return total(w.parts(node))


def _one_of(w: Walk, node: exp.Expr) -> Bound:
    """One of its arguments (coalesce, greatest, elt …)."""
    return largest(w.parts(node))


def _as_text(w: Walk, node: exp.Expr) -> Bound:
    """An argument's text form: a container's elements, with separators and brackets."""
    parts = w.parts(node)
    first = parts[0] if parts else SCALAR_BOUND
    return text(first.chars.times(2) + first.items.times(2) + Size(const=SCALAR))


def _cast(w: Walk, node: exp.Expr) -> Bound:
    parts = w.parts(node)
    to = node.args.get("to")
    if isinstance(to, exp.DataType) and to.is_type(
        *exp.DataType.TEXT_TYPES, exp.DataType.Type.BINARY, exp.DataType.Type.VARBINARY
    ):
        first = parts[0] if parts else SCALAR_BOUND
        return text(first.chars.times(2) + first.items.times(2) + Size(const=SCALAR))
    if isinstance(to, exp.DataType) and to.is_type(*exp.DataType.NESTED_TYPES):
        return parts[0] if parts else SCALAR_BOUND
    return SCALAR_BOUND


def _repeat(w: Walk, node: exp.Expr) -> Bound:
    times = max(w.count(node.args.get("times"), "repeat", "its count"), 0)
    return text(w.bound(node.this).chars.times(times))


def _array_repeat(w: Walk, node: exp.Expr) -> Bound:
    args = w.args(node)
    times = max(w.count(args[1] if len(args) > 1 else None, "array_repeat", "its count"), 0)
    element = w.bound(args[0]) if args else SCALAR_BOUND
    return Bound(element.chars.times(times), Size(const=times))


def _pad(w: Walk, node: exp.Expr) -> Bound:
    assert isinstance(node, exp.Pad)  # RULES gives this rule Pad nodes only
    w.parts(node)
    length = max(w.count(node.expression, node.sql_name().lower(), "its length"), 0)
    return text(Size(const=4 * length))  # characters, each at most four bytes


def _space(w: Walk, node: exp.Expr) -> Bound:
    return text(Size(const=max(w.count(node.this, "space", "its count"), 0)))


def _sequence(w: Walk, node: exp.Expr) -> Bound:
    start = w.literal_int(node.args.get("start"), "sequence", "its start")
    end = w.literal_int(node.args.get("end"), "sequence", "its stop")
    step_node = node.args.get("step")
    step = w.literal_int(step_node, "sequence", "its step") if step_node is not None else (1 if end >= start else -1)
    count = 0 if step == 0 else max((end - start) // step + 1, 0)
    w.within(count, "sequence", f"{count:,} elements")
    return Bound(Size(const=SCALAR * count), Size(const=count))


def _left(w: Walk, node: exp.Expr) -> Bound:
    """left, right, substring with a literal length: at most that many characters."""
    parts = w.parts(node)
    first = parts[0] if parts else SCALAR_BOUND
    length = node.args.get("length") if isinstance(node, exp.Substring) else node.args.get("expression")
    if isinstance(length, exp.Literal) and not length.is_string and length.this.isascii() and length.this.isdigit():
        limit = 4 * _digits(length.this)
        if not first.chars.grows and first.chars.const <= limit:
            return first
        return text(Size(const=limit))
    return first


def _regexp_replace(w: Walk, node: exp.Expr) -> Bound:
    w.pattern(node.expression, "regexp_replace")
    subject = w.bound(node.this)
    replacement = w.literal_text(node.args.get("replacement"))
    if replacement is None:
        raise w.fail(
            "regexp_replace() takes its replacement as a string literal: one computed from the event is copied"
            " into every match, so the result could grow with the square of the event",
            "write the replacement as a literal, e.g. regexp_replace(x, '[0-9]', '#')",
        )
    groups = len(re.findall(r"\$\d|\\\d", replacement))
    literal = len(re.sub(r"\$\d|\\\d", "", replacement))
    # every character may be a match (an empty one before it), each match writes the literal part,
    # and the groups it quotes never overlap: together they are at most the subject per reference
    return text(subject.chars.times(1 + groups + literal) + Size(const=literal))


def _replace(w: Walk, node: exp.Expr) -> Bound:
    args = w.args(node)
    subject = w.bound(args[0]) if args else SCALAR_BOUND
    search = w.bound(args[1]) if len(args) > 1 else SCALAR_BOUND
    if len(args) < 3:
        return subject
    replacement = w.bound(args[2])
    if replacement.chars.grows and (subject.chars.grows or search.chars.grows):
        raise w.fail(
            "replace() with a replacement computed from the event could grow with the square of the event",
            "write the replacement as a literal, or replace in a text of bounded length, e.g. left(x, 100)",
        )
    return text(subject.chars.times(1 + replacement.chars.const) + replacement.chars.times(1))


def _concat_ws(w: Walk, node: exp.Expr) -> Bound:
    parts = w.parts(node)
    if not parts:
        return const(0)
    sep, rest = parts[0], parts[1:]
    if sep.chars.grows and any(p.items.grows or p.chars.grows for p in rest):
        raise w.fail(
            "concat_ws() with a separator computed from the event could grow with the square of the event",
            "write the separator as a literal, e.g. concat_ws(',', a, b)",
        )
    joined = total(rest)
    return text(joined.chars + joined.items.times(sep.chars.const) + sep.chars)


def _array_join(w: Walk, node: exp.Expr) -> Bound:
    array = w.bound(node.this)
    sep = w.bound(node.expression)
    null = w.bound(node.args.get("null")) if node.args.get("null") is not None else const(0)
    glue = sep.chars + null.chars
    if glue.grows and array.items.grows:
        raise w.fail(
            "array_join() with a separator computed from the event could grow with the square of the event",
            "write the separator as a literal, e.g. array_join(xs, ',')",
        )
    return text(array.chars + array.items.times(glue.const))


def _format(w: Walk, node: exp.Expr) -> Bound:
    fmt_node = node.this if isinstance(node, exp.Format) else next(iter(w.args(node)), None)
    fmt = w.literal_text(fmt_node)
    if fmt is None:
        raise w.fail(
            "format_string()/printf() with a computed format is not allowed: a width in it could build a string"
            " of any size",
            "write the format as a string literal, e.g. format_string('%05d', n)",
        )
    args = [w.bound(a) for a in (node.expressions if isinstance(node, exp.Format) else w.args(node)[1:])]
    widest = largest([Bound(_as_text_size(a), ONE) for a in args]).chars if args else Size()
    total = Size(const=len(fmt))
    for spec in _FORMAT_SPEC.finditer(fmt):
        width, precision = (_digits(spec[part]) for part in ("width", "precision"))
        for number, what in ((width, "width"), (precision, "precision")):
            if number > w.limits.built_per_call:
                raise w.fail(
                    f"a {what} of {number:,} in format_string()/printf() is not allowed",
                    f"widths and precisions up to {w.limits.built_per_call:,}",
                )
        total = total + Size(const=width + precision + SCALAR) + (widest if spec["conversion"] not in "%n" else Size())
    return text(total)


# Java's Formatter: %[argument_index$][flags][width][.precision][t]conversion
def _digits(text: str | None) -> int:
    """ASCII digits as a number, a run longer than any size as :data:`LONG_MAX` (never int() of
    thousands of digits)."""
    return int(text) if text and len(text) <= 18 else LONG_MAX if text else 0


_FORMAT_SPEC = re.compile(
    r"%(?P<index>\d+\$|<)?(?P<flags>[-#+ 0,(]*)(?P<width>\d+)?(?:\.(?P<precision>\d+))?"
    r"(?P<conversion>[tT]?[a-zA-Z%])",
    re.A,
)  # Java reads the digits 0-9 only


def _as_text_size(b: Bound) -> Size:
    return b.chars.times(2) + b.items.times(2) + Size(const=SCALAR)


def _format_number(w: Walk, node: exp.Expr) -> Bound:
    args = w.args(node)
    for a in args:
        w.bound(a)
    if len(args) > 1 and w.literal_text(args[1]) is None:
        digits = w.count(args[1], "format_number", "its decimal places")
        if digits > 100:
            raise w.fail(
                f"format_number() with {digits} decimal places is not allowed", "ask for at most 100 decimal places"
            )
        return const(SCALAR * 4 + digits)
    return const(SCALAR * 4 + 2 * len(w.literal_text(args[1]) or "") if len(args) > 1 else SCALAR * 4)


def _datetime_text(w: Walk, node: exp.Expr) -> Bound:
    """date_format, from_unixtime, to_char: a pattern's letters each write at most a few words."""
    parts = w.parts(node)
    fmt = node.args.get("format") if not isinstance(node, exp.Anonymous) else None
    pattern = w.literal_text(fmt) if fmt is not None else None
    first = parts[0] if parts else SCALAR_BOUND
    if pattern is not None:
        return text(first.chars.times(2) + Size(const=16 * len(pattern) + SCALAR))
    return text(total(parts).chars.times(16) + Size(const=SCALAR))


def _regexp(function: str, result: Callable[[Bound], Bound]) -> Rule:
    def rule(w: Walk, node: exp.Expr) -> Bound:
        args = w.args(node)
        subject = w.bound(args[0]) if args else SCALAR_BOUND
        for a in args[1:]:
            w.bound(a)
        w.pattern(args[1] if len(args) > 1 else None, function)
        return result(subject)

    return rule


def _split_result(subject: Bound) -> Bound:
    """The pieces of a text: together at most the text, one more piece than it has characters."""
    return Bound(subject.chars, subject.chars + ONE)


def _str_to_map(w: Walk, node: exp.Expr) -> Bound:
    subject = w.bound(node.this)
    for name, default in (("pair_delim", ","), ("key_value_delim", ":")):
        delim = node.args.get(name)
        w.bound(delim)
        if delim is not None:
            w.pattern(delim, "str_to_map")
        else:
            check_pattern(default, "str_to_map()", w.where, w.expr)
    return _split_result(subject)


def _levenshtein(w: Walk, node: exp.Expr) -> Bound:
    a, b = w.bound(node.this), w.bound(node.expression)
    w.bound(node.args.get("ins_cost"))
    cells = None if a.chars.grows or b.chars.grows else max(a.chars.const, 1) * max(b.chars.const, 1)
    check_edit_distance(cells, w.limits.edit_distance_cells, w.where, w.expr)
    return SCALAR_BOUND


def _lambda_over_array(w: Walk, node: exp.Expr) -> Bound:
    """transform, filter, exists, forall, zip_with, map_filter, transform_keys/values, map_zip_with."""
    args = w.args(node)
    arrays = [w.bound(a) for a in args if not isinstance(a, exp.Lambda)]
    made = w.lambda_body(next((a for a in args if isinstance(a, exp.Lambda)), None), arrays)
    name = rule_name(node)
    if name in ("Exists", "forall", "ArrayAll", "ArrayAny"):
        return SCALAR_BOUND
    if name in ("ArrayFilter", "map_filter"):
        return arrays[0] if arrays else SCALAR_BOUND
    if name in ("transform_keys", "transform_values", "map_zip_with"):  # the other half of each entry stays
        return Bound(made.chars + total(arrays).chars, made.items)
    return made


def _elements(w: Walk, node: exp.Expr) -> Bound:
    """array(...), struct(...), map(...): their arguments, one element each."""
    args = w.args(node)
    parts = [w.bound(a) for a in args]
    return Bound(total(parts).chars, Size(const=len(args)))


def _added(w: Walk, node: exp.Expr) -> Bound:
    """array_append, array_prepend, array_union, concat of arrays, map_concat …: both sides."""
    return total(w.parts(node))


def _array_insert(w: Walk, node: exp.Expr) -> Bound:
    array = w.bound(node.this)
    position = abs(w.count(node.args.get("position"), "array_insert", "its position"))
    element = w.bound(node.expression)
    return Bound(array.chars + element.chars + Size(const=position), array.items + Size(const=position + 1))


def _flatten(w: Walk, node: exp.Expr) -> Bound:
    inner = w.bound(node.this)
    return Bound(inner.chars, inner.chars + inner.items)


def _arrays_zip(w: Walk, node: exp.Expr) -> Bound:
    parts = w.parts(node)
    items = largest([Bound(p.items, ONE) for p in parts]).chars if parts else ONE
    return Bound(total(parts).chars + items.times(SCALAR), items)


def _element(w: Walk, node: exp.Expr) -> Bound:
    """One element of an array or map (element_at, get, [i], array_max …): at most all of it."""
    parts = w.parts(node)
    first = parts[0] if parts else SCALAR_BOUND
    return Bound(first.chars, ONE)


def _sentences(w: Walk, node: exp.Expr) -> Bound:
    subject = w.bound(next(iter(w.args(node)), None))
    return Bound(subject.chars.times(2) + Size(const=SCALAR), subject.chars + ONE)


def _json_keys(w: Walk, node: exp.Expr) -> Bound:
    subject = w.bound(node.this)
    return Bound(subject.chars, subject.chars + ONE)


def _from_json(w: Walk, node: exp.Expr) -> Bound:
    """A document read into values: each number or flag of one character may become a scalar."""
    parts = w.parts(node)
    first = parts[0] if parts else SCALAR_BOUND
    return Bound(first.chars.times(SCALAR) + Size(const=SCALAR), first.chars + ONE)


def _decode_case(w: Walk, node: exp.Expr) -> Bound:
    parts = w.parts(node)
    return largest(parts[2::2] + parts[-1:]) if len(parts) > 2 else largest(parts)


def _elt(w: Walk, node: exp.Expr) -> Bound:
    parts = w.parts(node)
    return largest(parts[1:]) if len(parts) > 1 else SCALAR_BOUND


def _overlay(w: Walk, node: exp.Expr) -> Bound:
    parts = w.parts(node)
    return text(total(parts[:2]).chars)


def _named(rule: Rule, *names: str) -> dict[str, Rule]:
    return dict.fromkeys(names, rule)


RULES: dict[str, Rule] = {
    # builders: what they build is an argument, taken as a literal count
    **_named(_repeat, "Repeat"), **_named(_array_repeat, "array_repeat"), **_named(_pad, "Pad"),
    **_named(_space, "Space"), **_named(_sequence, "GenerateSeries"), **_named(_array_insert, "ArrayInsert"),
    **_named(_format, "Format", "printf"), **_named(_format_number, "format_number"),
    # text that may grow: replacements, joins, encodings, escapes
    **_named(_regexp_replace, "RegexpReplace"), **_named(_replace, "Replace"),
    **_named(_concat_ws, "ConcatWs"), **_named(_array_join, "ArrayToString"), **_named(_all, "Concat"),
    **_named(_scaled(2, 4), "ToBase64", "Hex", "quote"), **_named(_scaled(3), "Upper", "Lower", "Initcap",
                                                                    "make_valid_utf8", "url_encode"),
    **_named(_scaled(4), "mask", "Translate", "Encode"), **_named(_scaled(3), "Decode"),
    **_named(_scaled(6, 64), "JSONFormat", "to_csv", "to_variant_object"),
    **_named(_scaled(4, 64), "schema_of_json", "schema_of_csv", "schema_of_variant"),
    **_named(_from_json, "FromJson", "from_csv", "ParseJSON", "try_parse_json", "variant_get", "try_variant_get"),
    **_named(_as_text, "to_varchar"), **_named(_datetime_text, "TimeToStr", "UnixToStr", "ToChar"),
    **_named(_cast, "Cast", "TryCast"),
    **_named(_overlay, "Overlay"), **_named(_decode_case, "DecodeCase"), **_named(_elt, "Elt"),
    # at most the first argument
    **_named(_same, "Trim", "btrim", "SubstringIndex", "SplitPart", "FromBase64", "Unhex", "ToBinary", "binary",
             "try_to_binary", "validate_utf8", "try_validate_utf8", "JSONExtractScalar", "ParseUrl", "try_parse_url",
             "url_decode", "try_url_decode", "Reverse",
             "Collate", "ArrayCompact", "ArrayDistinct", "ArrayExcept", "ArrayRemove", "ArraySort", "ArraySlice",
             "MapKeys", "map_values", "map_entries", "MapFromEntries"),
    **_named(_left, "Left", "Right", "Substring"),
    **_named(_element, "Bracket", "get", "ArrayMax", "ArrayMin"),
    # one of the arguments
    **_named(_one_of, "Coalesce", "Nullif", "Nvl2", "Greatest", "Least", "Nanvl"),
    # arrays, maps and structs
    **_named(_elements, "Array", "Struct", "VarMap"),
    **_named(_added, "ArrayAppend", "ArrayPrepend", "ArrayIntersect", "array_union", "map_concat", "ArrayConcat",
             "Map"),
    **_named(_flatten, "Flatten"), **_named(_arrays_zip, "ArraysZip"),
    **_named(_lambda_over_array, "Transform", "ArrayFilter", "Exists", "forall", "ArrayAll", "ArrayAny",
             "zip_with", "map_filter", "transform_keys", "transform_values", "map_zip_with"),
    # patterns and edit distance: their work is bounded, their result is a scalar or the subject's parts
    **_named(_regexp("rlike", lambda s: SCALAR_BOUND), "RegexpLike", "regexp", "regexp_like"),
    **_named(_regexp("regexp_count", lambda s: SCALAR_BOUND), "RegexpCount"),
    **_named(_regexp("regexp_instr", lambda s: SCALAR_BOUND), "RegexpInstr"),
    **_named(_regexp("regexp_extract_all", _split_result), "RegexpExtractAll"),
    **_named(_regexp("split", _split_result), "RegexpSplit"), **_named(_str_to_map, "StrToMap"),
    **_named(_regexp("regexp_extract", lambda s: Bound(s.chars, ONE)), "RegexpExtract"),
    **_named(_regexp("regexp_substr", lambda s: Bound(s.chars, ONE)), "RegexpSubstr"),
    **_named(_levenshtein, "Levenshtein"), **_named(_sentences, "sentences"), **_named(_json_keys, "JSONKeys"),
    # numbers, times, intervals and flags
    **_named(
        _scalar,
        "Abs", "Acos", "Acosh", "AddMonths", "ArrayContains", "ArrayPosition", "ArraySize", "Ascii", "Asin",
        "Asinh", "AtTimeZone", "Atan", "Atan2", "Atanh", "BitLength", "BitwiseCount", "BitwiseLeftShift",
        "BitwiseRightShift", "Cbrt", "Ceil", "Contains", "ConvertTimezone", "Cos", "Cosh", "Cot", "Csc",
        "CurrentDate", "CurrentTime", "CurrentTimestamp", "CurrentTimezone", "DateDiff", "DateFromUnixDate",
        "DateTrunc", "Day", "DayOfMonth", "DayOfWeek", "DayOfYear", "Degrees", "EndsWith", "EqualNull", "Escape",
        "Exp", "Extract", "Factorial", "Floor", "FromTimeZone", "Getbit", "Hour", "IsNan", "LastDay", "Length",
        "Ln", "Localtimestamp", "Log", "MakeInterval", "MapContainsKey", "Minute", "Mod", "Month", "MonthsBetween",
        "Negative", "NextDay", "Pi", "Pow", "Quarter", "Radians", "Rint", "Round", "SafeAdd", "SafeDivide",
        "SafeMultiply", "SafeSubtract", "Sec", "Second", "Sign", "Sin", "Sinh", "Sqrt", "StartsWith", "StrPosition",
        "StrToTime", "StrToUnix", "Tan", "Tanh", "Time", "TimeDiff", "TimeTrunc", "TimestampAdd", "TimestampDiff",
        "TimestampFromParts", "TimestampTrunc", "ToNumber", "TsOrDsAdd", "TsOrDsToDate", "UnixDate", "UnixMicros",
        "UnixMillis", "UnixSeconds", "WeekOfYear", "WidthBucket", "Year", "arrays_overlap", "bigint", "bround",
        "cardinality", "date_part", "datepart", "decimal", "e", "expm1", "find_in_set", "hypot", "is_valid_utf8",
        "is_valid_variant", "is_variant_null", "isnotnull", "isnull", "json_array_length", "log1p", "luhn_check",
        "make_date", "make_dt_interval", "make_time", "make_timestamp_ltz", "make_timestamp_ntz",
        "make_ym_interval", "now", "nullifzero", "octet_length", "pmod", "positive", "shiftrightunsigned",
        "smallint", "time_from_micros", "time_from_millis", "time_from_seconds", "time_to_micros", "time_to_millis",
        "time_to_seconds", "timestamp_micros", "timestamp_millis", "timestamp_seconds", "tinyint", "to_time",
        "to_timestamp_ltz", "to_timestamp_ntz", "try_make_interval", "try_make_timestamp", "try_make_timestamp_ltz",
        "try_make_timestamp_ntz", "try_mod", "try_to_date", "try_to_number", "try_to_time", "try_to_timestamp",
        "weekday", "zeroifnull",
    ),
    **_named(_one_of, "If", "Case"),  # a branch's value
    # a value of bounded size whatever the arguments (hashes, names of things)
    **_named(_hash, "MD5", "SHA", "SHA2", "crc32", "hash", "xxhash64", "bin", "conv", "Typeof", "Dayname",
             "Monthname", "Chr", "Soundex", "Collation", "datename"),
}  # fmt: skip


def check_cost(tree: exp.Expr, where: str, expr: str, limits: SpecLimits) -> Bound:
    """Bound ``tree`` (the expression ``expr`` of field ``where``) and refuse it past ``limits``."""
    return Walk(where, expr, limits, RULES).bound(tree)
