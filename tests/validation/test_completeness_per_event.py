"""semantics §8 completeness of per-event outputs — a temporal join's rows, an analytic job's rows,
a plain per-event job's rows —
on real Spark and real GX: the same suite as window rows, each row named by its output time
and the input position(s) it comes from:

    reference   at 00:05 (order p0/o0, payment p1/o0)   at 00:15 (order p2/o1, unpaid)   …
    output      the same, with one row removed / doubled / changed
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pyspark.sql import functions as F

from platform_support import fill_orders
from tidegate.errors import TidegateError
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.jobspec import load_spec, parse_spec
from tidegate.spark.pipeline.runner import run_batch
from tidegate.validation import check_completeness
from tidegate.validation.project import RULES

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]
JOIN_POSITION = ("partition", "offset", "right_partition", "right_offset")


def run_check(spark, spec, output, reference, project, span=None):
    return check_completeness(spark, spec, output, reference, span, label="test", project_dir=project,
                              data_docs=False)  # fmt: skip


def failed(result) -> set[str]:
    return {r.rule for r in result.rules if not r.success}


@pytest.fixture(scope="module")
def orders(spark, tmp_path_factory):
    """jobs/order_payments.yaml on the batch path over 60 orders: (spec, rows as a DataFrame)."""
    root = tmp_path_factory.mktemp("orders")
    fill_orders(root / "event-log", 60, seed=5, start_us=parse_time_us("2026-01-01T00:00:00Z"))
    spec = load_spec(REPO / "jobs" / "order_payments.yaml")
    result = run_batch(spark, spec, root / "event-log", root / "reference")
    reference = spark.read.parquet(str(result.paths.output))
    assert reference.where("paid IS NULL").count() > 2 and reference.where("paid IS NOT NULL").count() > 20
    return spec, reference


def at(row, columns=JOIN_POSITION):
    """The output row made of ``row``'s events (null-safe: an unpaid order has no right side)."""
    match = F.lit(True)
    for c in columns:
        match = match & F.col(c).eqNullSafe(F.lit(row[c]))
    return match


def named(row, columns=JOIN_POSITION) -> str:
    """How a message names a per-event row: its output time, then its position(s)."""
    us = int(row["system_time"].timestamp() * 1_000_000)
    position = " ".join(f"{c}={'null' if row[c] is None else row[c]}" for c in columns)
    return f"at {format_time_us(us)} {position}"


def test_a_join_output_checked_against_itself_passes_every_rule_unmatched_rows_included(spark, orders, project):
    spec, reference = orders
    result = run_check(spark, spec, reference, reference, project)
    assert result.success, result.describe()
    assert [r.rule for r in result.rules] == list(RULES)
    assert result.compared_rows == reference.count()  # one frame row per join row: unpaid orders are not nulls


def test_a_missing_join_row_fails_naming_its_time_and_both_events(spark, orders, project):
    spec, reference = orders
    victim = reference.where("paid IS NOT NULL").orderBy("system_time", *JOIN_POSITION).collect()[5]
    result = run_check(spark, spec, reference.where(~at(victim)), reference, project)
    assert failed(result) == {"no_missing_rows"}
    [sample] = result.finding("no_missing_rows").samples
    assert sample.window == named(victim)
    with pytest.raises(TidegateError) as raised:
        result.raise_for_failure()
    assert f"missing 1 join row: {named(victim)}" in raised.value.problem


def test_a_doubled_join_row_fails_and_an_unpaid_order_is_named_with_a_null_right_side(spark, orders, project):
    spec, reference = orders
    victim = reference.where("paid IS NULL").orderBy("system_time", *JOIN_POSITION).collect()[1]
    assert victim["right_partition"] is None
    result = run_check(spark, spec, reference.unionByName(reference.where(at(victim))), reference, project)
    assert failed(result) == {"no_doubled_rows"}
    assert result.finding("no_doubled_rows").total == 1
    with pytest.raises(TidegateError, match=rf"doubled 1 join row: {named(victim)} \(2 rows\)"):
        result.raise_for_failure()


def test_a_changed_join_value_fails_naming_the_column(spark, orders, project):
    spec, reference = orders
    victim = reference.where("paid IS NOT NULL").orderBy("system_time", *JOIN_POSITION).collect()[0]
    changed = F.when(at(victim), F.col("paid") + 1).otherwise(F.col("paid"))
    result = run_check(spark, spec, reference.withColumn("paid", changed), reference, project)
    assert failed(result) == {"values_equal_reference"}
    [sample] = result.finding("values_equal_reference").samples
    [mismatch] = sample.mismatches
    assert (sample.window, mismatch.column, float(mismatch.got)) == (named(victim), "paid", victim["paid"] + 1)


def test_an_analytic_output_is_checked_row_by_row_and_a_null_lag_is_a_value(spark, fleet, project, tmp_path):
    # LAG on every reading (no filter): a device's first reading has no previous one, NULL
    spec = parse_spec({k: v for k, v in load_spec(REPO / "jobs" / "temperature_rise.yaml").to_dict().items()
                       if k != "filter"})  # fmt: skip
    reference = spark.read.parquet(str(run_batch(spark, spec, fleet.event_log, tmp_path / "lag").paths.output))
    assert reference.where("previous_temperature IS NULL").count() >= 4  # one per device at least
    result = run_check(spark, spec, reference, reference, project)
    assert result.success, result.describe()

    victim = reference.where("previous_temperature IS NOT NULL").orderBy("system_time", "partition", "offset").first()
    changed = F.when(at(victim, ("partition", "offset")), F.lit(None)).otherwise(F.col("previous_temperature"))
    result = run_check(spark, spec, reference.withColumn("previous_temperature", changed), reference, project)
    assert failed(result) == {"values_equal_reference"}
    [sample] = result.finding("values_equal_reference").samples
    assert sample.window == named(victim, ("partition", "offset"))
    with pytest.raises(TidegateError, match="1 analytic row differs from the reference: at "):
        result.raise_for_failure()


def test_a_per_event_row_without_its_time_or_position_is_refused_or_fails(spark, orders, project):
    spec, reference = orders
    with pytest.raises(TidegateError, match="the output has no column right_offset"):
        run_check(spark, spec, reference.drop("right_offset"), reference, project)
    victim = reference.orderBy("system_time", *JOIN_POSITION).collect()[2]
    nulled = F.when(at(victim), F.lit(None).cast("int")).otherwise(F.col("partition"))
    result = run_check(spark, spec, reference.withColumn("partition", nulled), reference, project)
    assert "no_null_values" in failed(result)
    assert result.finding("no_null_values").samples[0].null_columns == ("partition",)


def test_a_plain_per_event_job_is_checked_row_by_row_by_its_time_and_position(spark, fleet, project, tmp_path):
    """jobs/hot_readings.yaml (a filter and a projection, no window): one row per kept
    reading, final once the watermark passes its time, so it is checked as analytic rows are."""
    # the fleet's devices read about 21 °C: a lower limit keeps some readings and drops others
    spec = parse_spec(load_spec(REPO / "jobs" / "hot_readings.yaml").to_dict() | {"filter": "temperature > 21"})
    reference = spark.read.parquet(str(run_batch(spark, spec, fleet.event_log, tmp_path / "hot").paths.output))
    assert 10 < reference.count() < 400
    result = run_check(spark, spec, reference, reference, project)
    assert result.success, result.describe()
    assert result.compared_rows == reference.count()

    rows = reference.orderBy("system_time", "partition", "offset").collect()
    victim, changed_row = rows[3], rows[7]
    changed = F.when(at(changed_row, ("partition", "offset")), F.col("temp_f") + 1).otherwise(F.col("temp_f"))
    broken = reference.where(~at(victim, ("partition", "offset"))).withColumn("temp_f", changed)
    result = run_check(spark, spec, broken, reference, project)
    assert failed(result) == {"no_missing_rows", "values_equal_reference"}
    assert result.finding("no_missing_rows").samples[0].window == named(victim, ("partition", "offset"))
    [mismatch] = result.finding("values_equal_reference").samples[0].mismatches
    assert mismatch.column == "temp_f"
    with pytest.raises(TidegateError, match=rf"missing 1 event row: {named(victim, ('partition', 'offset'))}"):
        result.raise_for_failure()


def test_a_job_with_steps_is_checked_by_the_window_rows_of_the_step_it_emits(spark, project, tmp_path):
    """jobs/orders_paid_per_hour.yaml (its hour cut to 5 minutes): a join step, then windows;
    its output is checked as window rows, and a missing one is named as a window."""
    fill_orders(tmp_path / "event-log", 60, seed=5, start_us=parse_time_us("2026-01-01T00:00:00Z"))
    job = load_spec(REPO / "jobs" / "orders_paid_per_hour.yaml").to_dict()
    spec = parse_spec(
        job | {"steps": [job["steps"][0], job["steps"][1] | {"window": {"kind": "tumbling", "size": "5m"}}]}
    )
    reference = spark.read.parquet(str(run_batch(spark, spec, tmp_path / "event-log", tmp_path / "batch").paths.output))
    assert reference.count() > 3 and "window_end" in reference.columns
    assert run_check(spark, spec, reference, reference, project).success
    first = reference.orderBy("window_end").first()
    result = run_check(spark, spec, reference.where(F.col("window_end") != first["window_end"]), reference, project)
    assert not result.success
    with pytest.raises(TidegateError, match="window"):
        result.raise_for_failure()


def test_each_named_output_is_checked_by_its_own_rows(spark, fleet, project, tmp_path):
    """jobs/device_archive_and_alerts.yaml on the fleet's log: the archive (per-event rows of
    its first step) is checked row by row by time and position, the alerts as window rows; a
    reading missing from the archive fails its check, naming the reading's time."""
    raw = yaml.safe_load((REPO / "jobs" / "device_archive_and_alerts.yaml").read_text())
    raw["steps"][1]["filter"] = "temperature > 15"  # the fleet's devices run at 21 ± 3 °C: alerts for every one
    spec = parse_spec(raw)
    paths = run_batch(spark, spec, fleet.event_log, tmp_path / "batch").paths
    archive = spark.read.parquet(str(paths.output_of("archive")))
    alerts = spark.read.parquet(str(paths.output))
    assert archive.count() == 400 and "window_end" in alerts.columns
    ok = check_completeness(
        spark, spec, archive, archive, None, label="test", project_dir=project, data_docs=False, output_name="archive"
    )
    assert ok.success and ok.compared_rows == 400
    assert check_completeness(
        spark, spec, alerts, alerts, None, label="test", project_dir=project, data_docs=False
    ).success  # the job's own output: its window rows
    first = archive.orderBy("system_time", "partition", "offset").first()
    result = check_completeness(
        spark,
        spec,
        archive.where(~at(first, ("partition", "offset"))),
        archive,
        None,
        label="archive",
        project_dir=project,
        data_docs=False,
        output_name="archive",
    )
    assert failed(result) == {"no_missing_rows"}
    [sample] = result.finding("no_missing_rows").samples
    assert sample.window == named(first, ("partition", "offset"))
