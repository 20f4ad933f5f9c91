"""A session's JVM classes reached by their full names in one lookup (tidegate.spark.gateway)."""

from __future__ import annotations

import pytest
from py4j.java_gateway import JavaObject
from py4j.protocol import GATEWAY_SERVER_OBJECT_ID

from tidegate.spark.gateway import PYSPARK_SHORT_NAMES, jvm_class

pytestmark = pytest.mark.spark


def test_a_class_is_found_by_its_full_name_and_its_static_methods_run(spark):
    assert jvm_class(spark, "java.lang.Math").abs(-3) == 3
    assert jvm_class(spark, "tidegate.jvm.PolicyScan")._fqn == "tidegate.jvm.PolicyScan"  # Tidegate's jar


@pytest.mark.parametrize("name", ["tidegate.jvm", "tidegate.jvm.NoSuchClass"])
def test_a_package_or_a_missing_class_is_refused_by_name(spark, name):
    with pytest.raises(LookupError, match=name):
        jvm_class(spark, name)


def test_a_session_s_gateway_imports_the_names_pyspark_looks_up_on_every_call_singly(spark):
    gateway = spark.sparkContext._gateway
    server = JavaObject(GATEWAY_SERVER_OBJECT_ID, gateway._gateway_client)
    singles = dict(server.getGateway().getDefaultJVMView().getSingleImportsMap())  # the view pyspark's calls go through
    for name in PYSPARK_SHORT_NAMES:
        assert singles[name.rsplit(".", 1)[1]] == name
