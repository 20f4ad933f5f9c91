"""The Java options of every Spark JVM Tidegate starts: its sessions, its spark-submits and
the standalone cluster's daemons' executors. Free of pyspark, so the Airflow plugins use it too.

Every JVM runs in UTC and maps Spark's class archive when setup built one
(:mod:`tidegate.jvm.class_archive`). ``TIDEGATE_JVM_OPTIONS`` adds options of the
operator's own (a heap size, a GC log); ``quick`` is the name of :data:`QUICK_JVM`. A job
driver's JVM starts quick on a small machine (:func:`quick_driver`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from tidegate.errors import ConfigError
from tidegate.jvm import class_archive

UTC_JAVA = "-Duser.timezone=UTC"
# S3A's AWS SDK asks the instance metadata service for a role's keys with a session token
# (IMDSv2) only: a v1 request is one an SSRF can make for an attacker (decision 0010)
IMDS_V2_ONLY = "-Daws.disableEc2MetadataV1=true"
BASE_JAVA = f"{UTC_JAVA} {IMDS_V2_ONLY}"  # every Tidegate JVM starts with these
# JVMs that live briefly or do little (tests over a few thousand events, a CI run): the C1
# compiler only and a single-threaded GC cut the CPU their start-up and JIT warm-up take by
# about half — on a 2-core machine that is most of a small job's time. Not for throughput:
# C2 compiles the hot loops of long runs.
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
DRIVER_JVM = "TIDEGATE_DRIVER_JVM"  # auto, quick or full: a job driver's JVM (quick_driver)
DRIVER_JVM_CHOICES = ("auto", "quick", "full")
SMALL_MACHINE_CORES = 2  # at most this many: C2 falls minutes behind a pair of drivers


def java_options(env: Mapping[str, str] | None = None, *, quick: bool = False) -> str:
    """:data:`BASE_JAVA` (UTC, IMDSv2 only), then :data:`QUICK_JVM` when asked, then the class
    archive's options, then ``TIDEGATE_JVM_OPTIONS``."""
    env = os.environ if env is None else env
    extra = env.get("TIDEGATE_JVM_OPTIONS", "").strip()
    if extra == "quick":
        extra = QUICK_JVM
    parts = [BASE_JAVA, QUICK_JVM if quick and QUICK_JVM != extra else "", class_archive.options(env), extra]
    return " ".join(part for part in parts if part)


def quick_driver(master: str, env: Mapping[str, str] | None = None, *, cores: int | None = None) -> bool:
    """Whether a job driver's JVM starts with :data:`QUICK_JVM`, as ``TIDEGATE_DRIVER_JVM``
    says: ``quick``, ``full`` (the JVM's own compilers and collector) or ``auto``, the default:
    quick where the driver runs its tasks in its own JVM (a ``local`` master) on a machine of at
    most :data:`SMALL_MACHINE_CORES` cores (``cores``: this process's, by default).

    There C2 does not catch up: a driver's one C2 thread falls behind for minutes after each
    start (seven minutes into a deploy of the pair, 4,600 methods waiting), while the batches
    run on profiling code and the compiling takes CPU the other drivers need (decision 0012).
    Where cores are to spare, or for a long run's hot loops, ``full`` keeps C2."""
    env = os.environ if env is None else env
    chosen = env.get(DRIVER_JVM, "").strip().lower() or "auto"
    if chosen not in DRIVER_JVM_CHOICES:
        raise ConfigError(
            f"{DRIVER_JVM}={chosen!r} is not a driver JVM Tidegate knows",
            f"set {DRIVER_JVM} to auto (quick on a local master with at most {SMALL_MACHINE_CORES} "
            "cores), quick (the C1 compiler only and a serial GC) or full (the JVM's own), or unset it",
        )
    if chosen != "auto":
        return chosen == "quick"
    cores = len(os.sched_getaffinity(0)) if cores is None else cores
    return master.strip().startswith("local") and cores <= SMALL_MACHINE_CORES
