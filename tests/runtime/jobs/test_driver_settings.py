"""Driver settings read from the environment: each refused value names the variable and the fix, and
the JVM a driver starts with."""

from __future__ import annotations

import json
from types import SimpleNamespace as NS

import pytest

from tidegate.errors import ConfigError
from tidegate.runtime.jobs import driver as driver_module
from tidegate.runtime.jobs.driver import Driver, trigger_interval, trigger_stretch_s
from tidegate.spark import session
from tidegate.spark.pipeline import runner


@pytest.mark.parametrize(
    "text, spark",
    [
        (None, "1000 milliseconds"),
        ("10s", "10000 milliseconds"),
        ("250ms", "250 milliseconds"),
        ("2m", "120000 milliseconds"),
    ],
)
def test_the_trigger_interval_is_a_duration_spark_reads(text, spark):
    env = {} if text is None else {"TIDEGATE_TRIGGER_INTERVAL": text}
    assert trigger_interval(env) == spark


@pytest.mark.parametrize(
    "text, message", [("10ms", "at least 100ms"), ("soon", "cannot read 'soon'"), ("-5s", "TIDEGATE_TRIGGER_INTERVAL")]
)
def test_a_trigger_interval_spark_cannot_use_is_refused_naming_the_variable(text, message):
    with pytest.raises(ConfigError, match=message) as refused:
        trigger_interval({"TIDEGATE_TRIGGER_INTERVAL": text})
    assert "TIDEGATE_TRIGGER_INTERVAL" in str(refused.value)


@pytest.mark.parametrize("text, seconds", [(None, 0.0), ("0s", 0.0), ("30s", 30.0), ("1m", 60.0)])
def test_the_trigger_stretch_is_off_unless_set(text, seconds):
    assert trigger_stretch_s({} if text is None else {"TIDEGATE_TRIGGER_STRETCH": text}) == seconds


@pytest.mark.parametrize(
    "env, message",
    [
        ({"TIDEGATE_TRIGGER_STRETCH": "2m"}, "at most 60s"),
        ({"TIDEGATE_TRIGGER_STRETCH": "1s"}, "longer than the trigger interval"),
        ({"TIDEGATE_TRIGGER_STRETCH": "20s", "TIDEGATE_TRIGGER_INTERVAL": "30s"}, "longer than the trigger interval"),
        ({"TIDEGATE_TRIGGER_STRETCH": "later"}, "cannot read 'later'"),
    ],
)
def test_a_stretch_the_health_check_or_the_trigger_would_defeat_is_refused(env, message):
    with pytest.raises(ConfigError, match=message) as refused:
        trigger_stretch_s(env)
    assert "TIDEGATE_TRIGGER_STRETCH" in str(refused.value)


@pytest.mark.parametrize(
    "driver_jvm, master, quick",
    [("quick", "spark://master:7077", True), ("full", "local[2]", False), ("", "spark://master:7077", False)],
)
def test_a_driver_builds_its_session_with_the_jvm_its_setting_and_master_choose(monkeypatch, driver_jvm, master, quick):
    """The driver's own session, not only the rule: what it hands to build_session."""
    asked = {}
    monkeypatch.setenv("TIDEGATE_DRIVER_JVM", driver_jvm)
    monkeypatch.setattr(session, "build_session", lambda name, **kw: asked.update(kw) or "session")
    monkeypatch.setattr(runner, "StreamingRun", lambda *a, **kw: NS(start=lambda: "stream"))
    monkeypatch.setattr(driver_module, "open_log", lambda location: None)
    d = Driver.__new__(Driver)
    d.paths = NS(store=NS(read_bytes=lambda name: json.dumps({}).encode()), lineage_file="lineage.json")
    d.run, d.spec = NS(partial=False), NS(name="fleet")
    d.region = NS(name="east", spark_master=master, spark_session_conf=lambda: {})
    d.input_location, d.root, d.fence, d.gate = None, None, None, None
    assert d._start_stream() == "stream"
    assert asked["master"] == master and asked["quick_jvm"] is quick
