"""Driver settings read from the environment: each refused value names the variable and the fix."""

from __future__ import annotations

import pytest

from tidegate.errors import ConfigError
from tidegate.runtime.jobs.driver import trigger_interval


@pytest.mark.parametrize("text, spark", [(None, "1000 milliseconds"), ("10s", "10000 milliseconds"),
                                         ("250ms", "250 milliseconds"), ("2m", "120000 milliseconds")])
def test_the_trigger_interval_is_a_duration_spark_reads(text, spark):
    env = {} if text is None else {"TIDEGATE_TRIGGER_INTERVAL": text}
    assert trigger_interval(env) == spark


@pytest.mark.parametrize("text, message", [("10ms", "at least 100ms"), ("soon", "cannot read 'soon'"),
                                           ("-5s", "TIDEGATE_TRIGGER_INTERVAL")])
def test_a_trigger_interval_spark_cannot_use_is_refused_naming_the_variable(text, message):
    with pytest.raises(ConfigError, match=message) as refused:
        trigger_interval({"TIDEGATE_TRIGGER_INTERVAL": text})
    assert "TIDEGATE_TRIGGER_INTERVAL" in str(refused.value)
