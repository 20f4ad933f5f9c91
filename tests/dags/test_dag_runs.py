"""Every DAG end to end with ``airflow dags test``: real Airflow, real drivers, real Spark, real GX.

The platform (event log, control database, two regions) lives under tmp_path; Airflow's
metadata is a SQLite file migrated once per module. Drivers the DAGs start outlive the
task that started them, as in production, and are killed when the test ends.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from airflow_support import dags_test, migrate
from platform_support import MIN, REPO, fill, fill_two_logs, first_arrival
from tidegate.eventtime.durations import format_time_us, parse_time_us
from tidegate.inputs.event_log import EventLog
from tidegate.inputs.event_log.traffic import device_names

pytestmark = [pytest.mark.spark, pytest.mark.slow]
JOB = "device-fleet-counts"


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow")
    migrate(home)
    return home


@pytest.fixture(scope="module")
def event_log(tmp_path_factory):
    path = tmp_path_factory.mktemp("dags-event-log") / "event-log"
    fill(path, 3_000, seed=31)
    return path


def start_at(event_log) -> int:
    return first_arrival(EventLog.open(event_log)) + 8 * MIN


def run(airflow_home, dag_id, conf, platform):
    """The finished ``dags test`` and its whole output (task logs included)."""
    done = dags_test(airflow_home, dag_id, conf, platform.env, platform.root)
    return done, done.stdout + "\n" + done.stderr


# the deploy of both regions through the DAG, waiting until both caught up: the Kafka job's in
# tests/inputs/kafka/test_kafka_dags.py (the DAG does the same for any source), the pair's rule
# for stopping one in tests/dags/test_pair_dags.py


def test_a_deploy_that_fails_shows_failed_and_says_why(airflow_home, platform_factory, event_log, tmp_path):
    """The release at its end runs whatever happened before it; the run must not show green."""
    p = platform_factory("deploy-refused", event_log)
    outside = tmp_path / "elsewhere.yaml"  # outside the spec folders
    outside.write_text(p.spec_file().read_text())
    done, out = run(airflow_home, "tidegate_deploy", {"spec": str(outside), "regions": ["east"]}, p)
    assert done.returncode != 0, out[-6000:]
    assert "is outside the spec folders" in out and "the deploy did not reach its end" in out
    assert p.controller.db.latest_run(JOB, "east") is None  # nothing was started


def test_restart_stops_starts_waits_and_checks_completeness(airflow_home, platform_factory, event_log):
    p = platform_factory("restart", event_log)
    p.controller.deploy(p.spec_file())
    first = p.controller.start(JOB, "east", mode="custom", at=start_at(event_log))
    p.wait_caught_up(JOB, "east")
    done, out = run(airflow_home, "tidegate_restart", {"job": JOB, "region": "east", "mode": "last-stopped"}, p)
    assert done.returncode == 0, out[-6000:]
    latest = p.controller.db.latest_run(JOB, "east")
    assert latest.id != first.run_id and latest.checkpoint == "reused" and latest.catch_up_s is not None
    assert latest.estimate_model_s is not None  # every restart records estimate and measured catch-up
    check = p.controller.db.checks(JOB)[0]
    assert check.success and check.target == "east" and check.data_docs

    # a planned stop whose estimate exceeds the allowed delay aborts before it stops anything
    done, out = run(
        airflow_home,
        "tidegate_planned_stop",
        {"new_spec": str(p.spec_file()), "region": "east", "allowed_delay_s": 0, "rehearsal": False},
        p,
    )
    assert done.returncode != 0
    procedure = p.controller.db.procedures(JOB)[0]
    assert procedure.kind == "planned-stop" and procedure.result == "aborted"
    assert "exceeds the allowed 0 s" in procedure.detail
    status = p.controller.status_of(JOB, "east")
    assert status.state == "running" and status.run_id == latest.id  # nothing was stopped
    p.controller.stop(JOB, "east")


# the region replayed keeps its lineages on S3: a planned stop there is the same procedure, its
# checks read the store; on a local root the join test below and the Kafka and pair DAG tests
# replay by planned stops
@pytest.mark.parametrize("east_storage", ["s3"], indirect=True)
def test_planned_stop_with_a_changed_query_replays_and_equals_the_batch_path(
    airflow_home, platform_factory, event_log, east_storage, tmp_path
):
    p = platform_factory("planned", event_log, env=east_storage.env)
    p.controller.deploy(p.spec_file())
    t = start_at(event_log)
    p.controller.start(JOB, "east", mode="custom", at=t)
    p.wait_batches(JOB, "east", 1)  # stopped early: the new version has the rest of the log to replay
    p.controller.stop(JOB, "east")
    v2 = p.spec_file(version=2, aggregates={"readings": "count(*)", "min_temperature": "min(temperature)"})
    done, out = run(
        airflow_home,
        "tidegate_planned_stop",
        {
            "new_spec": str(v2),
            "region": "east",
            "allowed_delay_s": 900,
            "mode": "last-stopped",
            "rehearsal": True,
            "timeout_s": 900,
        },
        p,
    )
    assert done.returncode == 0, out[-6000:]
    procedure = p.controller.db.procedures(JOB)[0]
    assert procedure.kind == "planned-stop" and procedure.result == "passed"
    assert procedure.estimate_s is not None and procedure.actual_s is not None
    detail = json.loads(procedure.detail)
    assert all(c["success"] for c in detail["checks"]) and {c["target"] for c in detail["checks"]} == {
        "east",
        "consumer",
    }
    replay = p.controller.db.latest_run(JOB, "east")
    assert replay.version == 2 and replay.checkpoint == "fresh" and "logic changed" in replay.checkpoint_reason
    assert replay.estimate_rehearsal_s is not None and replay.catch_up_s is not None
    assert p.controller.db.lineage(replay.lineage).root.startswith("s3a://tidegate-east/")
    # the replayed output after T equals the batch recomputation of the new query
    handover = replay.output_start_us
    p.controller.stop(JOB, "east")
    east_storage.assert_equals_batch_path(p, JOB, handover, tmp_path, spec=v2, from_us=handover, min_rows=20)


def test_batch_reference_is_written_beside_the_stream_and_a_missing_window_fails_the_check(
    airflow_home, platform_factory, event_log, tmp_path
):
    p = platform_factory("reference", event_log)
    p.controller.deploy(p.spec_file())
    t = start_at(event_log)
    p.controller.start(JOB, "east", mode="custom", at=t)
    p.wait_caught_up(JOB, "east")
    p.controller.stop(JOB, "east")
    conf = {"job": JOB, "region": "east", "from": format_time_us(t)}
    done, out = run(airflow_home, "tidegate_batch_reference", conf, p)
    assert done.returncode == 0, out[-6000:]
    beside = p.config.region("east").job_dir(JOB) / "batch_reference"
    assert any(beside.glob("*/output/date=*/hour=*/batch-0/*.parquet"))

    # remove one window row from the streaming output: the GX task fails and names it
    lineage = p.controller.db.lineages(JOB, "east")[-1]
    victim = sorted(
        (p.config.region("east").job_dir(JOB) / "lineages" / lineage.id / "output").glob(
            "date=*/hour=*/batch-*/*.parquet"
        ),
        key=lambda f: pq.ParquetFile(f).metadata.num_rows,
    )[-1]
    table = pq.read_table(victim)
    gone = table.slice(0, 1).to_pylist()[0]

    def rewrite(rows):  # as Spark wrote it (INT96 timestamps), minus the checksum Spark would refuse
        pq.write_table(rows, victim, use_deprecated_int96_timestamps=True)
        (victim.parent / f".{victim.name}.crc").unlink(missing_ok=True)

    rewrite(table.slice(1))
    done, out = run(airflow_home, "tidegate_batch_reference", conf, p)
    assert done.returncode != 0, out[-6000:]
    # the failed task recorded what the suite found, in the words its log and the UI show
    check = p.controller.db.checks(JOB)[0]
    window = format_time_us(int(gone["window_start"].timestamp() * 1_000_000))
    assert not check.success and check.target == "east"
    assert "missing 1 window row" in check.summary and window in check.summary and gone["deviceId"] in check.summary

    # a doubled row fails the same check, naming the window twice counted
    rewrite(__import__("pyarrow").concat_tables([table, table.slice(0, 1)]))
    check = subprocess.run(
        [sys.executable, "-m", "tidegate.cli", "output", "check", JOB, "--target", "east", "--from", format_time_us(t)],
        env=p.cli_env(),
        cwd=str(p.root),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert check.returncode == 1
    assert "doubled 1 window row" in check.stderr and window in check.stderr and "(2 rows)" in check.stderr


def restarted_by_dag(airflow_home, p, job: str, event_log):
    """``job`` started at ``start_at(event_log)`` in east, caught up, restarted by ``tidegate_restart``
    (which succeeds), then stopped: (its start time, the restart's check)."""
    t = start_at(event_log)
    p.controller.start(job, "east", mode="custom", at=t)
    p.wait_caught_up(job, "east")
    done, out = run(airflow_home, "tidegate_restart", {"job": job, "region": "east", "mode": "last-stopped"}, p)
    assert done.returncode == 0, out[-6000:]
    p.controller.stop(job, "east")
    return t, p.controller.db.checks(job)[0]


def checked_without_one_row(p, job: str, output: str, t: int):
    """The first row of the biggest batch file of ``output`` in east's latest lineage removed,
    then ``tidegate output check`` from ``t``: (the file's rows before, the finished check, which must fail)."""
    lineage = p.controller.db.lineages(job, "east")[-1]
    folder = p.config.region("east").job_dir(job) / "lineages" / lineage.id / output
    victim = max(folder.glob("date=*/hour=*/batch-*/*.parquet"), key=lambda f: pq.ParquetFile(f).metadata.num_rows)
    table = pq.read_table(victim)
    pq.write_table(table.slice(1), victim, use_deprecated_int96_timestamps=True)
    (victim.parent / f".{victim.name}.crc").unlink(missing_ok=True)
    checked = subprocess.run(
        [sys.executable, "-m", "tidegate.cli", "output", "check", job, "--target", "east", "--from", format_time_us(t)],
        env=p.cli_env(),
        cwd=str(p.root),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert checked.returncode == 1, checked.stderr[-3000:]
    return table, checked


def test_a_job_with_two_outputs_is_restarted_by_dag_and_both_are_checked(airflow_home, platform_factory, event_log):
    """The archive and the alerts of jobs/device_archive_and_alerts.yaml (alerts every minute,
    above 15 °C, so the span has both): the restart's GX check compares each with the batch
    path's, and an archive row gone fails the check naming the archive."""
    p = platform_factory("outputs", event_log)
    steps = yaml.safe_load((REPO / "jobs" / "device_archive_and_alerts.yaml").read_text())["steps"]
    steps[1] |= {"window": {"kind": "tumbling", "size": "1m"}, "filter": "temperature > 15"}
    job = "device-archive-and-alerts"
    p.controller.deploy(p.spec_file("device_archive_and_alerts.yaml", steps=steps))
    t, check = restarted_by_dag(airflow_home, p, job, event_log)
    assert check.success and "(archive)" in check.summary and "(output)" in check.summary, check.summary

    _, checked = checked_without_one_row(p, job, "outputs/archive", t)
    assert "archive" in checked.stderr and "missing 1" in checked.stderr, checked.stderr[-3000:]


def test_a_reference_join_is_restarted_by_dag_and_its_event_rows_are_checked(airflow_home, platform_factory, event_log):
    """jobs/device_over_limit.yaml, a per-event job (no window): it hands over by input
    position, and its rows — each reading with its device's site and the snapshot joined — are
    final once the watermark passes their time, so the restart's GX check compares them with
    the batch path's; a row gone fails the check naming its time and position."""
    p = platform_factory("reference-join", event_log)
    snapshot = p.config.home / "reference" / "devices" / "valid_from=2000-01-01T00:00:00Z"
    snapshot.mkdir(parents=True)
    sites = "\n".join(f"{name},hall-{'ab'[i % 2]},{20 + i}" for i, name in enumerate(device_names(8)))
    (snapshot / "devices.csv").write_text(f"deviceId,site,max_temperature\n{sites}\n")
    reference = yaml.safe_load((REPO / "jobs" / "device_over_limit.yaml").read_text())["reference"]
    job = "device-over-limit"
    p.controller.deploy(p.spec_file("device_over_limit.yaml", reference=reference | {"path": str(snapshot.parent)}))
    t, check = restarted_by_dag(airflow_home, p, job, event_log)
    compared = int(re.search(r"\((\d+) rows compared\)", check.summary).group(1))
    assert check.success and compared > 100, check.summary

    table, checked = checked_without_one_row(p, job, "output", t)
    assert set(table.column("site").to_pylist()) <= {"hall-a", "hall-b"}  # every reading found its device
    row = table.slice(0, 1).to_pylist()[0]
    at = row["system_time"].replace(tzinfo=row["system_time"].tzinfo or UTC)
    assert f"missing 1 event row: at {format_time_us(int(at.timestamp() * 1_000_000))}" in checked.stderr
    assert f"partition={row['partition']} offset={row['offset']}" in checked.stderr, checked.stderr[-3000:]


def test_a_join_of_two_steps_and_a_steps_reference_join_are_restarted_by_dag_and_both_outputs_checked(
    airflow_home, platform_factory, event_log
):
    """jobs/device_hour_peaks.yaml in 10-second and one-minute windows, with a step that joins
    each 10-second row with its device's limit at the window's end (a named output): the
    restart's GX check compares the join's rows and the enriched ones with the batch path's, by
    their time and every column; a joined row gone fails the check."""
    p = platform_factory("step-join", event_log)
    snapshot = p.config.home / "reference" / "devices" / "valid_from=2000-01-01T00:00:00Z"
    snapshot.mkdir(parents=True)
    sites = "\n".join(f"{name},hall-{'ab'[i % 2]},{20 + i}" for i, name in enumerate(device_names(8)))
    (snapshot / "devices.csv").write_text(f"deviceId,site,max_temperature\n{sites}\n")
    tens, hours, peaks = yaml.safe_load((REPO / "jobs" / "device_hour_peaks.yaml").read_text())["steps"]
    over = yaml.safe_load((REPO / "jobs" / "device_minutes_over_limit.yaml").read_text())["steps"][1]
    steps = [
        tens | {"window": {"kind": "tumbling", "size": "10s"}},
        hours | {"window": {"kind": "tumbling", "size": "1m"}},
        peaks | {"join": peaks["join"] | {"within": "DATEDIFF(second, tens, hours) BETWEEN 0 AND 50"}},
        over | {"from": "tens", "reference": over["reference"] | {"path": str(snapshot.parent)}},
    ]
    job = "device-hour-peaks"
    sinks = {"output": {"step": "peaks"}, "outputs": {"over": {"step": "over_limit"}}}
    p.controller.deploy(p.spec_file("device_hour_peaks.yaml", steps=steps, sinks=sinks))
    t, check = restarted_by_dag(airflow_home, p, job, event_log)
    assert check.success and "(over)" in check.summary and "(output)" in check.summary, check.summary

    _, checked = checked_without_one_row(p, job, "output", t)
    assert "missing 1" in checked.stderr, checked.stderr[-3000:]


def test_a_join_of_two_logs_deployed_by_dag_and_replayed_by_a_planned_stop_passes_its_completeness_check(
    airflow_home, platform_factory, tmp_path
):
    """jobs/orders_payments_two_logs.yaml through the DAGs: orders and payments in two logs, each
    input with its own fields, time format and policy; deployed, stopped, more logged in both,
    then a planned stop to a changed query replays both logs from the last output minus the
    look-back, and GX checks the join rows after the handover against the batch path."""
    orders, payments = tmp_path / "orders", tmp_path / "payments"
    last = fill_two_logs(orders, payments, 90, seed=43, start_us=parse_time_us("2026-01-01T00:00:00Z"))
    p = platform_factory("two-logs", orders)
    job = "orders-payments-two-logs"

    def spec_file(version: int, **changes) -> Path:
        data = yaml.safe_load((REPO / "jobs" / "orders_payments_two_logs.yaml").read_text())
        data["inputs"]["orders"]["source"] = {"event_log": str(orders)}
        data["inputs"]["payments"]["source"] = {"event_log": str(payments)}
        data |= {"version": version, "source": {"max_events_per_batch": 600}} | changes
        path = p.root / f"{job}-v{version}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    done, out = run(
        airflow_home,
        "tidegate_deploy",
        {
            "spec": str(spec_file(1)),
            "regions": ["east"],
            "mode": "custom",
            "at": "2026-01-01T00:08:00Z",
            "keep_running": False,
        },
        p,
    )
    assert done.returncode == 0, out[-6000:]
    assert p.controller.status_of(job, "east").caught_up
    first = p.controller.db.latest_run(job, "east")
    assert "orders=" in first.input and "payments=" in first.input  # the run names both logs
    p.controller.stop(job, "east")
    fill_two_logs(orders, payments, 90, seed=44, start_us=last + 1_000_000)

    select = yaml.safe_load((REPO / "jobs" / "orders_payments_two_logs.yaml").read_text())["select"]
    select["short_by"] = "orders.amount - coalesce(payments.paid, 0)"
    done, out = run(
        airflow_home,
        "tidegate_planned_stop",
        {
            "new_spec": str(spec_file(2, select=select)),
            "region": "east",
            "allowed_delay_s": 900,
            "mode": "last-stopped",
            "rehearsal": False,
            "timeout_s": 900,
        },
        p,
    )
    assert done.returncode == 0, out[-6000:]
    procedure = p.controller.db.procedures(job)[0]
    assert procedure.kind == "planned-stop" and procedure.result == "passed", procedure.detail
    checks = {c.target: c for c in p.controller.db.checks(job)}
    assert set(checks) == {"east", "consumer"} and all(c.success for c in checks.values())
    compared = int(re.search(r"\((\d+) rows compared\)", checks["east"].summary).group(1))
    assert compared > 50, checks["east"].summary  # the join rows after the handover, not an empty span
    p.controller.stop(job, "east")
