"""Spark SQL expressions in a job spec, checked without Spark: columns and functions.

A spec's ``filter``, ``select``, ``group_by`` and ``aggregates`` are Spark SQL the engine
runs. Spec parsing must stay cheap and JVM-free (the controller and Airflow parse specs), so
Spark's own parser is not available here; instead a tokenizer that reads literals the way
Spark's lexer does (quotes, backslash escapes, raw ``r'…'`` strings, backquoted names)
finds every identifier and every ``name(`` call, and :func:`check_expression` holds them to
two rules:

* every identifier that is not a function, keyword, literal, struct field, alias or lambda
  parameter is a known column (a typo is caught when the spec is loaded);
* every call is a Spark built-in on :data:`SCALAR_FUNCTIONS` — or, under ``aggregates``
  only, :data:`AGGREGATE_FUNCTIONS`. Anything else is refused with the function and the
  field named: calls into Java (``reflect``), failing on purpose (``raise_error``),
  randomness and file placement (``rand``, ``input_file_name``: a replay would differ),
  generators, window functions, subqueries, qualified or computed function names, UDFs.
  Comments are refused too: Spark would read less of the text than was checked.

The check does not type-check; Spark reports what is left when the query starts
(``tidegate test-query`` finds it early). tests/jobspec holds Spark's parser to the same
answer on a corpus of expressions.
"""

from __future__ import annotations

import difflib
import re
from typing import Iterable

from tidegate.errors import ConfigError

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
# type names that take arguments after AS or :: (cast(x AS varchar(10)), x::decimal(10, 2))
_TYPE_CALLS = frozenset(("decimal", "dec", "numeric", "varchar", "char", "character"))


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# -- the allowlist: Spark 4 built-ins computed from the row alone ------------------------
# Grouped as Spark's own function reference groups them. tests/jobspec checks every name
# against Spark's FunctionRegistry, so a name here is a built-in, never a UDF or catalog
# function. Not listed (refused): see _REFUSED for why the notable ones are.
SCALAR_FUNCTIONS = (
    _names(  # conditional and null handling
        """between coalesce if ifnull nanvl nullif nullifzero nvl nvl2 zeroifnull equal_null isnan
        isnotnull isnull like ilike rlike regexp regexp_like"""
    )
    | _names(  # casts (try_cast is syntax, not in the function registry)
        "cast try_cast bigint binary boolean date decimal double float int smallint string time timestamp tinyint"
    )
    | _names(  # arithmetic and math
        """abs acos acosh asin asinh atan atan2 atanh bin bround cbrt ceil ceiling conv cos cosh cot
        csc degrees div e exp expm1 factorial floor greatest hex hypot least ln log log10 log1p log2
        mod negative pi pmod positive pow power radians rint round sec sign signum sin sinh sqrt tan
        tanh try_add try_divide try_mod try_multiply try_subtract unhex width_bucket bit_count
        bit_get getbit shiftleft shiftright shiftrightunsigned"""
    )
    | _names(  # text
        """ascii base64 bit_length btrim char char_length character_length chr collate collation
        concat_ws contains decode elt encode endswith find_in_set format_number format_string
        initcap instr is_valid_utf8 lcase left len length levenshtein locate lower lpad ltrim
        luhn_check make_valid_utf8 mask octet_length overlay position printf quote regexp_count
        regexp_extract regexp_extract_all regexp_instr regexp_replace regexp_substr repeat replace
        right rpad rtrim sentences soundex space split split_part startswith substr substring
        substring_index to_binary to_char to_number to_varchar translate trim try_to_binary
        try_to_number try_validate_utf8 ucase unbase64 upper validate_utf8"""
    )
    | _names(  # date and time (timestampadd/timestampdiff are syntax)
        """add_months convert_timezone curdate current_date current_time current_timestamp
        current_timezone date_add date_diff date_format date_from_unix_date date_part date_sub
        date_trunc dateadd datediff datepart day dayname dayofmonth dayofweek dayofyear extract
        from_unixtime from_utc_timestamp hour last_day localtimestamp make_date make_dt_interval
        make_interval make_time make_timestamp make_timestamp_ltz make_timestamp_ntz
        make_ym_interval minute month monthname months_between next_day now quarter second
        time_diff time_from_micros time_from_millis time_from_seconds time_to_micros
        time_to_millis time_to_seconds time_trunc timestamp_micros timestamp_millis
        timestamp_seconds timestampadd timestampdiff to_date to_time to_timestamp
        to_timestamp_ltz to_timestamp_ntz to_unix_timestamp to_utc_timestamp trunc
        try_make_interval try_make_timestamp try_make_timestamp_ltz try_make_timestamp_ntz
        try_to_date try_to_time try_to_timestamp unix_date unix_micros unix_millis unix_seconds
        unix_timestamp weekday weekofyear year"""
    )
    | _names(  # arrays, maps, structs and their lambdas
        """array array_append array_compact array_contains array_distinct array_except
        array_insert array_intersect array_join array_max array_min array_position
        array_prepend array_remove array_repeat array_size array_union arrays_overlap arrays_zip
        flatten get sequence slice sort_array cardinality concat element_at reverse size
        try_element_at map map_concat map_contains_key map_entries map_from_arrays
        map_from_entries map_keys map_values str_to_map named_struct struct aggregate array_sort
        exists filter forall map_filter map_zip_with reduce transform transform_keys
        transform_values zip_with"""
    )
    | _names(  # hashes, JSON, CSV, URLs, variants
        """crc32 hash md5 sha sha1 sha2 xxhash64 from_json get_json_object json_array_length
        json_object_keys schema_of_json to_json from_csv schema_of_csv to_csv parse_url
        try_parse_url try_url_decode url_decode url_encode is_valid_variant is_variant_null
        parse_json schema_of_variant to_variant_object try_parse_json try_variant_get variant_get
        typeof"""
    )
)
AGGREGATE_FUNCTIONS = _names(
    """any any_value approx_count_distinct approx_percentile array_agg avg bit_and bit_or bit_xor
    bool_and bool_or collect_list collect_set corr count count_if covar_pop covar_samp every first
    first_value histogram_numeric kurtosis last last_value listagg max max_by mean median min
    min_by mode percentile percentile_approx percentile_cont percentile_disc regr_avgx regr_avgy
    regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy skewness some std
    stddev stddev_pop stddev_samp string_agg sum try_avg try_sum var_pop var_samp variance"""
)


def _refusing(reason: str, names: str) -> dict[str, str]:
    return dict.fromkeys(names.split(), reason)


# why the notable built-ins are not on the allowlist (any other name: "not a function Tidegate allows")
_REFUSED = {
    **_refusing("it calls Java methods from the job spec", "reflect java_method try_reflect"),
    **_refusing("it fails the job on purpose", "raise_error assert_true"),
    **_refusing(
        "it is random, so a replay would not repeat its results (SPEC §2)",
        "rand randn random uniform randstr uuid shuffle",
    ),
    **_refusing(
        "it depends on how Spark splits the input, so a replay would not repeat its results",
        "input_file_name input_file_block_start input_file_block_length spark_partition_id"
        " monotonically_increasing_id",
    ),
    **_refusing(
        "it turns one event into several rows",
        "explode explode_outer posexplode posexplode_outer inline inline_outer stack json_tuple",
    ),
    **_refusing(
        "window functions depend on how the stream is cut into micro-batches",
        "row_number rank dense_rank percent_rank cume_dist ntile lag lead nth_value",
    ),
    **_refusing("event-time windows are the spec's window section", "window session_window window_time"),
    **_refusing("it only applies to GROUPING SETS, which a job spec has no way to write", "grouping grouping_id"),
    **_refusing(
        "it reads schemas or descriptor files beyond the payload",
        "from_protobuf to_protobuf from_avro to_avro schema_of_avro",
    ),
    **_refusing(
        "XML functions are not on the allowlist",
        "xpath xpath_boolean xpath_double xpath_float xpath_int xpath_long xpath_number xpath_short"
        " xpath_string from_xml to_xml schema_of_xml",
    ),
    **_refusing("encryption keys do not belong in a job spec", "aes_encrypt aes_decrypt try_aes_decrypt"),
    **_refusing("it computes a function or column name from text, which the check cannot see", "identifier"),
}
_ALLOWED_FIX = (
    "use Spark's built-in functions for arithmetic, comparison, text, math, dates and times,"
    " conditions, null handling, casts, arrays, maps and JSON (aggregates under aggregates);"
    " the list is in docs/jobspec.md, 'Functions'"
)


# -- tokens ----------------------------------------------------------------------------


def _tokens(expr: str) -> list[tuple[str, str]]:
    out = []
    for m in _TOKEN.finditer(expr):
        if m.lastgroup == "bad":
            raise ConfigError(
                f"cannot read {m.group()!r} at position {m.start() + 1} of {expr!r}",
                "check quotes and brackets: strings in 'single quotes',"
                " column names with odd characters in `backticks`",
            )
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
        elif kind == "quoted" and PLAIN_NAME.fullmatch(text[1:-1]):
            text = text[1:-1]
        elif kind == "string" and text[0] in "rR":  # read as two tokens before raw strings were known:
            out.append(text[0])  # keep the text (and so every fingerprint) as it was
            text = text[1:]
        out.append(text)
    return " ".join(out)


# -- the check -------------------------------------------------------------------------


def check_expression(expr: str, where: str, known: list[str], *, aggregates: bool = False) -> list[str]:
    """Check one expression of field ``where`` (e.g. ``select.temp_f``); returns its function
    calls, lower-cased. ``aggregates``: aggregate functions are allowed (the ``aggregates`` field).
    Raises ConfigError naming the field, the refused function or unknown column, and the fix."""
    try:
        toks = [(k, t) for k, t in _tokens(expr) if k != "space"]
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc.problem}", exc.fix) from None
    _refuse_comments_and_subqueries(toks, where, expr)
    calls = _calls(toks, where)
    for name in calls:
        _check_function(name, where, aggregates)
    _check_columns(toks, where, expr, known)
    return list(calls)


def function_calls(expr: str) -> list[str]:
    """The functions ``expr`` calls, lower-cased, in order of first appearance."""
    return list(_calls([(k, t) for k, t in _tokens(expr) if k != "space"], "expression"))


def is_aggregate_function(name: str) -> bool:
    return name.lower() in AGGREGATE_FUNCTIONS


def _refuse_comments_and_subqueries(toks: list[tuple[str, str]], where: str, expr: str) -> None:
    for i, (kind, text) in enumerate(toks):
        if kind == "comment":
            raise ConfigError(
                f"{where}: comments (-- or /* */) are not allowed in expressions: Spark would skip"
                f" text the check has read ({expr!r})",
                "remove the comment; for a minus sign before a negative number write - -5 or -(-5)",
            )
        prev = toks[i - 1][1] if i else ""
        if kind == "word" and text.lower() in _SUBQUERY_WORDS and prev != ".":
            raise ConfigError(
                f"{where}: subqueries are not allowed ({text.upper()} in {expr!r}):"
                " a job reads its events, not tables",
                f"compute from the event's own columns; a payload field named {text} must be written `{text}`",
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


def _check_function(name: str, where: str, aggregates: bool) -> None:
    if name in SCALAR_FUNCTIONS or (aggregates and name in AGGREGATE_FUNCTIONS):
        return
    if name in AGGREGATE_FUNCTIONS:
        raise ConfigError(
            f"{where}: {name}() is an aggregate function; it can only be used under aggregates",
            "aggregate per window: add a window and put it under aggregates, e.g. aggregates: {avg_t: avg(t)}",
        )
    if name in _REFUSED:
        raise ConfigError(f"{where}: {name}() is not allowed: {_REFUSED[name]}", _ALLOWED_FIX)
    allowed = SCALAR_FUNCTIONS | (AGGREGATE_FUNCTIONS if aggregates else frozenset())
    hint = closest(name, allowed)
    raise ConfigError(
        f"{where}: {name}() is not a function Tidegate allows" + (f" (did you mean {hint}?)" if hint else ""),
        _ALLOWED_FIX,
    )


def _check_columns(toks: list[tuple[str, str]], where: str, expr: str, known: list[str]) -> None:
    """Every identifier that is not a function call, a struct field, an alias, a lambda
    parameter, a keyword or a literal must be a known column."""
    lambda_params = _lambda_params(toks)
    known_lower = {k.lower() for k in known}
    unknown: list[str] = []
    for i, (kind, text) in enumerate(toks):
        if kind not in ("word", "quoted"):
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
            f"{where}: unknown column{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} in {expr!r}{hints}",
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


# -- "did you mean" --------------------------------------------------------------------


def closest(word: str, choices: Iterable[str]) -> str | None:
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    by_lower = {c.lower(): c for c in choices}
    hint = closest(word, by_lower.values()) or by_lower.get(closest(word.lower(), by_lower) or "")
    return f" (did you mean {hint}?)" if hint else ""
