"""Spark's class archive: found by the JVM build and the jars it was made for, and mapped by every
JVM Tidegate starts when it exists, and none without java (its build:
tests/spark/test_class_archive_build.py)."""

from __future__ import annotations

import os

import pytest

from tidegate.errors import ConfigError
from tidegate.jvm import class_archive
from tidegate.jvm.class_archive import ARCHIVE_ENV, DIR_ENV, QUIET, archive_path, options
from tidegate.jvm.options import BASE_JAVA, QUICK_JVM, java_options
from tidegate.spark.class_archive import build


@pytest.fixture
def jars(tmp_path, monkeypatch):
    """A stand-in for pyspark's jars/ that a test may change."""
    folder = tmp_path / "jars"
    folder.mkdir()
    (folder / "spark-core.jar").write_bytes(b"one")
    monkeypatch.setattr(class_archive, "spark_jars", lambda: folder)
    return folder


def test_an_archive_is_named_for_its_jvm_build_and_its_jars(jars, tmp_path):
    env = {DIR_ENV: str(tmp_path / "archives"), "PATH": os.environ["PATH"]}
    first = archive_path(env)
    assert first.parent == tmp_path / "archives" and first.name.endswith(".jsa")
    assert archive_path(env) == first  # the same inputs: the same archive
    (jars / "spark-core.jar").write_bytes(b"two, longer")  # an upgraded pyspark
    assert archive_path(env) != first
    (jars / "spark-core.jar").write_bytes(b"one")
    os.utime(jars / "spark-core.jar", ns=(0, 0))
    assert archive_path(env) != first  # the same size, another file: the JVM would refuse the archive too


def test_every_jvm_maps_the_archive_once_it_is_built_unless_it_is_off(jars, tmp_path):
    env = {DIR_ENV: str(tmp_path), "PATH": os.environ["PATH"]}
    assert options(env) == "" and java_options(env) == BASE_JAVA  # not built: JVMs start as before
    archive_path(env).write_bytes(b"built")
    mapped = f"-XX:SharedArchiveFile={archive_path(env)} {QUIET}"
    assert options(env) == mapped
    assert (
        java_options(env | {"TIDEGATE_JVM_OPTIONS": "-Xmx2g"}, quick=True) == f"{BASE_JAVA} {QUICK_JVM} {mapped} -Xmx2g"
    )
    assert options(env | {ARCHIVE_ENV: "off"}) == ""
    with pytest.raises(ConfigError) as bad:
        options(env | {ARCHIVE_ENV: "yes"})
    assert "TIDEGATE_CLASS_ARCHIVE='yes'" in str(bad.value) and "auto (the default) or off" in str(bad.value)


def test_without_java_there_is_no_archive_and_building_says_what_to_install(jars, tmp_path):
    env = {DIR_ENV: str(tmp_path), "PATH": str(tmp_path / "empty"), "JAVA_HOME": str(tmp_path / "no-jdk")}
    assert archive_path(env) is None and options(env) == ""
    with pytest.raises(ConfigError) as refused:
        build(env)  # the builder (tidegate.spark.class_archive) says so too
    assert "install Java 17" in str(refused.value)


def test_an_archive_at_a_path_with_whitespace_is_left_out_as_spark_splits_options_on_it(jars, tmp_path):
    env = {DIR_ENV: str(tmp_path / "my archives"), "PATH": os.environ["PATH"]}
    archive_path(env).parent.mkdir()
    archive_path(env).write_bytes(b"built")
    assert options(env) == ""
