"""``source.hub``, the event log's old key, read for one more release: a spec naming it loads as
``source.event_log`` with a warning, a spec naming both is refused, and the log it names is
held to the event-log folders like any other."""

from __future__ import annotations

import logging

import pytest

from tidegate.errors import ConfigError
from tidegate.jobspec import load_spec, parse_spec

BASE = {"name": "x", "version": 1, "payload": {"a": "int"}}
TWO_LOGS = {
    "name": "x",
    "version": 1,
    "inputs": {
        "a": {"source": {"event_log": "logs/a"}, "payload": {"deviceId": "string"}},
        "b": {"source": {"hub": "logs/b"}, "payload": {"deviceId": "string"}},
    },
    "join": {"type": "inner", "left": "a", "right": "b", "keys": ["a.deviceId = b.deviceId"],
             "within": "DATEDIFF(second, a, b) BETWEEN 0 AND 1"},
    "select": {"deviceId": "a.deviceId"},
}  # fmt: skip


def test_the_old_key_reads_as_the_new_one_with_a_warning_naming_the_rename(caplog):
    with caplog.at_level(logging.WARNING):
        spec = parse_spec(BASE | {"source": {"hub": "var/logs"}})
    assert spec == parse_spec(BASE | {"source": {"event_log": "var/logs"}})
    assert "source.hub is deprecated; rename it to source.event_log (removed in 0.9)" in caplog.text
    assert spec.to_dict()["source"] == {"event_log": "var/logs"}  # written back under the new key


def test_an_inputs_old_key_reads_as_the_new_one_too(caplog):
    with caplog.at_level(logging.WARNING):
        spec = parse_spec(TWO_LOGS)
    assert [i.own.source.event_log for i in spec.inputs] == ["logs/a", "logs/b"]
    assert "inputs.b.source.hub is deprecated; rename it to inputs.b.source.event_log" in caplog.text


@pytest.mark.parametrize("where", ["source", "inputs.b.source"])
def test_a_source_naming_both_keys_is_refused(where):
    if where == "source":
        data = BASE | {"source": {"hub": "var/a", "event_log": "var/b"}}
    else:
        data = TWO_LOGS | {"inputs": TWO_LOGS["inputs"] | {"b": {"source": {"hub": "b", "event_log": "b"},
                                                                    "payload": {"deviceId": "string"}}}}  # fmt: skip
    with pytest.raises(ConfigError, match=f"{where} has both event_log and hub") as info:
        parse_spec(data)
    assert f"remove {where}.hub" in info.value.fix


def test_a_log_named_by_the_old_key_is_held_to_the_event_log_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("TIDEGATE_HOME", "TIDEGATE_LOG_DIRS"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "var").mkdir()
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\nversion: 1\npayload: {a: int}\nsource: {hub: /etc}\n")
    with pytest.raises(ConfigError, match="'/etc' is outside the event-log folders"):
        load_spec(spec)
    spec.write_text("name: x\nversion: 1\npayload: {a: int}\nsource: {hub: var/event-log}\n")
    assert load_spec(spec).source.event_log == "var/event-log"
