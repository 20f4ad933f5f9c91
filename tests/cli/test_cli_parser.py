"""The ``tidegate`` command as a whole: its command groups, in the order ``--help`` lists
them, and ``python -m tidegate.cli`` — how the region supervisor is started — running the
same command with the same exit codes."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from airflow_support import REPO
from tidegate.cli import build_parser

COMMANDS = [
    "hub",  # cli/hub.py
    "kafka",  # cli/kafka.py
    "policy-check", "test-query",  # cli/engine.py
    "job", "check", "batch-reference", "check-service", "read", "drills", "failover", "supervise",  # cli/jobs.py
    "compact", "clean",  # cli/outputs.py
    "reference",  # cli/reference.py
    "demo",  # cli/demo.py
]  # fmt: skip


def test_help_lists_every_command_group_in_order():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == COMMANDS


def test_python_dash_m_runs_the_command_and_exits_2_on_an_error_with_its_fix(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH")) if p)
    cli = [sys.executable, "-m", "tidegate.cli"]
    created = subprocess.run(
        [*cli, "hub", "create", str(tmp_path / "hub"), "--partitions", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert created.returncode == 0, created.stderr
    assert created.stdout.startswith(f"created {tmp_path / 'hub'}: 2 partitions")
    missing = subprocess.run(
        [*cli, "hub", "describe", str(tmp_path / "nowhere")], env=env, capture_output=True, text=True, timeout=120
    )
    assert missing.returncode == 2
    assert missing.stderr.startswith(f"tidegate: error: no event log at {tmp_path / 'nowhere'}")
    assert "tidegate hub create" in missing.stderr


def test_every_command_a_message_or_docstring_names_exists():
    """An error's way forward that names a command the CLI does not have sends an operator
    nowhere: every `tidegate X [Y]` written in the product's texts is a real command."""
    import re

    def commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
        found = {prefix}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    found |= commands(child, (*prefix, name))
        return found

    known = commands(build_parser())
    mention = re.compile(r"`tidegate ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?")
    wrong = set()
    for folder in ("src", "plugins", "dags"):
        for path in (REPO / folder).rglob("*.py"):
            for first, second in mention.findall(path.read_text()):
                if (first,) not in known or (
                    second and (first, second) not in known and any(c[:1] == (first,) and len(c) > 1 for c in known)
                ):
                    wrong.add(f"{path.relative_to(REPO)}: tidegate {first} {second}".rstrip())
    assert not wrong, sorted(wrong)
