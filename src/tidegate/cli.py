"""The ``tidegate`` command. Each area registers its own sub-commands; this module only wires them."""

from __future__ import annotations

import argparse
import importlib
import sys

from tidegate.errors import TidegateError

# module → exposes register(subparsers); order is the order of `tidegate --help`
_COMMAND_MODULES = (
    "tidegate.hub.cli",
    "tidegate.engine_cli",
    "tidegate.runtime.cli",
    "tidegate.demo",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tidegate",
        description="Event-time streaming jobs on Spark: event log, engine, lifecycle and checks.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
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


if __name__ == "__main__":
    sys.exit(main())
