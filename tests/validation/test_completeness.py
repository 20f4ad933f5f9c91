"""semantics §8 completeness checks on real Spark and real GX: a job's output against its batch
reference. Each test breaks one thing in a copy of the reference and expects the check to
fail naming it — and only it:

    reference   [00:00,00:01) dev-0..3   [00:01,00:02) dev-0..3   [00:02,00:03) …
    output      the same, with one row removed / doubled / changed / nulled / stretched
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from tidegate.errors import ConfigError, TidegateError
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.jobspec import load_spec, parse_spec
from tidegate.validation import check_completeness
from tidegate.validation.project import RULES

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]
MINUTE_US = 60_000_000


def run_check(spark, spec, output, reference, project, span=None, **options):
    return check_completeness(spark, spec, output, reference, span, label="test", project_dir=project, **options)


def at(row):
    """The output row of ``row``'s window and device."""
    return (F.unix_micros("window_start") == F.lit(row.start_us)) & (F.col("deviceId") == F.lit(row.deviceId))


def named(row) -> str:
    """How a message names the row: ``(start, end] deviceId=…`` (the window holds its end)."""
    return f"({format_time_us(row.start_us)}, {format_time_us(row.end_us)}] deviceId={row.deviceId}"


def failed(result) -> set[str]:
    return {r.rule for r in result.rules if not r.success}


def committed_files(project: Path) -> dict[str, str]:
    return {
        str(p.relative_to(project)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(project.rglob("*"))
        if p.is_file() and "uncommitted" not in p.relative_to(project).parts
    }


def test_the_reference_checked_against_itself_passes_every_rule_and_builds_data_docs(spark, fleet, reference, project):
    before = committed_files(project)
    result = run_check(spark, fleet.spec, reference, reference, project)
    assert result.success, result.describe()
    assert [r.rule for r in result.rules] == list(RULES)
    assert all(r.success and r.unexpected == 0 and r.error is None for r in result.rules)
    assert result.findings == ()
    assert result.compared_rows == len(fleet.rows)
    result.raise_for_failure()  # does not raise
    # Data Docs under the project's uncommitted/, with this run's page
    site = project / "uncommitted" / "data_docs" / "local_site"
    assert result.data_docs_index == site / "index.html" and result.data_docs_index.is_file()
    assert result.data_docs_page.is_file() and site in result.data_docs_page.parents
    assert "tidegate_completeness" in result.data_docs_index.read_text()
    # the committed suite, validation definition and checkpoint ran as they are: nothing rewritten
    assert committed_files(project) == before


def test_a_missing_window_row_fails_and_the_message_names_its_window_and_key(spark, fleet, reference, project):
    victim = fleet.rows[len(fleet.rows) // 2]
    result = run_check(spark, fleet.spec, reference.where(~at(victim)), reference, project)
    assert failed(result) == {"no_missing_rows"}
    finding = result.finding("no_missing_rows")
    assert finding.total == 1 and [s.window for s in finding.samples] == [named(victim)]
    with pytest.raises(TidegateError) as raised:
        result.raise_for_failure()
    assert f"missing 1 window row: {named(victim)}" in raised.value.problem
    assert "replay the job" in raised.value.fix
    assert str(result.data_docs_page) in raised.value.fix


def test_a_doubled_window_row_fails_naming_the_window_and_its_count(spark, fleet, reference, project):
    victim = fleet.rows[1]
    output = reference.unionByName(reference.where(at(victim)))
    result = run_check(spark, fleet.spec, output, reference, project)
    assert failed(result) == {"no_doubled_rows"}
    finding = result.finding("no_doubled_rows")
    assert finding.total == 1
    assert [(s.window, s.output_rows) for s in finding.samples] == [(named(victim), 2)]
    assert result.rule("no_doubled_rows").unexpected == 2  # GX counts both copies
    with pytest.raises(TidegateError, match=rf"doubled 1 window row: {re.escape(named(victim))} \(2 rows\)"):
        result.raise_for_failure()


def test_a_changed_aggregate_fails_naming_the_column_expected_and_got(spark, fleet, reference, project):
    victim = fleet.rows[-2]
    changed = F.when(at(victim), F.col("max_temperature") + 0.5).otherwise(F.col("max_temperature"))
    result = run_check(spark, fleet.spec, reference.withColumn("max_temperature", changed), reference, project)
    assert failed(result) == {"values_equal_reference"}
    [sample] = result.finding("values_equal_reference").samples
    assert sample.window == named(victim)
    [mismatch] = sample.mismatches
    assert mismatch.column == "max_temperature"
    assert float(mismatch.expected) == victim.max_temperature
    assert float(mismatch.got) == victim.max_temperature + 0.5
    with pytest.raises(TidegateError) as raised:
        result.raise_for_failure()
    assert f"1 window row differs from the reference: {named(victim)}: {mismatch}" in raised.value.problem
    assert str(mismatch) == f"max_temperature expected {mismatch.expected}, got {mismatch.got}"


def test_floating_point_noise_within_the_relative_tolerance_is_not_a_difference(spark, fleet, reference, project):
    # the same readings averaged in another order differ in the last bits, not in content
    noisy = reference.withColumn("avg_temperature", F.col("avg_temperature") * F.lit(1 + 1e-12))
    assert noisy.exceptAll(reference.select(*noisy.columns)).count() > 0  # really different bits
    result = run_check(spark, fleet.spec, noisy, reference, project, data_docs=False)
    assert result.success, result.describe()
    assert result.data_docs_index is None and result.data_docs_page is None


def test_a_null_key_fails_and_is_named(spark, fleet, reference, project):
    victim = fleet.rows[2]
    nulled = F.when(at(victim), F.lit(None).cast("string")).otherwise(F.col("deviceId"))
    result = run_check(spark, fleet.spec, reference.withColumn("deviceId", nulled), reference, project)
    # the row with the null key is not the reference's row: that one is missing, this one extra
    assert failed(result) == {"no_null_values", "no_missing_rows", "no_extra_rows"}
    [sample] = result.finding("no_null_values").samples
    assert sample.null_columns == ("deviceId",) and dict(sample.key) == {"deviceId": None}
    window = named(victim).rsplit(" ", 1)[0]
    with pytest.raises(TidegateError) as raised:
        result.raise_for_failure()
    assert f"1 window row with null values: {window} deviceId=null (null deviceId)" in raised.value.problem
    assert f"missing 1 window row: {named(victim)}" in raised.value.problem


def test_a_window_of_the_wrong_size_fails(spark, fleet, reference, project):
    victim = fleet.rows[5]
    stretched = F.when(at(victim), F.col("window_end") + F.expr("INTERVAL 1 MINUTE")).otherwise(F.col("window_end"))
    result = run_check(spark, fleet.spec, reference.withColumn("window_end", stretched), reference, project)
    assert failed(result) == {"window_size_matches_spec", "no_missing_rows", "no_extra_rows"}
    finding = result.finding("window_size_matches_spec")
    assert finding.total == 1 and finding.samples[0].window_us == 2 * MINUTE_US
    longer = (
        f"({format_time_us(victim.start_us)}, {format_time_us(victim.end_us + MINUTE_US)}] deviceId={victim.deviceId}"
    )
    assert f"1 window row not 1m long (tumbling size): {longer} is 2m" in str(finding)


def test_session_windows_may_be_any_length_up_to_their_maximum(spark, project):
    spec = load_spec(REPO / "jobs" / "device_sessions.yaml")  # gap 2m, max 30m: sessions up to 60m
    t0 = parse_time_us("2026-01-01T00:00:00Z")
    lengths = {"dev-a": 1_000_000, "dev-b": 29 * MINUTE_US, "dev-c": 30 * MINUTE_US, "dev-d": 31 * MINUTE_US,
               "dev-e": 0, "dev-f": 60 * MINUTE_US, "dev-g": 61 * MINUTE_US}  # fmt: skip
    rows = [(t0, t0 + n, dev, 3, t0, t0 + n, 40.0, 41.5) for dev, n in lengths.items()]
    sessions = spark.createDataFrame(
        rows, "s long, e long, deviceId string, readings long, f long, l long, min_humidity double, max_humidity double"
    ).select(
        F.timestamp_micros("s").alias("window_start"), F.timestamp_micros("e").alias("window_end"), "deviceId",
        "readings", F.timestamp_micros("f").alias("first_reading"), F.timestamp_micros("l").alias("last_reading"),
        "min_humidity", "max_humidity",
    )  # fmt: skip
    # cut as Stream Analytics cuts them, once they have lasted max_duration: up to twice that
    result = run_check(spark, spec, sessions, sessions, project, data_docs=False)
    finding = result.finding("window_size_matches_spec")
    assert sorted(dict(s.key)["deviceId"] for s in finding.samples) == ["dev-g"]
    assert "not at least 0 and at most 1h (twice the session maximum)" in str(finding)

    def variant(**window):
        return parse_spec(spec.to_dict() | {"window": spec.to_dict()["window"] | window})

    # cut at every check point: up to the maximum. A session holds its end: one of a single
    # event exactly on a check point ends where it starts
    result = run_check(spark, variant(cut="every_check_point"), sessions, sessions, project, data_docs=False)
    assert failed(result) == {"window_size_matches_spec"}
    finding = result.finding("window_size_matches_spec")
    assert sorted(dict(s.key)["deviceId"] for s in finding.samples) == ["dev-d", "dev-f", "dev-g"]
    assert "not at least 0 and at most 30m (session maximum)" in str(finding)
    window = finding.samples[0].window  # [first event, end]: both in
    assert window.startswith("[") and window.endswith("Z] deviceId=dev-d")
    # Spark's sessions, [start, end), are never empty
    spark_sessions = variant(cut="every_check_point", edges="start_inclusive")
    result = run_check(spark, spark_sessions, sessions, sessions, project, data_docs=False)
    finding = result.finding("window_size_matches_spec")
    assert sorted(dict(s.key)["deviceId"] for s in finding.samples) == ["dev-d", "dev-e", "dev-f", "dev-g"]
    assert "not longer than 0 and at most 30m (session maximum)" in str(finding)


def test_a_defect_outside_the_span_does_not_fail_a_check_over_the_span(spark, fleet, reference, project):
    ends = sorted({r.end_us for r in fleet.rows})
    victim = next(r for r in fleet.rows if r.end_us == ends[1])
    output = reference.where(~at(victim))  # a missing row in the window ending at ends[1]
    after = (ends[1], ends[-1])  # (from, to]: the window ending at ends[1] is outside
    result = run_check(spark, fleet.spec, output, reference, project, after, data_docs=False)
    assert result.success, result.describe()
    assert result.compared_rows == sum(1 for r in fleet.rows if ends[1] < r.end_us <= ends[-1]) > 0
    # the same output over a span that holds the defect fails, naming it and where to replay from
    holding = (ends[0], ends[-1])
    result = run_check(spark, fleet.spec, output, reference, project, holding, data_docs=False)
    assert failed(result) == {"no_missing_rows"}
    assert result.replay_from_us == ends[0] - fleet.spec.lookback_us
    with pytest.raises(TidegateError) as raised:
        result.raise_for_failure()
    assert f"window ends in ({format_time_us(ends[0])}, {format_time_us(ends[-1])}]" in raised.value.problem
    assert f"missing 1 window row: {named(victim)}" in raised.value.problem
    assert f"from {format_time_us(result.replay_from_us)} or earlier" in raised.value.fix


def test_outputs_that_are_not_window_rows_are_refused_before_any_validation(spark, fleet, reference, project):
    with pytest.raises(TidegateError, match="the output has no column max_temperature"):
        run_check(spark, fleet.spec, reference.drop("max_temperature"), reference, project)
    # a per-event job's check given window rows: they have no time and position of an event
    with pytest.raises(TidegateError, match="the output has no column system_time, partition, offset"):
        run_check(spark, load_spec(REPO / "jobs" / "hot_readings.yaml"), reference, reference, project)
    with pytest.raises(ConfigError, match="is empty"):
        run_check(spark, fleet.spec, reference, reference, project, (10, 10))


def test_a_region_with_no_output_in_the_span_is_compared_as_empty_not_refused(spark, fleet, project, tmp_path):
    # a restarted version whose first window has not ended yet: its lineage has no file.
    # Against the batch reference's windows in the span its rows are missing; over a span in
    # which no window ends on either side there is nothing to compare, and that passes.
    from types import SimpleNamespace as NS

    from tidegate.control.db import ControlDB
    from tidegate.runtime.checks.completeness import check

    db = ControlDB(f"sqlite:///{tmp_path / 'control.db'}")
    (tmp_path / "east-v2" / "output").mkdir(parents=True)
    db.create_lineage(
        id="east-v2",
        job=fleet.spec.name,
        region="east",
        fingerprint="f",
        version=1,
        root=str(tmp_path / "east-v2"),
        output_from_us=0,
        windowed=True,
        created_at=1.0,
    )
    controller = NS(
        db=db, spec=lambda job, version=None: (1, fleet.spec), config=NS(region=lambda name: None, gx_project=project)
    )
    ends = sorted({r.end_us for r in fleet.rows})
    held = check(spark, controller, fleet.spec.name, "east", (ends[0], ends[2]), reference=fleet.output_dir)
    assert not held.success and "missing" in held.message
    between = check(
        spark, controller, fleet.spec.name, "east", (ends[0], ends[0] + MINUTE_US // 2), reference=fleet.output_dir
    )
    assert between.success and "0 rows compared" in between.summary
    a_day_on = check(
        spark,
        controller,
        fleet.spec.name,
        "east",
        (ends[-1] + 1440 * MINUTE_US, ends[-1] + 1441 * MINUTE_US),
        reference=fleet.output_dir,
    )  # no file on either side
    assert a_day_on.success and "nothing to compare" in a_day_on.summary
    assert sorted((row.id, row.success) for row in db.checks(fleet.spec.name))[0][1] is False  # all recorded
    assert len(db.checks(fleet.spec.name)) == 3
