"""Where a job's log is opened (inputs/log.py ``input_location``): a hub the spec names must
resolve inside the event-log folders there too — the spec was checked when it was loaded, but
the folder may have changed since."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidegate.errors import ConfigError
from tidegate.inputs.log import LogSet, input_location
from tidegate.jobspec import parse_spec

JOB = {"name": "fleet", "version": 1, "payload": {"deviceId": "string"}}
TWO_LOGS = JOB | {
    "payload": None,
    "inputs": {
        "a": {"source": {"hub": "logs/a"}, "payload": {"deviceId": "string"}},
        "b": {"source": {"hub": "logs/b"}, "payload": {"deviceId": "string"}},
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


def test_a_hub_inside_the_log_folders_is_given_back_resolved_and_the_default_hub_is_the_operators(logs):
    spec = parse_spec(JOB | {"source": {"hub": "logs/a"}})
    assert input_location(spec, logs / "default", log_dirs=[logs / "logs"]) == logs.resolve() / "logs" / "a"
    default = parse_spec(JOB)  # the platform's own log (TIDEGATE_HUB), wherever the operator put it
    assert input_location(default, logs / "other-team", log_dirs=[logs / "logs"]) == (logs / "other-team").resolve()


def test_a_hub_that_left_the_log_folders_after_the_spec_was_loaded_is_refused_where_it_is_opened(logs):
    spec = parse_spec(JOB | {"source": {"hub": "logs/a"}})
    assert input_location(spec, logs / "default", log_dirs=[logs / "logs"])  # as the spec was loaded
    (logs / "logs" / "a").rmdir()
    (logs / "logs" / "a").symlink_to(logs / "other-team", target_is_directory=True)  # then swapped
    with pytest.raises(ConfigError) as refused:
        input_location(spec, logs / "default", log_dirs=[logs / "logs"])
    message = str(refused.value)
    assert "job fleet: source.hub 'logs/a' is outside the event-log folders (through a symlink)" in message
    assert "TIDEGATE_LOG_DIRS" in message and len(message.encode()) < 2048


@pytest.mark.parametrize("hub", ["{root}/other-team", "logs/../other-team", "/"], ids=["absolute", "dot-dot", "root"])
def test_a_hub_outside_the_log_folders_is_refused_where_it_is_opened(logs, hub):
    spec = parse_spec(JOB | {"source": {"hub": hub.format(root=logs)}})
    with pytest.raises(ConfigError, match="source.hub .* is outside the event-log folders"):
        input_location(spec, logs / "default", log_dirs=[logs / "logs"])


def test_each_inputs_own_hub_is_checked_and_named(logs):
    spec = parse_spec(TWO_LOGS)
    assert isinstance(input_location(spec, logs / "default", log_dirs=[logs / "logs"]), LogSet)
    with pytest.raises(ConfigError, match="fleet input b: source.hub 'logs/b' is outside the event-log folders"):
        input_location(spec, logs / "default", log_dirs=[logs / "logs" / "a"])


def test_without_folders_given_the_processs_settings_decide(logs, monkeypatch):
    spec = parse_spec(JOB | {"source": {"hub": "other-team"}})
    monkeypatch.delenv("TIDEGATE_LOG_DIRS", raising=False)
    monkeypatch.setenv("TIDEGATE_HOME", "logs")
    with pytest.raises(ConfigError, match=f"name an event log under {logs / 'logs'}"):
        input_location(spec, logs / "default")
    monkeypatch.setenv("TIDEGATE_LOG_DIRS", str(logs / "other-team"))
    assert input_location(spec, logs / "default") == Path(logs / "other-team").resolve()
