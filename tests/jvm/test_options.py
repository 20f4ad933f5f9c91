"""The Java options of Tidegate's Spark JVMs: UTC always, the operator's own on top."""

from __future__ import annotations

import pytest

from tidegate.errors import ConfigError
from tidegate.jvm.options import BASE_JAVA, QUICK_JVM, UTC_JAVA, java_options, quick_driver


def test_every_jvm_runs_in_utc_and_takes_the_operators_options_after():
    off = {"TIDEGATE_CLASS_ARCHIVE": "off"}  # the class archive's options: tests/jvm/test_class_archive.py
    assert java_options(off) == BASE_JAVA
    assert java_options(off | {"TIDEGATE_JVM_OPTIONS": " -Xmx2g "}) == f"{BASE_JAVA} -Xmx2g"
    assert java_options(off | {"TIDEGATE_JVM_OPTIONS": "quick"}) == f"{BASE_JAVA} {QUICK_JVM}"
    assert java_options(off, quick=True) == f"{BASE_JAVA} {QUICK_JVM}"
    assert java_options(off | {"TIDEGATE_JVM_OPTIONS": "quick"}, quick=True) == f"{BASE_JAVA} {QUICK_JVM}"  # once


@pytest.mark.parametrize(
    "master, cores, quick",
    [
        ("local[2]", 2, True),
        ("local[*]", 1, True),
        ("local[2]", 4, False),
        ("local[4]", 16, False),
        ("spark://master:7077", 2, False),  # a cluster's executors run elsewhere: the JVM's own compilers there
    ],
)
def test_a_driver_starts_quick_by_default_only_where_it_runs_its_tasks_on_a_small_machine(master, cores, quick):
    assert quick_driver(master, {}, cores=cores) is quick
    assert quick_driver(master, {"TIDEGATE_DRIVER_JVM": " Auto "}, cores=cores) is quick


@pytest.mark.parametrize("master, cores", [("local[2]", 2), ("local[8]", 32), ("spark://master:7077", 1)])
def test_the_operator_chooses_a_drivers_jvm_whatever_the_machine(master, cores):
    assert quick_driver(master, {"TIDEGATE_DRIVER_JVM": "quick"}, cores=cores) is True
    assert quick_driver(master, {"TIDEGATE_DRIVER_JVM": "full"}, cores=cores) is False


def test_a_driver_jvm_tidegate_does_not_know_is_refused_naming_the_choices():
    with pytest.raises(ConfigError, match="TIDEGATE_DRIVER_JVM='c2'") as refused:
        quick_driver("local[2]", {"TIDEGATE_DRIVER_JVM": "C2"}, cores=2)
    assert "auto" in refused.value.fix and "quick" in refused.value.fix and "full" in refused.value.fix


def test_by_default_a_driver_counts_the_cores_this_process_may_run_on(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0})
    assert quick_driver("local[2]", {}) is True
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(8)))
    assert quick_driver("local[2]", {}) is False


@pytest.mark.spark
def test_the_sessions_jvm_started_with_them(spark):
    """Not only the setting: the running JVM's own arguments (the suite asks for ``quick``)."""
    arguments = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert java_options().split() == [arg for arg in arguments if arg in java_options().split()]
    assert "-XX:TieredStopAtLevel=1" in arguments and UTC_JAVA in arguments
