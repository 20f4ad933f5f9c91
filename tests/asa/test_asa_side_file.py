"""The side file of ``asa import --inputs`` is read as safely as a spec: aliases and a key
written twice are refused, and a YAML error names the file and line, never its text."""

from __future__ import annotations

import pytest

from tidegate.asa.side_file import read_side_file
from tidegate.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ("inputs: &a {input: {}}\noutputs: *a\n", ":2:10", "aliases"),
        ("eventsOutOfOrderPolicy: Drop\neventsOutOfOrderPolicy: Adjust\n", ":2:1", "appears again in the same mapping"),
        ("inputs:\n  input: {payload: {secretvalue: [}\n", ":2:", "YAML syntax error"),
    ],
    ids=["alias", "twice", "syntax"],
)
def test_a_side_file_yaml_cannot_hold_is_refused_with_its_line_and_not_its_text(tmp_path, text, where, problem):
    side = tmp_path / "side.yaml"
    side.write_text(text)
    with pytest.raises(ConfigError) as err:
        read_side_file(side)
    message = str(err.value)
    assert message.startswith(f"{side}{where}") and problem in message
    assert "secretvalue" not in message


def test_no_side_file_is_every_default_and_an_empty_one_too(tmp_path):
    (tmp_path / "empty.yaml").write_text("")
    assert read_side_file(None).policy() == read_side_file(tmp_path / "empty.yaml").policy()
    assert read_side_file(None).policy()["late_arrival_tolerance"] == "5s"
