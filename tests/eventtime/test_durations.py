"""Times as operators read them: ``format_time_us`` answers for every int64 µs value.

A watermark or last output far in the future (a producer's clock set to the year 30000, an
int64 sentinel) is data the platform stores; printing it must not raise. Years outside
0000–9999 are written in ISO 8601's expanded form, with a sign (``+10000-01-01T00:00:00Z``);
years are astronomical (year 0 is 1 BC), as in numpy's ``datetime64``, whose output the
expected values below were checked against.
"""

from __future__ import annotations

import pytest

from tidegate.errors import ConfigError
from tidegate.eventtime.durations import MAX_DURATION_US, format_time_us, parse_duration_us, parse_time_us

YEAR_10000_US = 253_402_300_800_000_000  # 10000-01-01T00:00:00Z
YEAR_1_US = -62_135_596_800_000_000  # 0001-01-01T00:00:00Z


@pytest.mark.parametrize(
    "us, text",
    [
        (parse_time_us("2026-01-01T12:07:00Z"), "2026-01-01T12:07:00Z"),  # as before: no fraction when whole
        (parse_time_us("2026-01-01T12:07:00.25Z"), "2026-01-01T12:07:00.25Z"),
        (0, "1970-01-01T00:00:00Z"),
        (-1, "1969-12-31T23:59:59.999999Z"),
        (YEAR_10000_US - 1, "9999-12-31T23:59:59.999999Z"),  # the last moment datetime can hold
        (YEAR_10000_US, "+10000-01-01T00:00:00Z"),  # one µs later: the expanded form
        (2**63 - 1, "+294247-01-10T04:00:54.775807Z"),  # int64's largest µs
        (YEAR_1_US, "0001-01-01T00:00:00Z"),
        (YEAR_1_US - 1, "0000-12-31T23:59:59.999999Z"),  # year 0 is 1 BC
        (YEAR_1_US - 366 * 86_400_000_000 - 1, "-0001-12-31T23:59:59.999999Z"),
        (-(2**63), "-290308-12-21T19:59:05.224192Z"),  # int64's smallest: the engine's "no value" sentinel
    ],
)
def test_every_int64_time_formats_and_years_beyond_9999_get_a_sign(us, text):
    assert format_time_us(us) == text


def test_formatting_a_time_reads_back_as_the_same_time_within_datetimes_range():
    for us in (YEAR_1_US, -1, 0, 1_767_225_600_123_456, YEAR_10000_US - 1):
        assert parse_time_us(format_time_us(us)) == us


def test_no_time_formats_as_nothing():
    assert format_time_us(None) == ""


# -- durations: every bad number is a ConfigError naming the field ------------------------


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),  # YAML .nan
        float("inf"),  # YAML .inf
        float("-inf"),  # YAML -.inf
        1e308,  # finite, but not in microseconds
        10**30,  # a whole number of seconds beyond any clock
        "nan",
        "inf",
        "Infinity",
        "-inf",  # text where a number is accepted
        "1" * 400 + "s",  # digits that float() reads as infinity
        "99999999999999d",
    ],
)
def test_a_duration_that_is_not_a_finite_number_of_reasonable_size_is_a_config_error(value):
    with pytest.raises(ConfigError) as info:
        parse_duration_us(value, field="window.size")
    assert str(info.value).startswith("window.size: ")
    assert info.value.fix  # and says what to write instead


def test_the_largest_duration_is_accepted_and_one_microsecond_more_is_not():
    assert parse_duration_us(f"{MAX_DURATION_US}us") == MAX_DURATION_US
    with pytest.raises(ConfigError, match="at most 36500d"):
        parse_duration_us(f"{MAX_DURATION_US + 1}us", field="policy.out_of_order_tolerance")
