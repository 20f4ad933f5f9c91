"""The ``tidegate`` command as a whole: one taxonomy (``tidegate <noun> <verb>``, the nouns in
the order ``--help`` lists them), a help text on every argument, and ``python -m tidegate.cli``
— how the region supervisor is started — running the same command with the same exit codes."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from airflow_support import REPO
from tidegate.cli import build_parser, command_groups, deprecated, verbs

NOUNS = [
    "event-log",  # cli/event_log.py
    "kafka",  # cli/kafka.py
    "job",  # cli/jobs.py
    "output",  # cli/outputs.py
    "query",  # cli/engine.py
    "asa",  # cli/asa.py
    "drill",  # cli/drills.py
    "region",  # cli/regions.py
    "reference",  # cli/reference.py
    "demo",  # cli/demo.py
]


def parsers(parser: argparse.ArgumentParser, words: tuple[str, ...] = ("tidegate",)):
    """``(command words, parser)`` of the whole command, each group and each command."""
    yield " ".join(words), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from parsers(child, (*words, name))


def test_help_lists_every_command_group_in_order():
    assert list(command_groups(build_parser())) == NOUNS


def test_every_command_is_a_noun_and_a_verb():
    commands = [words for words, parser in parsers(build_parser()) if not verbs(parser)]
    assert [c for c in commands if len(c.split()) != 3] == []


def test_every_argument_option_and_command_has_a_help_text():
    """``--help`` explains everything it lists: each argument and option (``-h`` aside), and
    each group and command in its parent's list."""
    missing = []
    for words, parser in parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{words} {c.dest} (its line in the list)" for c in action._choices_actions if not c.help]
            elif not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{words} {'/'.join(action.option_strings) or action.dest}")
    assert missing == [], "give these a help= text"


def test_python_dash_m_runs_the_command_and_exits_2_on_an_error_with_its_fix(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH")) if p)
    cli = [sys.executable, "-m", "tidegate.cli"]
    created = subprocess.run(
        [*cli, "event-log", "create", str(tmp_path / "log"), "--partitions", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert created.returncode == 0, created.stderr
    assert created.stdout.startswith(f"created {tmp_path / 'log'}: 2 partitions")
    missing = subprocess.run(
        [*cli, "event-log", "describe", str(tmp_path / "nowhere")], env=env, capture_output=True, text=True, timeout=120
    )
    assert missing.returncode == 2
    assert missing.stderr.startswith(f"tidegate: error: no event log at {tmp_path / 'nowhere'}")
    assert "tidegate event-log create" in missing.stderr


def test_every_command_a_message_or_docstring_names_exists():
    """An error's way forward that names a command the CLI does not have sends an operator
    nowhere: every `tidegate X [Y]` written in the product's texts is a real command, in its
    current spelling (the deprecated ones are named only where the CLI describes them)."""
    import re

    def commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
        found = {prefix}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    found |= commands(child, (*prefix, name))
        return found

    known = commands(build_parser())
    old = {words[0] for words in deprecated.RENAMED}
    mention = re.compile(r"`tidegate ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?")
    wrong = set()
    for folder in ("src", "providers", "dags"):
        for path in (REPO / folder).rglob("*.py"):
            describes_old = path.is_relative_to(REPO / "src" / "tidegate" / "cli")
            for first, second in mention.findall(path.read_text()):
                if describes_old and first in old:
                    continue
                if (first,) not in known or (
                    second and (first, second) not in known and any(c[:1] == (first,) and len(c) > 1 for c in known)
                ):
                    wrong.add(f"{path.relative_to(REPO)}: tidegate {first} {second}".rstrip())
    assert not wrong, sorted(wrong)
