"""The ``tidegate`` command: :func:`build_parser` and :func:`main`.

Every command is ``tidegate <noun> <verb> …``. Each noun (command group) is a module of this
package with ``register(subparsers)``; this module only wires them, in the order of
``tidegate --help``, and runs one through :func:`~tidegate.cli.dispatch.run`:

* :mod:`~tidegate.cli.event_log` — ``event-log …``: the embedded event log;
* :mod:`~tidegate.cli.kafka` — ``kafka …``: a local broker, topics, traffic;
* :mod:`~tidegate.cli.jobs` — ``job …``: deploy, start, stop, status, estimates, failover, batch path;
* :mod:`~tidegate.cli.outputs` — ``output …``: read, check, compact and clean a job's output;
* :mod:`~tidegate.cli.engine` — ``query …``: a job spec or the time policy on sample data;
* :mod:`~tidegate.cli.asa` — ``asa …``: a Stream Analytics query as a job spec, or on a sample;
* :mod:`~tidegate.cli.drills` — ``drill history``: the recovery drills run so far;
* :mod:`~tidegate.cli.regions` — ``region supervise``: keep a region's jobs running;
* :mod:`~tidegate.cli.reference` — ``reference capture``: a database table as a reference snapshot;
* :mod:`~tidegate.cli.demo` — ``demo run``: the main job end to end.

The spellings from before the nouns (``tidegate hub …``, ``tidegate failover …``) still run,
deprecated, through :mod:`~tidegate.cli.deprecated`. docs/reference/cli.md is generated from
:func:`build_parser` (:mod:`~tidegate.cli.manual`).

Importing this package (``tidegate --help``, building the parser) loads no pyspark: each
command imports what needs Spark inside its own function (tests/test_imports.py).
"""

from __future__ import annotations

import argparse
import sys

from tidegate.cli import asa, demo, deprecated, drills, engine, event_log, jobs, kafka, outputs, reference, regions
from tidegate.cli.dispatch import run

# in the order of `tidegate --help`
_COMMAND_GROUPS = (event_log, kafka, jobs, outputs, engine, asa, drills, regions, reference, demo)


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
    """Run ``tidegate <argv>`` (None: ``sys.argv``); its exit code. An old spelling runs its
    command after one deprecation line on stderr."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    groups = {noun: verbs(group) for noun, group in command_groups(parser).items()}
    return run(parser, deprecated.modernize(argv, groups))


def command_groups(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Each command group's parser by its noun (``event-log``, ``job``, …)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def verbs(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A command group's commands by their verb; ``{}`` for a parser that has none."""
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    return {} if sub is None else dict(sub.choices)
