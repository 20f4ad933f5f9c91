"""Where a job's log is opened (inputs/log.py ``input_location``): an event log the spec names must
resolve inside the event-log folders there too — the spec was checked when it was loaded, but
the folder may have changed since."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidegate.errors import ConfigError
from tidegate.inputs.log import input_location
from tidegate.inputs.log_set import LogSet
from tidegate.jobspec import parse_spec

JOB = {"name": "fleet", "version": 1, "payload": {"deviceId": "string"}}
TWO_LOGS = JOB | {
    "payload": None,
    "inputs": {
        "a": {"source": {"event_log": "logs/a"}, "payload": {"deviceId": "string"}},
        "b": {"source": {"event_log": "logs/b"}, "payload": {"deviceId": "string"}},
    },
    "join": {
        "type": "inner",
        "left": "a",
        "right": "b",
        "keys": ["a.deviceId = b.deviceId"],
        "within": "DATEDIFF(second, a, b) BETWEEN 0 AND 1",
    },
    "select": {"deviceId": "a.deviceId"},
}


@pytest.fixture
def logs(tmp_path, monkeypatch):
    """The working directory: the log folder logs/, and another team's log beside it."""
    monkeypatch.chdir(tmp_path)
    for name in ("a", "b"):
        (tmp_path / "logs" / name).mkdir(parents=True)
    (tmp_path / "other-team").mkdir()
    return tmp_path


def test_an_event_log_inside_the_log_folders_is_given_back_resolved_and_the_default_event_log_is_the_operators(logs):
    spec = parse_spec(JOB | {"source": {"event_log": "logs/a"}})
    assert input_location(spec, logs / "default", log_dirs=[logs / "logs"]) == logs.resolve() / "logs" / "a"
    default = parse_spec(JOB)  # the platform's own log (TIDEGATE_EVENT_LOG), wherever the operator put it
    assert input_location(default, logs / "other-team", log_dirs=[logs / "logs"]) == (logs / "other-team").resolve()


def test_an_event_log_that_left_the_log_folders_after_the_spec_was_loaded_is_refused_where_it_is_opened(logs):
    spec = parse_spec(JOB | {"source": {"event_log": "logs/a"}})
    assert input_location(spec, logs / "default", log_dirs=[logs / "logs"])  # as the spec was loaded
    (logs / "logs" / "a").rmdir()
    (logs / "logs" / "a").symlink_to(logs / "other-team", target_is_directory=True)  # then swapped
    with pytest.raises(ConfigError) as refused:
        input_location(spec, logs / "default", log_dirs=[logs / "logs"])
    message = str(refused.value)
    assert "job fleet: source.event_log 'logs/a' is outside the event-log folders (through a symlink)" in message
    assert "TIDEGATE_LOG_DIRS" in message and len(message.encode()) < 2048


@pytest.mark.parametrize(
    "event_log", ["{root}/other-team", "logs/../other-team", "/"], ids=["absolute", "dot-dot", "root"]
)
def test_an_event_log_outside_the_log_folders_is_refused_where_it_is_opened(logs, event_log):
    spec = parse_spec(JOB | {"source": {"event_log": event_log.format(root=logs)}})
    with pytest.raises(ConfigError, match="source.event_log .* is outside the event-log folders"):
        input_location(spec, logs / "default", log_dirs=[logs / "logs"])


def test_each_inputs_own_event_log_is_checked_and_named(logs):
    spec = parse_spec(TWO_LOGS)
    assert isinstance(input_location(spec, logs / "default", log_dirs=[logs / "logs"]), LogSet)
    with pytest.raises(ConfigError, match="fleet input b: source.event_log 'logs/b' is outside the event-log folders"):
        input_location(spec, logs / "default", log_dirs=[logs / "logs" / "a"])


def test_without_folders_given_the_processs_settings_decide(logs, monkeypatch):
    spec = parse_spec(JOB | {"source": {"event_log": "other-team"}})
    monkeypatch.delenv("TIDEGATE_LOG_DIRS", raising=False)
    monkeypatch.setenv("TIDEGATE_HOME", "logs")
    with pytest.raises(ConfigError, match=f"name an event log under {logs / 'logs'}"):
        input_location(spec, logs / "default")
    monkeypatch.setenv("TIDEGATE_LOG_DIRS", str(logs / "other-team"))
    assert input_location(spec, logs / "default") == Path(logs / "other-team").resolve()
