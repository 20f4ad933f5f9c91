"""The Java options of every Spark JVM Tidegate starts: its sessions, its spark-submits and
the standalone cluster's daemons' executors. Free of pyspark, so the Airflow plugins use it too.

Every JVM runs in UTC and maps Spark's class archive when setup built one
(:mod:`tidegate.jvm.class_archive`). ``TIDEGATE_JVM_OPTIONS`` adds options of the
operator's own (a heap size, a GC log); ``quick`` is the name of :data:`QUICK_JVM`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from tidegate.jvm import class_archive

UTC_JAVA = "-Duser.timezone=UTC"
# JVMs that live briefly or do little (tests over a few thousand events, a CI run): the C1
# compiler only and a single-threaded GC cut the CPU their start-up and JIT warm-up take by
# about half — on a 2-core machine that is most of a small job's time. Not for throughput:
# C2 compiles the hot loops of long runs.
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def java_options(env: Mapping[str, str] | None = None, *, quick: bool = False) -> str:
    """``-Duser.timezone=UTC``, then :data:`QUICK_JVM` when asked, then the class archive's
    options, then ``TIDEGATE_JVM_OPTIONS``."""
    env = os.environ if env is None else env
    extra = env.get("TIDEGATE_JVM_OPTIONS", "").strip()
    if extra == "quick":
        extra = QUICK_JVM
    parts = [UTC_JAVA, QUICK_JVM if quick and QUICK_JVM != extra else "", class_archive.options(env), extra]
    return " ".join(part for part in parts if part)
