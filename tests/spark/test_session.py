"""How a new session's settings are put together, without starting one: an S3 root's session
loads Tidegate's checkpoint file manager from the JVM's class path, next to hadoop-aws."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tidegate.errors import ConfigError
from tidegate.jvm.class_archive import APPENDED_CLASS_PATH, LAUNCHER_CLASS_PATH_ENV
from tidegate.spark import session
from tidegate.spark.pipeline import java_source
from tidegate.storage.spark import CHECKPOINT_FILE_MANAGER, CHECKPOINT_MANAGER_SETTING

NAMED = {
    CHECKPOINT_MANAGER_SETTING: CHECKPOINT_FILE_MANAGER,
    APPENDED_CLASS_PATH: "/opt/hadoop-aws.jar",
    "spark.driver.extraClassPath": "/opt/other.jar",
}


def test_a_session_that_names_the_manager_gets_the_jar_after_spark_s_jars_and_on_the_executors():
    settings = dict(NAMED)
    session._put_checkpoint_manager_on_class_path(settings, Path("/venv/tidegate-jvm.jar"))
    assert settings[APPENDED_CLASS_PATH].split(os.pathsep) == ["/opt/hadoop-aws.jar", "/venv/tidegate-jvm.jar"]
    assert settings["spark.executor.extraClassPath"] == "/venv/tidegate-jvm.jar"
    assert settings["spark.driver.extraClassPath"] == "/opt/other.jar"  # the operator's, before Spark's jars


def test_a_session_on_local_roots_keeps_spark_s_own_manager_and_class_path():
    settings = {"spark.driver.extraClassPath": "/opt/other.jar"}
    session._put_checkpoint_manager_on_class_path(settings, Path("/venv/tidegate-jvm.jar"))
    assert settings == {"spark.driver.extraClassPath": "/opt/other.jar"}


def test_the_launcher_appends_the_jars_to_an_operator_s_own_launcher_class_path_and_leaves_it_as_it_was(monkeypatch):
    monkeypatch.setenv(LAUNCHER_CLASS_PATH_ENV, "/opt/hadoop/*")  # a Hadoop-free Spark's own Hadoop
    with session._launch_environment("/opt/hadoop-aws.jar"):
        assert os.environ[LAUNCHER_CLASS_PATH_ENV] == f"/opt/hadoop/*{os.pathsep}/opt/hadoop-aws.jar"
    assert os.environ[LAUNCHER_CLASS_PATH_ENV] == "/opt/hadoop/*"
    monkeypatch.delenv(LAUNCHER_CLASS_PATH_ENV)
    with session._launch_environment("/opt/hadoop-aws.jar"):
        assert os.environ[LAUNCHER_CLASS_PATH_ENV] == "/opt/hadoop-aws.jar"
    assert LAUNCHER_CLASS_PATH_ENV not in os.environ


def test_the_manager_is_built_even_when_jobs_read_through_python_and_without_a_jdk_the_session_is_refused(
    tmp_path, monkeypatch
):
    jar = tmp_path / "tidegate-jvm.jar"
    monkeypatch.setattr(java_source, "build_jar", lambda: jar)
    settings = dict(NAMED)
    session._put_checkpoint_manager_on_class_path(settings, None)  # TIDEGATE_SOURCE_READER=python: no jar yet
    assert settings[APPENDED_CLASS_PATH].endswith(str(jar))

    def no_jdk():
        raise ConfigError("no Java compiler (javac) found", "install a JDK")

    monkeypatch.setattr(java_source, "build_jar", no_jdk)
    with pytest.raises(ConfigError, match="checkpoint file manager.*javac") as refused:
        session._put_checkpoint_manager_on_class_path(dict(NAMED), None)
    assert refused.value.fix == "install a JDK"
