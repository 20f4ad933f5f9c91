"""The one reader of a whole number a job spec writes as text: Kafka client settings, a
join's bounds, an analytic's ``LIMIT DURATION`` count, a decimal's precision and scale, the
size an expression gives a builder (``repeat``, ``lpad``, …).

Python's ``isdigit()`` and ``int()`` take digits of every script: "²" passes ``isdigit()``
and then fails ``int()`` with a bare ``ValueError``; "١" (Arabic-Indic one) is read as 1,
where Spark's parser, Java's Kafka client and librdkafka read it otherwise or not at all.
:func:`whole_number` reads the ASCII digits 0-9 only and says so when it refuses.
"""

from __future__ import annotations

from typing import Any

from tidegate.errors import ConfigError, excerpt

ASCII_DIGITS = frozenset("0123456789")


def whole_number(value: Any, where: str, low: int, high: int, unit: str = "") -> int:
    """A whole number from ``low`` to ``high`` (``unit`` names what it counts), written with the
    ASCII digits 0-9 only: a YAML integer, or text, leading zeros and spaces ignored. Raises
    :class:`ConfigError` naming ``where`` and the range; never calls ``int()`` on more digits
    than ``high`` has."""
    within = f"from {low:,} to {high:,}" + (f" {unit}" if unit else "")
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError(f"{where} is {excerpt(value, 40)}, not a whole number", f"write a whole number {within}")
    text = str(value).strip()
    if not text or not set(text) <= ASCII_DIGITS:
        other = sorted({c for c in text if c.isdigit() and c not in ASCII_DIGITS})
        why = f" (it uses {', '.join(map(repr, other[:3]))}: only the digits 0-9 are read)" if other else ""
        raise ConfigError(f"{where} is {excerpt(text, 40)}, not a whole number{why}",
                          f"write a whole number {within} with the digits 0-9")  # fmt: skip
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(high)) or not low <= int(digits) <= high:  # no int() of a thousand digits
        raise ConfigError(f"{where} is {excerpt(digits, 40)}, out of range", f"use a whole number {within}")
    return int(digits)
