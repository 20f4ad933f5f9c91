"""The platform's default event log: ``TIDEGATE_EVENT_LOG``, the settings file's ``event_log``,
else ``$TIDEGATE_HOME/event-log`` — and the old names (``TIDEGATE_HUB``, ``hub``, the folder
``$TIDEGATE_HOME/hub``) read for one more release, with a warning, so no log goes missing."""

from __future__ import annotations

import logging

import pytest

from tidegate.errors import ConfigError
from tidegate.runtime.jobs.config import load_config


def test_the_default_log_lives_under_the_home_as_event_log(tmp_path):
    config = load_config({"TIDEGATE_HOME": str(tmp_path)}, tmp_path)
    assert config.event_log == tmp_path / "event-log"
    assert config.driver_environment({})["TIDEGATE_EVENT_LOG"] == str(tmp_path / "event-log")


def test_a_home_holding_only_the_old_folder_keeps_reading_it_with_a_warning(tmp_path, caplog):
    (tmp_path / "hub").mkdir()
    with caplog.at_level(logging.WARNING):
        assert load_config({"TIDEGATE_HOME": str(tmp_path)}, tmp_path).event_log == tmp_path / "hub"
    assert "rename it to" in caplog.text and str(tmp_path / "event-log") in caplog.text
    (tmp_path / "event-log").mkdir()  # once renamed (or made anew), the new folder is the log
    assert load_config({"TIDEGATE_HOME": str(tmp_path)}, tmp_path).event_log == tmp_path / "event-log"


def test_the_old_variable_is_read_with_a_warning_and_the_new_one_wins(tmp_path, caplog):
    env = {"TIDEGATE_HOME": str(tmp_path), "TIDEGATE_HUB": "old"}
    with caplog.at_level(logging.WARNING):
        assert load_config(env, tmp_path).event_log == tmp_path / "old"
    assert "TIDEGATE_HUB is deprecated; rename it to TIDEGATE_EVENT_LOG (removed in 0.9)" in caplog.text
    assert load_config(env | {"TIDEGATE_EVENT_LOG": "new"}, tmp_path).event_log == tmp_path / "new"


def test_the_settings_files_old_key_is_read_with_a_warning_and_both_keys_are_refused(tmp_path, caplog):
    settings = tmp_path / "tidegate.yaml"
    env = {"TIDEGATE_HOME": str(tmp_path), "TIDEGATE_CONFIG": str(settings)}
    settings.write_text("event_log: logs/new\n")
    assert load_config(env, tmp_path).event_log == tmp_path / "logs" / "new"
    settings.write_text("hub: logs/old\n")
    with caplog.at_level(logging.WARNING):
        assert load_config(env, tmp_path).event_log == tmp_path / "logs" / "old"
    assert "hub is deprecated; rename it to event_log (removed in 0.9)" in caplog.text
    settings.write_text("hub: logs/old\nevent_log: logs/new\n")
    with pytest.raises(ConfigError, match="both event_log and hub"):
        load_config(env, tmp_path)
