"""Running one ``tidegate`` command line: parse it, run its command, and turn an error Tidegate
raises on purpose into the message an operator reads (exit 2).

:func:`tidegate.cli.main` runs the whole command this way; the warm check service
(:mod:`tidegate.runtime.checks.check_server`) runs its requests this way too, with the parser of
the commands it serves (:mod:`tidegate.cli.jobs` hands it over), so a check answers the same
there as from a shell.
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
    return int(result or 0)
