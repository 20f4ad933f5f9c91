"""Hints for error messages: "did you mean …?", the nearest known name to a mistyped one.

Every part of spec checking that refuses a name (a field, a window kind, a payload type, a
column, a function) offers the closest known one through these two functions.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    by_lower = {c.lower(): c for c in choices}
    hint = closest(word, by_lower.values()) or by_lower.get(closest(word.lower(), by_lower) or "")
    return f" (did you mean {hint}?)" if hint else ""
