"""Running one ``tidegate`` command line: parse it, run its command, and turn an error Tidegate
raises on purpose — or a Spark session's failure on an ``s3a://`` path that
:func:`tidegate.storage.spark.explain_s3_failure` can explain — into the message an operator reads (exit 2).

:func:`tidegate.cli.main` runs the whole command this way; the warm check service
(:mod:`tidegate.runtime.checks.check_server`) runs its requests this way too
(:func:`tidegate.cli.outputs.run_served`), so a check answers the same there as from a shell.

Also what the command groups share: the platform's controller acting for the command line,
and a number of seconds as a table cell.
"""

from __future__ import annotations

import argparse
import sys

from tidegate.errors import TidegateError


def run(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> int:
    """``parser``'s command for ``argv`` (None: ``sys.argv``); its exit code."""
    args = parser.parse_args(argv)
    try:
        result = args.func(args)
    except TidegateError as exc:
        print(f"tidegate: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tidegate: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a JVM's failure on an s3a:// path: said in one paragraph, not its stack trace
        from tidegate.storage.spark import explain_s3_failure

        explained = explain_s3_failure(exc)
        if explained is None:
            raise
        print(f"tidegate: error: {explained}", file=sys.stderr)
        return 2
    return int(result or 0)


def controller():
    """The platform's controller (``$TIDEGATE_CONFIG``, ``$TIDEGATE_HOME``), acting as ``cli``."""
    from tidegate.runtime.jobs.controller import Controller

    return Controller(actor="cli")


def seconds(value: float | None) -> str:
    """``12.3s``; ``-`` for a value not known."""
    return "-" if value is None else f"{value:.1f}s"
