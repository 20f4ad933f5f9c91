"""Durations as operators write them (``2m``, ``300s``, ``1h30m``, ``500ms``) and times as ISO-8601."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta

from tidegate.errors import ConfigError, excerpt

MICROS_PER_SECOND = 1_000_000
_UNIT_MICROS = {
    "us": 1,
    "ms": 1_000,
    "s": MICROS_PER_SECOND,
    "m": 60 * MICROS_PER_SECOND,
    "h": 3_600 * MICROS_PER_SECOND,
    "d": 86_400 * MICROS_PER_SECOND,
}
_PART = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|m|h|d)")
# 100 years: far beyond any tolerance, window or rate limit, and small enough that a
# duration added to or taken from a timestamp stays inside int64 microseconds
MAX_DURATION_US = 36_500 * _UNIT_MICROS["d"]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_FIRST_US = -62_135_596_800 * MICROS_PER_SECOND  # 0001-01-01T00:00:00Z, datetime's first moment
_BEYOND_US = 253_402_300_800 * MICROS_PER_SECOND  # 10000-01-01T00:00:00Z, just past its last
_CYCLE_US = 146_097 * 86_400 * MICROS_PER_SECOND  # 400 Gregorian years


def parse_duration_us(text: str | int | float, *, field: str = "duration") -> int:
    """``"1h30m"`` → microseconds. A bare number is seconds. Raises ConfigError naming ``field``."""
    if isinstance(text, bool):
        raise ConfigError(f"{field}: expected a duration like '5m', got {text!r}", "write e.g. 300s, 5m or 1h")
    if isinstance(text, (int, float)):
        if not math.isfinite(text):  # YAML reads .nan, .inf and 1e400 as floats
            raise ConfigError(
                f"{field}: {text!r} is not a finite number of seconds",
                "write a duration like 300s, 5m or 1h (YAML reads .nan and .inf as numbers)",
            )
        if text < 0:
            raise ConfigError(f"{field}: duration {text!r} is negative", "durations are zero or more")
        total: int | float = text * MICROS_PER_SECOND
    else:
        s = str(text).strip().lower().replace(" ", "")
        pos, total = 0, 0.0
        for m in _PART.finditer(s):
            if m.start() != pos:
                break
            total += float(m.group(1)) * _UNIT_MICROS[m.group(2)]  # inf when the digits overflow
            pos = m.end()
        if not s or pos != len(s):
            raise ConfigError(
                f"{field}: cannot read {excerpt(text, 40)} as a duration",
                "write a number with a unit: us, ms, s, m, h or d (e.g. 300s, 5m, 1h30m, 20d)",
            )
    if total > MAX_DURATION_US:
        raise ConfigError(
            f"{field}: duration {excerpt(text, 40)} is longer than 100 years",
            f"durations are at most {format_duration(MAX_DURATION_US)}; write e.g. 5m, 2h or 20d",
        )
    return int(round(total))


def duration(text: str | int | float, *, field: str = "duration") -> timedelta:
    return timedelta(microseconds=parse_duration_us(text, field=field))


def to_micros(value: timedelta) -> int:
    return (value.days * 86_400 + value.seconds) * MICROS_PER_SECOND + value.microseconds


def format_duration(value: timedelta | int) -> str:
    """Shortest exact form: 300 s → ``5m``, 90 s → ``1m30s``."""
    us = to_micros(value) if isinstance(value, timedelta) else int(value)
    if us == 0:
        return "0s"
    sign, us = ("-", -us) if us < 0 else ("", us)
    parts = []
    for unit in ("d", "h", "m", "s", "ms", "us"):
        q, us = divmod(us, _UNIT_MICROS[unit])
        if q:
            parts.append(f"{q}{unit}")
    return sign + "".join(parts)


def parse_time_us(text: str, *, field: str = "time") -> int:
    """ISO-8601 → µs since epoch. A time without an offset is UTC."""
    try:
        t = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(
            f"{field}: cannot read {text!r} as a time", "use ISO-8601, e.g. 2026-01-01T12:07:00Z"
        ) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return to_micros(t - _EPOCH)


def format_time_us(us: int | None) -> str:
    """µs since epoch → ``2026-01-01T12:07:00Z`` (fraction shown only when non-zero).

    Any integer formats, so a stored far-future watermark can always be shown: a year past
    9999 or before 0000 (1 BC) gets ISO 8601's expanded form, ``+10000-01-01T00:00:00Z``,
    ``-0001-…``. The Gregorian calendar repeats every 400 years, so a time outside
    ``datetime``'s range is moved by whole cycles into it and its year moved back."""
    if us is None:
        return ""
    us = int(us)
    cycles = 0
    if not _FIRST_US <= us < _BEYOND_US:
        cycles = (us - _FIRST_US) // _CYCLE_US
        us -= cycles * _CYCLE_US
    t = _EPOCH + timedelta(microseconds=us)
    year = t.year + 400 * cycles
    text = f"{year:04d}" if 0 <= year <= 9999 else f"{year:+05d}"
    text += t.strftime("-%m-%dT%H:%M:%S")
    if t.microsecond:
        text += f".{t.microsecond:06d}".rstrip("0")
    return text + "Z"
