"""The Java options of Tidegate's Spark JVMs: UTC always, the operator's own on top."""

from __future__ import annotations

import pytest

from tidegate.jvm.options import QUICK_JVM, UTC_JAVA, java_options


def test_every_jvm_runs_in_utc_and_takes_the_operators_options_after():
    off = {"TIDEGATE_CLASS_ARCHIVE": "off"}  # the class archive's options: tests/jvm/test_class_archive.py
    assert java_options(off) == UTC_JAVA
    assert java_options(off | {"TIDEGATE_JVM_OPTIONS": " -Xmx2g "}) == f"{UTC_JAVA} -Xmx2g"
    assert java_options(off | {"TIDEGATE_JVM_OPTIONS": "quick"}) == f"{UTC_JAVA} {QUICK_JVM}"
    assert java_options(off, quick=True) == f"{UTC_JAVA} {QUICK_JVM}"
    assert java_options(off | {"TIDEGATE_JVM_OPTIONS": "quick"}, quick=True) == f"{UTC_JAVA} {QUICK_JVM}"  # once


@pytest.mark.spark
def test_the_sessions_jvm_started_with_them(spark):
    """Not only the setting: the running JVM's own arguments (the suite asks for ``quick``)."""
    arguments = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert java_options().split() == [arg for arg in arguments if arg in java_options().split()]
    assert "-XX:TieredStopAtLevel=1" in arguments and UTC_JAVA in arguments
