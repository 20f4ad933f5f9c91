"""The commands the Airflow side builds, compared exactly."""

from tidegate_airflow import commands


def test_batch_reference_arguments():
    assert commands.batch_reference_args("fleet", "2026-01-01T00:10:00Z", "/data/ref") == [
        "fleet",
        "--from",
        "2026-01-01T00:10:00Z",
        "--output",
        "/data/ref",
    ]
    assert commands.batch_reference_args("fleet", "2026-01-01T00:10:00Z", "/data/ref", version=3)[-2:] == [
        "--version",
        "3",
    ]


def test_completeness_arguments_for_a_run_a_span_and_an_open_span():
    assert commands.completeness_args("fleet", "east", "/r.json", run_id=7) == [
        "fleet",
        "--target",
        "east",
        "--result",
        "/r.json",
        "--run",
        "7",
    ]
    assert commands.completeness_args(
        "fleet", "consumer", "/r.json", run_id=7, span_from="A", span_to="B", reference="/ref", label="after restart"
    ) == [
        "fleet",
        "--target",
        "consumer",
        "--result",
        "/r.json",
        "--from",
        "A",
        "--to",
        "B",
        "--reference",
        "/ref",
        "--label",
        "after restart",
    ]
    assert commands.completeness_args("fleet", "west", "/r.json", span_from="A") == [
        "fleet",
        "--target",
        "west",
        "--result",
        "/r.json",
        "--from",
        "A",
    ]


def test_several_targets_are_one_command():
    assert commands.completeness_args("fleet", ["west", "consumer"], "/r.json", run_id=7) == [
        "fleet",
        "--target",
        "west",
        "--target",
        "consumer",
        "--result",
        "/r.json",
        "--run",
        "7",
    ]


def test_the_applications_are_the_jobs_entry_points():
    assert commands.batch_reference_application().endswith("jobs/batch_reference.py")
    assert commands.completeness_application().endswith("jobs/check_completeness.py")


def test_spark_settings_are_utc_and_the_region_can_add_its_own():
    conf = commands.spark_conf({"spark.executor.memory": "2g"})
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.executor.memory"] == "2g"


def test_a_submitted_jvm_gets_the_workers_java_options_unless_the_region_set_its_own(monkeypatch):
    from tidegate.jvm import class_archive
    from tidegate.jvm.options import BASE_JAVA

    monkeypatch.setenv("TIDEGATE_JVM_OPTIONS", "-Xmx3g")
    conf = commands.with_java_options(commands.spark_conf({"spark.executor.extraJavaOptions": "-Xss4m"}))
    archive = class_archive.options()  # Spark's class archive, when this machine's setup built it
    assert conf["spark.driver.extraJavaOptions"] == " ".join(filter(None, [BASE_JAVA, archive, "-Xmx3g"]))
    assert conf["spark.executor.extraJavaOptions"] == "-Xss4m"  # the region's own, as it wrote it


def test_spark_submits_carry_sparks_kafka_connector_when_bootstrap_fetched_it(monkeypatch, tmp_path):
    from tidegate.jvm import deps as jars

    monkeypatch.setenv(jars.JVM_DEPS_ENV, str(tmp_path))
    assert commands.spark_jars() is None  # not fetched: the event log's jobs need nothing
    folder = tmp_path / jars.CONNECTOR
    folder.mkdir()
    (folder / "spark-sql-kafka-0-10_2.13-4.2.0.jar").touch()
    (folder / "kafka-clients-3.9.2.jar").touch()
    (folder / ".fetched").write_text(__import__("hashlib").sha256(jars.pom(jars.CONNECTOR).read_bytes()).hexdigest())
    assert (
        commands.spark_jars()
        == f"{folder / 'kafka-clients-3.9.2.jar'},{folder / 'spark-sql-kafka-0-10_2.13-4.2.0.jar'}"
    )


def test_no_region_turns_variable_substitution_or_sql_on_files_back_on():
    conf = commands.locked(
        commands.spark_conf({"spark.sql.variable.substitute": "true", "spark.sql.runSQLOnFiles": "true"})
    )
    assert conf["spark.sql.variable.substitute"] == "false"
    assert conf["spark.sql.runSQLOnFiles"] == "false"
