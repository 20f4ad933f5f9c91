"""Checks and batch references from a shell, handed to the platform's warm check service
(:mod:`tidegate.runtime.checks.check_service`) when one serves, so that a check from a shell
costs what a warm check costs.

``tidegate output check`` and ``tidegate job batch-reference`` both ask through
:func:`through_service`. A request names its command by the service's own word for it
(``check``, ``batch-reference``: the keys of ``check_service.COMMANDS``), which stays fixed
while the command line's spelling may change; the service runs it as ``tidegate output
check-service`` hands it over (:func:`tidegate.cli.outputs.run_served`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tidegate.cli import dispatch


def through_service(args: argparse.Namespace, request: list[str]) -> int | None:
    """``request`` (``[command, job, …]``) run by the platform's warm check service when one
    serves, its output printed here; its exit code. None: run it here (none serves, it did not
    take the request, ``--here``, or this is the service itself)."""
    from tidegate.runtime.checks import check_server, check_service

    if args.here or check_server.serving_here():
        return None
    home = dispatch.controller().config.home
    served = check_service.run(home, request) if check_service.serving(home) else None
    if served is None:
        return None
    print(served.output, end="", file=sys.stdout if served.exit_code == 0 else sys.stderr)
    return served.exit_code


def options(*pairs: tuple[str, object]) -> list[str]:
    """``--name value`` for each value given, paths made absolute (the service has its own cwd)."""
    argv = []
    for name, value in pairs:
        if value is not None:
            argv += [name, str(value.resolve() if isinstance(value, Path) else value)]
    return argv
