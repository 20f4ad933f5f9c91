"""The ``tidegate`` source's ``hub`` option, ``event_log``'s old name, read for one more release."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tidegate.errors import ConfigError
from tidegate.spark.pipeline.source_options import SourceOptions


def test_the_old_option_names_the_log_with_a_warning_and_both_are_refused(caplog):
    with caplog.at_level(logging.WARNING):
        assert SourceOptions.parse({"hub": "/logs/a"}).event_log == Path("/logs/a")
    assert "rename it to event_log (removed in 0.9)" in caplog.text
    with pytest.raises(ConfigError, match="both event_log and hub"):
        SourceOptions.parse({"hub": "/logs/a", "event_log": "/logs/b"})


def test_an_inputs_old_option_names_its_log():
    inputs = json.dumps([{"name": "a", "hub": "/logs/a"}, {"name": "b", "event_log": "/logs/b"}])
    log_set = SourceOptions.parse({"inputs": inputs}).log_set
    assert log_set is not None and log_set.parts == (("a", Path("/logs/a")), ("b", Path("/logs/b")))
