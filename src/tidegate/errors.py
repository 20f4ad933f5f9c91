"""Errors an operator can act on: each says what was wrong and what to do about it."""

from __future__ import annotations


class TidegateError(Exception):
    """Base of every error Tidegate raises on purpose.

    ``problem`` says what was wrong, ``fix`` what to do; ``str()`` joins them so the
    CLI and Airflow task logs show both without a traceback.
    """

    def __init__(self, problem: str, fix: str = "") -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem} — {fix}" if fix else problem)


class ConfigError(TidegateError):
    """A job spec, CLI option or setting is invalid."""


class ControllerError(TidegateError):
    """An operation the job controller refuses, with the reason and the way forward."""
