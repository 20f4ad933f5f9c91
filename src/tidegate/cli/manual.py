"""docs/reference/cli.md, generated from :func:`tidegate.cli.build_parser`: every command
group, and every command with its usage, description and arguments, as ``--help`` has them.

``python -m tidegate.cli.manual`` rewrites the page; ``--check`` only says whether it is
current (tests/cli/test_cli_manual.py does the same in memory). The page's words beyond the
parser — the intro and the table of deprecated spellings — are written here, so nothing on
the page is edited by hand and it cannot drift from the parser.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

from tidegate.cli import build_parser, command_groups, deprecated, verbs

PAGE = Path(__file__).resolve().parents[3] / "docs" / "reference" / "cli.md"
REGENERATE = "python -m tidegate.cli.manual"
USAGE_WIDTH = 100  # usage lines wrap here, as --help wraps them on a terminal this wide
PROSE_WIDTH = 96  # the other docs' paragraphs wrap about here

INTRO = f"""\
# CLI reference: `tidegate`

<!-- Generated from the parser by `{REGENERATE}`: change a help text in src/tidegate/cli/
(or this intro in src/tidegate/cli/manual.py) and run it again; do not edit this page. -->

Every command is `tidegate NOUN VERB …`: `.venv/bin/tidegate` (or `python -m tidegate.cli`);
`--help` on any group or command prints what its section here says. How to use them together is
in [operating from a shell](../guide/shell.md).
"""


def render(parser: argparse.ArgumentParser | None = None) -> str:
    """The whole page for ``parser`` (default: the ``tidegate`` command's)."""
    parser = parser or build_parser()
    groups = command_groups(parser)
    parts = [INTRO, "## Commands\n", "| command | what it does |", "|---|---|"]
    for noun, group in groups.items():
        for verb in verbs(group):
            name = f"tidegate {noun} {verb}"
            parts.append(f"| [`{name}`](#{_anchor(name)}) | {_cell(_help_of(group, verb))} |")
    parts += ["", _deprecated_section()]
    for noun, group in groups.items():
        parts.append(f"## `tidegate {noun}`\n")
        parts.append(_text(_help_of(parser, noun)) + "\n")
        if group.description:
            parts.append(_text(group.description) + "\n")
        for verb, command in verbs(group).items():
            parts.append(_command_section(f"tidegate {noun} {verb}", _help_of(group, verb), command))
    return "\n".join(parts).rstrip("\n") + "\n"


def _deprecated_section() -> str:
    rows = "\n".join(
        f"| `tidegate {' '.join(old)}` | `tidegate {' '.join(new)}` |" for old, new in deprecated.RENAMED.items()
    )
    text = _text(
        "Before 0.8 most commands had no noun. Each old spelling still runs its command, after one "
        f"line on stderr naming the new one, until {deprecated.REMOVED_IN}; `--help` does not list "
        "them. A renamed group keeps its verbs (`tidegate hub produce` is `tidegate event-log produce`)."
    )
    return f"## Deprecated spellings\n\n{text}\n\n| old | new |\n|---|---|\n{rows}\n"


def _command_section(name: str, summary: str, parser: argparse.ArgumentParser) -> str:
    lines = [f"### `{name}`\n", _text(summary) + "\n"]
    if parser.description:
        lines.append(_text(parser.description) + "\n")
    lines.append(f"```\n{usage(parser)}\n```\n")
    rows = list(_argument_rows(parser))
    if rows:
        lines += ["| argument | meaning |", "|---|---|", *rows, ""]
    return "\n".join(lines)


def usage(parser: argparse.ArgumentParser) -> str:
    """``parser``'s usage as ``--help`` prints it (without ``usage:`` and ``[-h]``), wrapped
    at :data:`USAGE_WIDTH` whatever the terminal."""
    formatter = argparse.HelpFormatter(parser.prog, width=USAGE_WIDTH)
    shown = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
    formatter.add_usage(parser.usage, shown, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip("\n")


def _argument_rows(parser: argparse.ArgumentParser) -> Iterator[str]:
    formatter = argparse.HelpFormatter(parser.prog)
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        invocation = formatter._format_action_invocation(action).replace("|", "\\|")
        required = " (required)" if action.required and action.option_strings else ""
        yield f"| `{invocation}` | {_cell(action.help or '')}{required} |"


def _help_of(parser: argparse.ArgumentParser, name: str) -> str:
    """The one-line help ``parser`` lists for its sub-command ``name``."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return next(a.help or "" for a in sub._choices_actions if a.dest == name)


def _text(text: str) -> str:
    """Help text, word for word, as a Markdown paragraph (wrapped; ``<`` and ``>`` escaped)."""
    text = " ".join(text.split()).replace("<", "&lt;").replace(">", "&gt;")
    return textwrap.fill(text, PROSE_WIDTH, break_long_words=False, break_on_hyphens=False)


def _cell(text: str) -> str:
    """Help text, word for word, as one table cell."""
    return " ".join(text.split()).replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def _anchor(heading: str) -> str:
    """GitHub's anchor for a ``### `heading` `` line: lower case, spaces to dashes, no punctuation."""
    return "".join(c for c in heading.lower().replace(" ", "-") if c.isalnum() or c in "-_")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=REGENERATE, description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the page is not current; write nothing")
    ap.add_argument("--page", type=Path, default=PAGE, help="the page to write (default docs/reference/cli.md)")
    args = ap.parse_args(argv)
    page = render()
    current = args.page.read_text() if args.page.exists() else None
    if args.check:
        if current != page:
            print(f"{args.page} is not current: run {REGENERATE} to regenerate it", file=sys.stderr)
            return 1
        return 0
    if current != page:
        args.page.write_text(page)
        print(f"wrote {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
