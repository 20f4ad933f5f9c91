"""``tidegate query policy-check`` — the exact CSV contract, run on the Spark engine — and
``tidegate query test`` on a sample."""

from __future__ import annotations

import csv
import json

import pytest

from support import load_golden
from tidegate.cli import main

pytestmark = pytest.mark.spark
GOLDEN = load_golden()


def write_golden_csv(path, with_z: bool):
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["partition", "arrival_time", "event_time", "device", "note"])
        for i, (e, a, d) in enumerate(GOLDEN.events):
            z = "Z" if with_z else ""
            w.writerow([0, f"{GOLDEN.date}T{a}:00{z}", f"{GOLDEN.date}T{e}:00{z}", d, f"n{i}"])


def args_for(variant):
    p = variant.policy
    out = [
        "--out-of-order",
        f"{p.out_of_order_tolerance_us // 1_000_000}s",
        "--late",
        f"{p.late_arrival_tolerance_us // 1_000_000}s",
    ]
    out += ["--no-early"] if p.early_arrival_window_us is None else ["--early", "5m"]
    return out + (["--over", "device"] if variant.over else [])


@pytest.mark.parametrize("variant", GOLDEN.variants, ids=lambda v: v.name)
def test_policy_check_reproduces_the_golden_case_through_the_cli(spark, tmp_path, variant):
    src, dst = tmp_path / "in.csv", tmp_path / "out.csv"
    write_golden_csv(src, with_z=variant.name != "plain")  # both time spellings are accepted
    assert main(["query", "policy-check", "--input", str(src), "--output", str(dst), *args_for(variant)]) == 0
    with dst.open(newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == [
        "partition",
        "arrival_time",
        "event_time",
        "device",
        "note",
        "action",
        "reason",
        "system_timestamp",
        "watermark",
    ]
    assert [r[4] for r in rows[1:]] == [f"n{i}" for i in range(len(GOLDEN.events))]  # same order
    for row, (action, reason, system, watermark) in zip(rows[1:], variant.expect, strict=True):
        assert row[5:7] == [action, reason]
        assert row[7] == (f"{GOLDEN.date}T{system}:00Z" if system else "")
        assert row[8] == f"{GOLDEN.date}T{watermark}:00Z"


def test_policy_check_refuses_an_unreadable_time_naming_the_line(tmp_path, capsys):
    src = tmp_path / "in.csv"
    src.write_text("partition,arrival_time,event_time\n0,2026-01-01T12:00:00Z,noon\n")
    code = main(
        [
            "query",
            "policy-check",
            "--input",
            str(src),
            "--output",
            str(tmp_path / "o.csv"),
            "--out-of-order",
            "0s",
            "--late",
            "5s",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "line 2" in err and "noon" in err and "ISO-8601" in err


def test_test_query_prints_windows_outcomes_and_quarantine(spark, tmp_path, capsys):
    sample = tmp_path / "sample.jsonl"
    events = [
        {"deviceId": "dev-1", "eventTime": "2026-01-01T12:00:10Z", "temperature": 20.0, "humidity": 40.0},
        {"deviceId": "dev-1", "eventTime": "2026-01-01T12:00:50Z", "temperature": 22.0, "humidity": 41.0},
        {"deviceId": "dev-2", "eventTime": "2026-01-01T12:01:05Z", "temperature": 30.0, "humidity": 50.0},
        # arrives 10 minutes after its time: later than the job's 2m tolerance
        {
            "deviceId": "dev-2",
            "eventTime": "2026-01-01T12:00:30Z",
            "temperature": 31.0,
            "humidity": 50.0,
            "_arrival_time": "2026-01-01T12:10:30Z",
        },
    ]
    sample.write_text("\n".join(json.dumps(e) for e in events) + "\n{broken\n")
    code = main(
        [
            "query",
            "test",
            "--spec",
            "jobs/device_fleet.yaml",
            "--input",
            str(sample),
            "--work-dir",
            str(tmp_path / "run"),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    # dev-1 12:00, dev-2 12:01, and the late event adjusted to arrival − 2m: 12:08
    assert "== output (3 rows) ==" in out
    windows = [line.split()[:5] for line in out.splitlines() if line.startswith("2026-01-01")]
    assert [w[1] + " " + w[4] for w in windows[:3]] == ["12:00:00 dev-1", "12:01:00 dev-2", "12:08:00 dev-2"]
    assert any("adjusted" in line and " late" in line for line in out.splitlines())
    assert "== quarantine (1 rows) ==" in out and "unparseable_payload" in out


def test_test_query_runs_the_join_example_on_its_sample_in_output_order(spark, tmp_path, capsys):
    code = main(
        [
            "query",
            "test",
            "--spec",
            "jobs/order_payments.yaml",
            "--input",
            "jobs/samples/orders_payments.jsonl",
            "--work-dir",
            str(tmp_path / "run"),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "== output (7 rows) ==" in out
    rows = [line.split() for line in out.split("== per-event outcomes ==")[0].splitlines() if line.startswith("  ")]
    # orderId and row time per row: o1 twice (two payments), o2 unpaid at 12:02 + 15 min,
    # o3 twice (a duplicate payment), o4 twice unpaid (two orders; its payment came first)
    assert [(r[6], r[5]) for r in rows] == [
        ("o1", "12:05:00"),
        ("o1", "12:14:00"),
        ("o2", "12:17:00"),
        ("o3", "12:25:00"),
        ("o3", "12:25:00"),
        ("o4", "12:45:00"),
        ("o4", "12:45:00"),
    ]


def test_test_query_runs_the_two_log_join_example_on_its_sample_each_input_by_its_own_policy(spark, tmp_path, capsys):
    code = main(
        [
            "query",
            "test",
            "--spec",
            "jobs/orders_payments_two_logs.yaml",
            "--input",
            "jobs/samples/orders_payments_two_logs.jsonl",
            "--work-dir",
            str(tmp_path / "run"),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "== output (7 rows) ==" in out
    output, outcomes = out.split("== per-event outcomes ==")
    rows = [line.split() for line in output.splitlines() if line.startswith("  ")]
    assert [(r[6], r[5]) for r in rows] == [
        ("o1", "12:05:00"),
        ("o1", "12:14:00"),
        ("o2", "12:17:00"),
        ("o3", "12:25:00"),
        ("o3", "12:25:00"),
        ("o4", "12:45:00"),
        ("o4", "12:45:00"),
    ]
    judged = {(r[0], r[1]): r for r in (line.split() for line in outcomes.splitlines()) if r and r[0].isdigit()}
    # 90 s late: an order (tolerance 2m) is kept, a payment (tolerance 30s) is moved to arrival − 30 s
    assert judged[("0", "2")][6] == "kept"
    assert judged[("2", "2")][6:8] == ["adjusted", "late"] and judged[("2", "2")][9] == "12:21:00"


@pytest.mark.parametrize(
    "job, sample, rows",
    [
        (
            "temperature_rises_hourly",
            "device_rises",
            [
                ["12:00:00", "13:00:00", "d1", "2", "47.0"],
                ["12:00:00", "13:00:00", "d2", "1", "27.0"],
                ["13:00:00", "14:00:00", "d1", "1", "60.0"],
            ],
        ),
        (
            "device_busy_hours",
            "device_rises",
            [
                ["11:00:00", "12:00:00", "1", "1", "1"],
                ["12:00:00", "13:00:00", "4", "7", "2"],
                ["13:00:00", "14:00:00", "1", "1", "1"],
            ],
        ),
        (
            "orders_paid_per_hour",
            "orders_paid",
            [["11:00:00", "12:00:00", "1", "30.0"], ["12:00:00", "13:00:00", "3", "151.5"]],
        ),
    ],
    ids=["analytic-filter-window", "window-over-window", "windowed-join"],
)
def test_test_query_runs_the_steps_examples_on_their_samples(spark, tmp_path, capsys, job, sample, rows):
    """Each example's last step, its rows on the boundaries the job's comments describe."""
    code = main(
        [
            "query",
            "test",
            "--spec",
            f"jobs/{job}.yaml",
            "--input",
            f"jobs/samples/{sample}.jsonl",
            "--work-dir",
            str(tmp_path / "run"),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out.split("== per-event outcomes ==")[0]
    got = [line.split() for line in out.splitlines() if line.startswith("2026-")]
    assert [[r[1], r[3], *r[4:]] for r in got] == rows


def test_test_query_runs_the_reference_example_each_reading_with_the_snapshot_of_its_time(spark, tmp_path, capsys):
    code = main(
        [
            "query",
            "test",
            "--spec",
            "jobs/device_over_limit.yaml",
            "--input",
            "jobs/samples/device_sites.jsonl",
            "--work-dir",
            str(tmp_path / "run"),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "== output (5 rows) ==" in out
    rows = [line.split() for line in out.split("== per-event outcomes ==")[0].splitlines() if line.startswith("  ")]
    # [device, time, site, snapshot]: 12:00:00 exactly joins the 12:00 snapshot (limit 25, not 30);
    # 13:00:00 exactly joins 13:00's (limit 30 again: not over); dev-4 is in no snapshot and dev-2
    # is gone from 13:00's, so they are kept (left join) with no site
    assert [(r[4], r[3], r[7], r[10]) for r in rows] == [
        ("dev-1", "12:00:00", "hall-a", "12:00:00"),
        ("dev-2", "12:06:00", "hall-b", "12:00:00"),
        ("dev-4", "12:20:00", "None", "12:00:00"),
        ("dev-1", "12:59:59", "hall-a", "12:00:00"),
        ("dev-2", "13:05:00", "None", "13:00:00"),
    ]


def test_test_query_runs_the_reference_then_window_example_per_site_and_hour(spark, tmp_path, capsys):
    """jobs/site_hours_over_limit.yaml: a reading exactly at 12:00:00 joins the 12:00 snapshot
    (limit 25: over) and falls in (11:00, 12:00]; one exactly at 13:00:00 joins 13:00's (limit
    30: not over); dev-4 is in no snapshot and dev-2 not in 13:00's (inner join: dropped)."""
    code = main(
        [
            "query",
            "test",
            "--spec",
            "jobs/site_hours_over_limit.yaml",
            "--input",
            "jobs/samples/device_sites.jsonl",
            "--work-dir",
            str(tmp_path / "run"),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out.split("== per-event outcomes ==")[0]
    rows = [line.split() for line in out.splitlines() if line.startswith("2026-")]
    assert sorted([r[1], r[3], *r[4:]] for r in rows) == [
        ["11:00:00", "12:00:00", "hall-a", "1", "27.0"],
        ["12:00:00", "13:00:00", "hall-a", "1", "28.0"],
        ["12:00:00", "13:00:00", "hall-b", "1", "36.0"],
    ]


def test_test_query_shows_each_output_of_the_archive_and_alerts_example(spark, tmp_path, capsys):
    """The job's own output (the hourly alerts) and its named archive, each with its rows."""
    code = query_test("jobs/device_archive_and_alerts.yaml", tmp_path)
    assert code == 0
    out = capsys.readouterr().out.split("== per-event outcomes ==")[0]
    alerts, archive = out.split("== output archive, step readings (9 rows) ==")
    rows = [line.split() for line in alerts.splitlines() if line.startswith("2026-")]
    assert [[r[1], r[3], *r[4:]] for r in rows] == [
        ["12:00:00", "13:00:00", "d1", "4", "47.0"],
        ["12:00:00", "13:00:00", "d2", "1", "27.0"],
        ["13:00:00", "14:00:00", "d1", "1", "60.0"],
    ]
    # [partition, offset, date, time, device, temperature, humidity]: each reading once, in log order
    rows = [line.split() for line in archive.splitlines() if line.split()[:1] == ["0"]]
    assert [(r[3], r[4], r[5]) for r in rows] == [
        ("12:00:00", "d1", "20.0"),
        ("12:05:00", "d1", "30.0"),
        ("12:10:00", "d1", "31.0"),
        ("12:10:00", "d2", "20.0"),
        ("12:45:00", "d2", "21.0"),
        ("12:50:00", "d2", "27.0"),
        ("12:55:00", "d1", "40.0"),
        ("13:00:00", "d1", "47.0"),
        ("13:01:00", "d1", "60.0"),
    ]


def test_test_query_runs_two_windows_of_one_input_and_a_per_event_step_over_one(spark, tmp_path, capsys):
    """jobs/device_minutes_and_hours.yaml: the 10-minute and the hourly windows both read the
    readings; the busy hours (3 readings or more) in Fahrenheit, each at its hour's end."""
    code = query_test("jobs/device_minutes_and_hours.yaml", tmp_path)
    assert code == 0
    out = capsys.readouterr().out.split("== per-event outcomes ==")[0]
    busy, tens = out.split("== output tens, step tens (6 rows) ==")
    # [partition, offset, date, time, device, °F]: d1 20, 30, 31, 40, 47 → 4 readings in 12:00–13:00
    # (13:00 exactly is in it), mean 37 °C; d2 20, 21, 27 → 3, mean 22.67 °C; d1's 13:00–14:00 has 1
    rows = [line.split() for line in busy.splitlines() if "2026-01-01" in line]
    assert [r[3:] for r in rows] == [["13:00:00", "d1", "98.6"], ["13:00:00", "d2", "72.8"]]
    assert [r[:2] for r in rows] == [["NaN", "NaN"]] * 2  # a window's row has no one position
    # [start date, start, end date, end, device, n, mean °C]
    rows = [line.split() for line in tens.splitlines() if line.startswith("2026-")]
    assert [[r[1], r[3], *r[4:]] for r in rows] == [
        ["11:50:00", "12:00:00", "d1", "1", "20.0"],
        ["12:00:00", "12:10:00", "d1", "2", "30.5"],
        ["12:00:00", "12:10:00", "d2", "1", "20.0"],
        ["12:40:00", "12:50:00", "d2", "2", "24.0"],
        ["12:50:00", "13:00:00", "d1", "2", "43.5"],
        ["13:00:00", "13:10:00", "d1", "1", "60.0"],
    ]


def query_test(spec: str, tmp_path) -> int:
    """``tidegate query test`` of ``spec`` over the rises sample."""
    return main(["query", "test", "--spec", spec, "--input", "jobs/samples/device_rises.jsonl",
                 "--work-dir", str(tmp_path / "run")])  # fmt: skip
