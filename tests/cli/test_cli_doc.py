"""docs/reference/cli.md against the parser: the page is written by hand, and this keeps it
whole — every command is in its table and has a section whose usage line is the one
``--help`` prints, every option with a help text has a row there, and the page names no
command or option the parser does not have."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidegate.cli import build_parser

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md"


def leaves(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ("tidegate",)
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every runnable command (``tidegate hub create``, ``tidegate demo``, …) and its parser."""
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if sub is None:
        yield " ".join(words), parser
        return
    for name, child in sub.choices.items():
        yield from leaves(child, (*words, name))


def options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {
        next(s for s in a.option_strings if s.startswith("--")): a
        for a in parser._actions
        if a.option_strings and not isinstance(a, argparse._HelpAction)
    }


def usage(parser: argparse.ArgumentParser) -> str:
    """The usage line ``--help`` prints, on one line, without ``usage:`` and ``[-h]``."""
    width = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "10000"
    try:
        text = parser.format_usage()
    finally:
        if width is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = width
    return " ".join(text.split()).removeprefix("usage: ").replace(" [-h]", "")


COMMANDS = dict(leaves(build_parser()))
TEXT = PAGE.read_text()
TABLE = TEXT.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
SECTIONS = dict(re.findall(r"^### `(tidegate [^`]+)`\n(.*?)(?=^#{1,3} |\Z)", TEXT, re.MULTILINE | re.DOTALL))


def test_the_walk_finds_commands_of_every_depth():
    assert {"tidegate hub create", "tidegate job list", "tidegate reference capture", "tidegate demo"} <= set(COMMANDS)
    assert "--storage" in options(COMMANDS["tidegate demo"])
    assert usage(COMMANDS["tidegate job deploy"]) == "tidegate job deploy spec"


def test_every_command_is_in_the_commands_table():
    """A row names the command, or its group and then its own word (`tidegate kafka start … \\| stop`)."""
    rows = [row for row in TABLE.splitlines() if row.startswith("| `tidegate ")]
    missing = []
    for command in COMMANDS:
        words = command.split()
        group = re.compile(rf"`{re.escape(' '.join(words[:2]))}\b(?!-)")
        if not any(
            group.search(row) and (len(words) == 2 or re.search(rf"\b{re.escape(words[2])}\b", row)) for row in rows
        ):
            missing.append(command)
    assert not missing, f"not in the commands table of {PAGE.name}: {missing}"


def test_the_page_has_a_section_for_every_command_and_no_other():
    assert sorted(set(COMMANDS) - set(SECTIONS)) == [], "commands without a section"
    assert sorted(set(SECTIONS) - set(COMMANDS)) == [], "sections of commands the parser does not have"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_sections_usage_line_is_the_parsers(command):
    block = re.search(r"^```\n(.*?)\n```", SECTIONS.get(command, ""), re.MULTILINE | re.DOTALL)
    assert block, f"{command}: no usage block under its heading"
    assert block.group(1) == usage(COMMANDS[command])


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_option_with_a_help_text_has_a_row_and_every_row_is_an_option(command):
    rows = re.findall(r"^\| `(--[\w-]+)[^`]*` \|", SECTIONS.get(command, ""), re.MULTILINE)
    known = options(COMMANDS[command])
    helped = {name for name, action in known.items() if action.help and action.help != argparse.SUPPRESS}
    assert sorted(helped - set(rows)) == [], f"{command}: options without a row"
    assert sorted(set(rows) - set(known)) == [], f"{command}: rows for options it does not have"
