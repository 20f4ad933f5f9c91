"""The Spark SQL functions a job spec may call: the allowlist, and why others are refused.

Spec expressions run in the engine, so what they may call is a policy: a Spark built-in on
:data:`SCALAR_FUNCTIONS` anywhere, and one on :data:`AGGREGATE_FUNCTIONS` under
``aggregates`` only; Stream Analytics' functions Spark lacks (:data:`ASA_FUNCTIONS`) anywhere.
Anything else is refused by :func:`check_function` with the function
and the field named; for the notable built-ins left off (calls into Java, failing on
purpose, randomness, file placement, generators, window functions…) it gives the reason.
Finding the calls in an expression is :mod:`tidegate.jobspec.expressions`' job.
"""

from __future__ import annotations

from tidegate.errors import ConfigError
from tidegate.jobspec.hints import closest


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
# Stream Analytics' functions Spark has no built-in of: the engine writes them with Spark's
# (tidegate.jobspec.asa_functions), so a spec calls them as a ported query does
ASA_FUNCTIONS = _names("charindex datename")
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
ONE_TO_MANY = "it turns one event into several rows inside an expression"
# what to write instead of a generator: the spec's cross_apply keeps each row's identity and bounds the rows
_CROSS_APPLY_FIX = (
    "write cross_apply: {name: a, elements: <array field>} (Stream Analytics' CROSS APPLY GetArrayElements;"
    " properties: <record field> for GetRecordProperties) and read a.ArrayIndex, a.ArrayValue in the query;"
    " see docs/reference/jobspec.md, 'cross_apply'"
)
_REFUSED = {
    **_refusing("it calls Java methods from the job spec", "reflect java_method try_reflect"),
    **_refusing("it fails the job on purpose", "raise_error assert_true"),
    **_refusing(
        "it is random, so a replay would not repeat its results (semantics §2)",
        "rand randn random uniform randstr uuid shuffle",
    ),
    **_refusing(
        "it depends on how Spark splits the input, so a replay would not repeat its results",
        "input_file_name input_file_block_start input_file_block_length spark_partition_id monotonically_increasing_id",
    ),
    **_refusing(ONE_TO_MANY, "explode explode_outer posexplode posexplode_outer inline inline_outer stack json_tuple"),
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
    " the list is in docs/reference/jobspec.md, 'Functions'"
)


def is_aggregate_function(name: str) -> bool:
    return name.lower() in AGGREGATE_FUNCTIONS


def check_function(name: str, where: str, aggregates: bool) -> None:
    """Refuse a call of ``name`` (lower-cased) in field ``where`` unless the allowlist has it;
    ``aggregates``: the field is ``aggregates``, where aggregate functions are allowed too."""
    if name in SCALAR_FUNCTIONS or name in ASA_FUNCTIONS or (aggregates and name in AGGREGATE_FUNCTIONS):
        return
    if name in AGGREGATE_FUNCTIONS:
        raise ConfigError(
            f"{where}: {name}() is an aggregate function; it can only be used under aggregates",
            "aggregate per window: add a window and put it under aggregates, e.g. aggregates: {avg_t: avg(t)}",
        )
    if name in _REFUSED:
        fix = _CROSS_APPLY_FIX if _REFUSED[name] == ONE_TO_MANY else _ALLOWED_FIX
        raise ConfigError(f"{where}: {name}() is not allowed: {_REFUSED[name]}", fix)
    allowed = SCALAR_FUNCTIONS | ASA_FUNCTIONS | (AGGREGATE_FUNCTIONS if aggregates else frozenset())
    hint = closest(name, allowed)
    raise ConfigError(
        f"{where}: {name}() is not a function Tidegate allows" + (f" (did you mean {hint}?)" if hint else ""),
        _ALLOWED_FIX,
    )
