"""Errors an operator can act on: each says what was wrong and what to do about it."""

from __future__ import annotations

from typing import Any

MAX_PROBLEM_CHARS = 2_000  # what one error may say of a problem: a value quoted in it is an excerpt
MAX_FIX_CHARS = 2_000
_EXCERPT_CHARS = 80
PATH_CHARS = 256  # a path is shown longer: a folder deep in a volume is still named whole


def excerpt(value: Any, limit: int = _EXCERPT_CHARS) -> str:
    """``repr(value)``, cut to about ``limit`` characters: how an error quotes a value it was
    given, which may be hostile and of any size (a YAML alias can expand a short spec to
    megabytes). The repr of a container is never built whole."""
    if isinstance(value, (list, tuple, dict, set, frozenset)) and len(value) > 8:
        return f"a {type(value).__name__} of {len(value):,} items"
    if isinstance(value, str) and len(value) > limit:
        return repr(value[:limit]) + f"… ({len(value):,} characters)"
    try:
        text = repr(value)
    except RecursionError:
        return f"a {type(value).__name__} nested too deeply to show"
    return text if len(text) <= limit else text[:limit] + f"… ({len(text):,} characters)"


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" … ({len(text) - limit:,} characters left out)"


class TidegateError(Exception):
    """Base of every error Tidegate raises on purpose.

    ``problem`` says what was wrong, ``fix`` what to do; ``str()`` joins them so the
    CLI and Airflow task logs show both without a traceback. Each is cut to a bounded length,
    so no input can make an error large.
    """

    def __init__(self, problem: str, fix: str = "") -> None:
        self.problem = _bounded(problem, MAX_PROBLEM_CHARS)
        self.fix = _bounded(fix, MAX_FIX_CHARS)
        super().__init__(f"{self.problem} — {self.fix}" if self.fix else self.problem)


class ConfigError(TidegateError):
    """A job spec, CLI option or setting is invalid."""


class ControllerError(TidegateError):
    """An operation the job controller refuses, with the reason and the way forward."""
