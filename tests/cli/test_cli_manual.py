"""docs/reference/cli.md is generated from the parser (:mod:`tidegate.cli.manual`): the
committed page is what the generator writes now, so a changed help text, option or command
fails here until the page is regenerated."""

from __future__ import annotations

import argparse

from tidegate.cli import build_parser, manual


def test_the_committed_page_is_what_the_parser_generates():
    assert manual.PAGE.read_text() == manual.render(), f"docs/reference/cli.md is stale: run {manual.REGENERATE}"


def test_the_page_has_every_command_with_its_usage_and_every_argument():
    page = manual.render()
    parser = build_parser()
    for noun, group in parser._subparsers._group_actions[0].choices.items():
        assert f"\n## `tidegate {noun}`\n" in page
        for verb, command in group._subparsers._group_actions[0].choices.items():
            section = page.split(f"\n### `tidegate {noun} {verb}`\n", 1)[1].split("\n### ", 1)[0]
            assert f"```\n{manual.usage(command)}\n```" in section
            for action in command._actions:
                if not isinstance(action, argparse._HelpAction):
                    shown = action.option_strings[0] if action.option_strings else action.dest
                    assert f"| `{shown}" in section, f"tidegate {noun} {verb}: no row for {shown}"


def test_demo_run_documents_where_the_lineages_live():
    assert "| `--storage {local,s3}` |" in manual.render().split("### `tidegate demo run`", 1)[1]


def test_the_check_mode_names_the_command_that_regenerates_the_page(tmp_path, capsys):
    stale = tmp_path / "cli.md"
    stale.write_text("# written by hand\n")
    assert manual.main(["--check", "--page", str(stale)]) == 1
    assert f"run {manual.REGENERATE} to regenerate" in capsys.readouterr().err
    assert manual.main(["--page", str(stale)]) == 0
    assert manual.main(["--check", "--page", str(stale)]) == 0
    assert stale.read_text() == manual.render()


def test_usage_lines_do_not_depend_on_the_terminal(monkeypatch):
    command = build_parser()._subparsers._group_actions[0].choices["job"]
    narrow = manual.usage(command)
    monkeypatch.setenv("COLUMNS", "400")
    assert manual.usage(command) == narrow
