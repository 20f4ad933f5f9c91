"""The ``tidegate`` command: :func:`build_parser` and :func:`main`.

Each command group is a module of this package with ``register(subparsers)``; this module
only wires them, in the order of ``tidegate --help``, and runs one through
:func:`~tidegate.cli.dispatch.run`:

* :mod:`~tidegate.cli.hub` — ``tidegate hub …``: the embedded event log;
* :mod:`~tidegate.cli.kafka` — ``tidegate kafka …``: a local broker, topics, traffic;
* :mod:`~tidegate.cli.engine` — ``policy-check``, ``test-query``: the engine from a shell;
* :mod:`~tidegate.cli.jobs` — ``job …``, ``check``, ``batch-reference``, ``read``,
  ``drills``, ``failover``, ``supervise``: the job lifecycle;
* :mod:`~tidegate.cli.reference` — ``reference capture``: a database table as a reference snapshot;
* :mod:`~tidegate.cli.demo` — ``demo``: the main job end to end.

Importing this package (``tidegate --help``, building the parser) loads no pyspark: each
command imports what needs Spark inside its own function (tests/test_imports.py).
"""

from __future__ import annotations

import argparse

from tidegate.cli import demo, engine, hub, jobs, kafka, outputs, reference
from tidegate.cli.dispatch import run

_COMMAND_GROUPS = (hub, kafka, engine, jobs, outputs, reference, demo)  # order of `tidegate --help`


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tidegate",
        description="Event-time streaming jobs on Spark: event log, engine, lifecycle and checks.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for group in _COMMAND_GROUPS:
        group.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run(build_parser(), argv)
