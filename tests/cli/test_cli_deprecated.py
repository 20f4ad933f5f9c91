"""The spellings from before ``tidegate <noun> <verb>`` (:mod:`tidegate.cli.deprecated`): each
runs the same command as its new spelling, after one line on stderr naming the new one, and
none is listed by ``--help``."""

from __future__ import annotations

import io
import json

import pytest

from tidegate.cli import build_parser, command_groups, deprecated, main, verbs
from tidegate.control.db import ControlDB
from tidegate.runtime.jobs.config import load_config

GROUPS = {noun: verbs(group) for noun, group in command_groups(build_parser()).items()}


def modernized(argv: list[str]) -> tuple[list[str], str]:
    err = io.StringIO()
    return deprecated.modernize(argv, GROUPS, err), err.getvalue()


@pytest.mark.parametrize(
    "old, new, line",
    [
        (["failover", "fleet", "--to", "west"], ["job", "failover", "fleet", "--to", "west"], "failover` is deprecated; use `tidegate job failover`"),  # noqa: E501
        (["hub", "produce", "L", "--key", "k"], ["event-log", "produce", "L", "--key", "k"], "hub produce` is deprecated; use `tidegate event-log produce`"),  # noqa: E501
        (["hub", "--help"], ["event-log", "--help"], "hub` is deprecated; use `tidegate event-log`"),
        (["check-service"], ["output", "check-service"], "check-service` is deprecated; use `tidegate output check-service`"),  # noqa: E501
        (["check", "fleet", "--target", "east"], ["output", "check", "fleet", "--target", "east"], "check` is"),
        (["test-query", "--spec", "s"], ["query", "test", "--spec", "s"], "use `tidegate query test`"),
        (["drills", "--json"], ["drill", "history", "--json"], "use `tidegate drill history`"),
        (["supervise", "--region", "east"], ["region", "supervise", "--region", "east"], "use `tidegate region supervise`"),  # noqa: E501
        (["demo"], ["demo", "run"], "`tidegate demo` is deprecated; use `tidegate demo run`"),  # no options
        (["demo", "--source", "kafka"], ["demo", "run", "--source", "kafka"], "use `tidegate demo run`"),
    ],
)  # fmt: skip
def test_an_old_spelling_becomes_the_new_one_with_one_line_saying_so(old, new, line):
    argv, said = modernized(old)
    assert argv == new
    assert said.count("\n") == 1 and line in said and said.rstrip().endswith("(removed in 0.9)")


@pytest.mark.parametrize(
    "argv",
    [["demo", "run", "--keep"], ["demo", "--help"], ["event-log", "describe", "L"], ["job", "failover", "j"], []],
)
def test_a_current_spelling_is_left_alone_and_says_nothing(argv):
    assert modernized(argv) == (argv, "")


def test_every_old_spelling_lands_on_a_command_the_parser_has():
    for new in deprecated.RENAMED.values():
        assert new[0] in GROUPS and (len(new) == 1 or new[1] in GROUPS[new[0]]), new


def test_help_lists_only_the_new_taxonomy(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    for old in deprecated.RENAMED:
        if old[0] not in GROUPS:
            assert f"\n    {old[0]} " not in listed and f"\n    {old[0]}\n" not in listed, old


def test_the_old_and_the_new_spelling_run_the_same_command(tmp_path, capsys):
    """``tidegate hub …`` writes the same event log and prints the same as ``tidegate event-log …``."""
    outputs = []
    for group, folder in (("hub", tmp_path / "old"), ("event-log", tmp_path / "new")):
        assert main([group, "create", str(folder), "--partitions", "2", "--clock", "manual"]) == 0
        assert (
            main(
                [
                    group,
                    "produce",
                    str(folder),
                    "--partition",
                    "1",
                    "--payload",
                    "{}",
                    "--arrival-time",
                    "2026-03-01T00:00:00Z",
                ]
            )
            == 0
        )  # noqa: E501
        out, err = capsys.readouterr()
        outputs.append((out.replace(str(folder), "LOG"), err))
    (old_out, old_err), (new_out, new_err) = outputs
    assert old_out == new_out
    assert new_err == ""
    assert old_err.splitlines() == [
        "`tidegate hub create` is deprecated; use `tidegate event-log create` (removed in 0.9)",
        "`tidegate hub produce` is deprecated; use `tidegate event-log produce` (removed in 0.9)",
    ]


def test_an_old_top_level_command_runs_its_new_one(tmp_path, monkeypatch, capsys):
    """``tidegate drills`` is ``tidegate drill history``, output and exit code alike."""
    monkeypatch.setenv("TIDEGATE_HOME", str(tmp_path))
    db = ControlDB(load_config(env={"TIDEGATE_HOME": str(tmp_path)}).control_db)
    drill = db.start_procedure("drill:region-loss", "fleet", "east")
    db.finish_procedure(drill, "passed", estimate_s=60.0, actual_s=70.0, detail=json.dumps({}))
    assert main(["drill", "history", "--json"]) == 0
    new = capsys.readouterr()
    assert main(["drills", "--json"]) == 0
    old = capsys.readouterr()
    assert old.out == new.out and new.err == ""
    assert old.err == "`tidegate drills` is deprecated; use `tidegate drill history` (removed in 0.9)\n"
    db.dispose()


def test_an_old_spellings_errors_name_the_new_one(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["failover", "fleet"])  # --to missing
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("`tidegate failover` is deprecated")
    assert "usage: tidegate job failover" in err
