"""How Python reaches a session's JVM classes through Py4J without searching every jar.

Why: Py4J resolves a name it is given one part at a time. ``jvm.tidegate.jvm.PolicyScan``
asks the JVM about ``tidegate``, then ``tidegate.jvm``, then the class, and the JVM looks each
part up as a class first. A short name like ``tidegate`` is tried on its own, then after
each of the star imports pyspark gives the gateway (eight packages). Every miss is a search
of every jar on Spark's class path, and a micro-batch makes several such lookups.

:func:`jvm_class` asks for the full name in one lookup, which finds the class directly.
:func:`import_short_names` serves the names pyspark itself looks up on every call: its
``_to_seq`` reaches ``PythonUtils`` for each list of columns. A name imported singly is
found after one miss instead of two.
"""

from __future__ import annotations

from py4j.java_gateway import JavaClass, java_import
from pyspark.sql import SparkSession

# the short names pyspark's DataFrame code looks up per call, by their full names
PYSPARK_SHORT_NAMES = ("org.apache.spark.api.python.PythonUtils",)


def jvm_class(spark: SparkSession, name: str) -> JavaClass:
    """The class ``name`` (its full name, e.g. ``tidegate.jvm.PolicyScan``) in ``spark``'s JVM."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # set while the session's SparkContext runs
    found = getattr(jvm, name)
    if not isinstance(found, JavaClass):  # Py4J answers with a package when no class has the name
        raise LookupError(f"{name} is not a class on this session's JVM")
    return found


def import_short_names(spark: SparkSession) -> None:
    """Import :data:`PYSPARK_SHORT_NAMES` singly into ``spark``'s gateway view (idempotent)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # set while the session's SparkContext runs
    for name in PYSPARK_SHORT_NAMES:
        java_import(jvm, name)
