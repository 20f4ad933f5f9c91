"""The platform's settings as an operator finds them: every variable the code reads is in the
configuration guide (docs/guide/configuration.md)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tidegate.errors import ConfigError
from tidegate.runtime.jobs.config import ENVIRONMENT

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "guide" / "configuration.md"


def test_the_configuration_guides_table_names_every_variable():
    section = GUIDE.read_text()
    rows = "\n".join(line for line in section.splitlines() if line.startswith("| `"))
    named = set(re.findall(r"`(TIDEGATE_[A-Z0-9_<>]+)`", rows))
    wanted = {name.replace("<NAME>", "<R>") for name in ENVIRONMENT}
    missing = sorted(wanted - named - {"TIDEGATE_CONFIG"})  # TIDEGATE_CONFIG: the paragraph above the table
    assert not missing, f"docs/guide/configuration.md does not list {missing}: add a row each"
    assert "TIDEGATE_CONFIG" in section


def test_a_launched_process_gets_the_platforms_settings_and_runtimes_and_nothing_else_of_its_launcher():
    from tidegate.runtime.jobs.config import launched_environment, load_config

    launcher = {
        "PATH": "/usr/bin",
        "HOME": "/home/op",
        "TIDEGATE_HOME": "var",
        "PYSPARK_PYTHON": "py",
        "JAVA_HOME": "/jdk",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "AWS_REGION": "eu-west-1",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql://airflow:pw@db/airflow",
        "GITHUB_TOKEN": "t0ken",
        "MY_SECRET": "s",
    }
    assert launched_environment(launcher) == {
        "PATH": "/usr/bin",
        "HOME": "/home/op",
        "TIDEGATE_HOME": "var",
        "PYSPARK_PYTHON": "py",
        "JAVA_HOME": "/jdk",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "AWS_REGION": "eu-west-1",
    }
    env = load_config({"TIDEGATE_HOME": "var"}).driver_environment({"MY_SECRET": "s", "PATH": "/bin"})
    assert "MY_SECRET" not in env and env["PATH"] == "/bin" and env["TIDEGATE_CONTROL_DB"].startswith("sqlite:")


def test_the_log_folders_default_to_the_home_and_reach_the_drivers_a_controller_launches(tmp_path):
    from tidegate.runtime.jobs.config import load_config

    assert load_config({"TIDEGATE_HOME": "home"}, cwd=tmp_path).log_dirs == (tmp_path / "home",)
    config = load_config({"TIDEGATE_HOME": "home", "TIDEGATE_LOG_DIRS": f"/srv/logs{os.pathsep}logs"}, cwd=tmp_path)
    assert config.log_dirs == (Path("/srv/logs"), tmp_path / "logs")
    launched = config.driver_environment({})
    assert load_config(launched, cwd=tmp_path / "elsewhere").log_dirs == config.log_dirs  # what the driver checks


def test_a_driver_forgets_the_control_database_url_once_connected():
    from tidegate.runtime.jobs.config import forget_driver_secrets

    environ = {"TIDEGATE_CONTROL_DB": "postgresql://tidegate:pw@db/control", "TIDEGATE_HOME": "var"}
    forget_driver_secrets(environ)
    assert environ == {"TIDEGATE_HOME": "var"}


def test_a_launched_driver_keeps_the_variable_a_kafka_connection_reads_its_password_from(tmp_path):
    from tidegate.runtime.jobs.config import load_config

    settings = tmp_path / "tidegate.yaml"
    settings.write_text(
        "kafka_connections:\n  payments:\n    bootstrap_servers: pay-1:9093\n"
        "    sasl_username: tidegate\n    sasl_password_env: PAYMENTS_KAFKA_PASSWORD\n"
    )
    config = load_config({"TIDEGATE_CONFIG": str(settings), "TIDEGATE_HOME": str(tmp_path)})
    env = config.driver_environment({"PAYMENTS_KAFKA_PASSWORD": "pw", "OTHER_PASSWORD": "no"})
    assert env["PAYMENTS_KAFKA_PASSWORD"] == "pw" and "OTHER_PASSWORD" not in env


def test_a_local_region_keeps_its_lineages_and_driver_logs_in_its_storage_folder_as_before(tmp_path):
    from tidegate.runtime.jobs.config import load_config

    east = load_config({"TIDEGATE_HOME": str(tmp_path)}, cwd=tmp_path).region("east")
    assert east.storage.is_local and east.storage.path == tmp_path / "regions" / "east"
    assert east.work == east.storage.path
    assert east.job_dir("fleet") == tmp_path / "regions" / "east" / "jobs" / "fleet"
    assert east.lineage_root("fleet", "lineages", "L1") == str(east.job_dir("fleet") / "lineages" / "L1")
    assert east.s3_settings() is None


def test_an_s3_region_keeps_lineages_in_its_bucket_and_driver_logs_under_the_platform_home(tmp_path):
    from tidegate.runtime.jobs.config import load_config

    (tmp_path / "platform.yaml").write_text("regions:\n  east:\n    storage: s3a://tidegate-east/prod\n  west: {}\n")
    env = {
        "TIDEGATE_HOME": str(tmp_path),
        "TIDEGATE_CONFIG": str(tmp_path / "platform.yaml"),
        "TIDEGATE_S3_EAST_ENDPOINT": "http://127.0.0.1:9000",
        "TIDEGATE_S3_ENDPOINT": "http://shared:9000",
    }
    config = load_config(env, cwd=tmp_path)
    east = config.region("east")
    assert east.on_object_store and east.storage.uri == "s3a://tidegate-east/prod"
    assert east.lineage_root("fleet", "lineages", "L1") == "s3a://tidegate-east/prod/jobs/fleet/lineages/L1"
    assert east.job_dir("fleet") == tmp_path / "regions" / "east" / "jobs" / "fleet"  # driver logs stay local
    assert east.s3_settings(env).endpoint == "http://127.0.0.1:9000"  # the region's own store, not the shared one
    assert not config.region("west").on_object_store

    # a launched driver finds the same root, work folder and store settings as its launcher
    launched = config.driver_environment(env)
    again = load_config(launched, cwd=Path("/")).region("east")
    assert (again.storage, again.work) == (east.storage, east.work)
    assert again.s3_settings(launched) == east.s3_settings(env)


def test_an_s3_regions_spark_session_reaches_its_bucket_only_with_its_own_settings(tmp_path, monkeypatch):
    from tidegate.runtime.jobs.config import Region

    monkeypatch.setenv("TIDEGATE_S3_EAST_ENDPOINT", "http://127.0.0.1:9000")
    east = Region("east", storage="s3a://tidegate-east/p", work=tmp_path, spark_conf={"spark.x": "1"})
    try:
        conf = east.spark_session_conf()
    except ConfigError as missing:  # hadoop-aws not fetched on this machine
        pytest.skip(str(missing))
    assert conf["spark.x"] == "1"
    assert conf["spark.hadoop.fs.s3a.bucket.tidegate-east.endpoint"] == "http://127.0.0.1:9000"
    assert not [k for k in conf if k.startswith("spark.hadoop.fs.s3a.endpoint")]


def test_a_checks_session_reaches_every_s3_regions_store_and_a_local_platform_changes_nothing(tmp_path):
    from tidegate.runtime.jobs.config import load_config

    assert load_config({"TIDEGATE_HOME": str(tmp_path)}, cwd=tmp_path).storage_spark_conf() == {}
    env = {
        "TIDEGATE_HOME": str(tmp_path),
        "TIDEGATE_REGION_EAST_STORAGE": "s3a://tidegate-east/p",
        "TIDEGATE_REGION_WEST_STORAGE": "s3a://tidegate-west/p",
        "TIDEGATE_S3_EAST_ENDPOINT": "http://127.0.0.1:1",
        "TIDEGATE_S3_WEST_ENDPOINT": "http://127.0.0.1:2",
    }
    config = load_config(env, cwd=tmp_path)
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            conf = config.storage_spark_conf()
    except ConfigError as missing:  # hadoop-aws not fetched on this machine
        pytest.skip(str(missing))
    assert conf["spark.hadoop.fs.s3a.bucket.tidegate-east.endpoint"] == "http://127.0.0.1:1"
    assert conf["spark.hadoop.fs.s3a.bucket.tidegate-west.endpoint"] == "http://127.0.0.1:2"


def test_the_region_names_come_from_the_environment_else_the_config_file_else_the_defaults(tmp_path):
    from tidegate.runtime.jobs.config import load_config
    from tidegate.runtime.jobs.config_file import region_names

    (tmp_path / "platform.yaml").write_text("regions:\n  north: {}\n  south: {}\n")
    from_file = {"TIDEGATE_HOME": str(tmp_path), "TIDEGATE_CONFIG": "platform.yaml"}
    assert region_names({}, tmp_path) == ("east", "west")
    assert region_names(from_file, tmp_path) == ("north", "south")
    assert region_names(from_file | {"TIDEGATE_REGIONS": "west, east"}, tmp_path) == ("west", "east")
    assert tuple(load_config(from_file, cwd=tmp_path).regions) == region_names(from_file, tmp_path)
    with pytest.raises(ConfigError, match="names no region or one twice"):
        region_names({"TIDEGATE_REGIONS": "east,east"}, tmp_path)
