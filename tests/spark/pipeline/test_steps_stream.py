"""Steps on the streaming path: the example jobs (windows shortened to fit a small log) as a
Structured Streaming query stopped and restarted from its checkpoint with more input, equal to
the batch path; and a fresh lineage started at ``T`` that reads back the look-back — which
adds up along the steps — emits exactly the batch path's rows after ``T``."""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_support import fill, fill_orders
from support import assert_stream_is_the_batch_path_and_a_replay_its_tail
from tidegate.eventtime.durations import parse_time_us
from tidegate.jobspec import load_spec, parse_spec
from tidegate.spark.pipeline.runner import run_stream

pytestmark = [pytest.mark.spark, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[3]
MIN = 60_000_000


def shortened(example: str, first: dict, later: dict):
    """An example job with its steps' sizes changed (``first``/``later`` merged into them)."""
    job = load_spec(REPO / "jobs" / example).to_dict()
    steps = [job["steps"][0] | first, job["steps"][1] | later]
    return parse_spec(job | {"steps": steps, "policy": job["policy"] | {"late_arrival_tolerance": "30s"}})


SPECS = {
    "analytic_filter_window": lambda: shortened(
        "temperature_rises_hourly.yaml",
        {
            "analytics": {"previous": "LAG(temperature) OVER (PARTITION BY deviceId LIMIT DURATION(second, 30))"},
            "filter": "temperature - previous > 0.2",
        },
        {"window": {"kind": "tumbling", "size": "1m"}},
    ),
    "window_over_window": lambda: shortened(
        "device_busy_hours.yaml",
        {"window": {"kind": "tumbling", "size": "10s"}},
        {"window": {"kind": "hopping", "size": "2m", "hop": "1m"}},
    ),
    "windowed_join": lambda: shortened("orders_paid_per_hour.yaml", {}, {"window": {"kind": "tumbling", "size": "5m"}}),
    # two windows over one step (a fork): minutes per device beside hopping two-minute spans, and
    # the archive of every reading (per event, by its own time) as a third output
    "two_windows_over_one_step": lambda: forked(),
    # two windows of one input, and a per-event step over the second (busy spans in Fahrenheit)
    "two_windows_of_one_input": lambda: minutes_and_hours(),
    # two per-event steps of one input, each to its own output
    "two_filters_of_one_input": lambda: two_filters(),
    # LAG over a window step's rows: the 10-second means that rose since the device's last one
    "lag_over_window": lambda: lag_over_window(),
    # a reference join in the first step, its rows windowed per site in the next (snapshots: sites)
    "reference_then_window": lambda: shortened(
        "site_hours_over_limit.yaml", {}, {"window": {"kind": "tumbling", "size": "1m"}}
    ),
    # a reference join in a step over a window step's rows, each by its window's end; per site and minute next
    "window_then_reference": lambda: minutes_over_limit(),
    # a step joining two window steps' rows: the ten seconds that held each device's minute peak
    "join_of_two_steps": lambda: hour_peaks(),
}


def hour_peaks():
    """jobs/device_hour_peaks.yaml with 10-second and one-minute windows, joined within 50 seconds."""
    job = load_spec(REPO / "jobs" / "device_hour_peaks.yaml").to_dict()
    tens, hours, peaks = job["steps"]
    within = "DATEDIFF(second, tens, hours) BETWEEN 0 AND 50"
    steps = [
        tens | {"window": {"kind": "tumbling", "size": "10s"}},
        hours | {"window": {"kind": "tumbling", "size": "1m"}},
        peaks | {"join": peaks["join"] | {"within": within}},
    ]
    return parse_spec(job | {"steps": steps, "policy": job["policy"] | {"late_arrival_tolerance": "30s"}})


def minutes_over_limit():
    """jobs/device_minutes_over_limit.yaml with 10-second peaks, each joined with its device's
    limit at the window's end, counted per site and minute."""
    job = load_spec(REPO / "jobs" / "device_minutes_over_limit.yaml").to_dict()
    minutes, over, hours = job["steps"]
    steps = [
        minutes | {"window": {"kind": "tumbling", "size": "10s"}},
        over,
        hours | {"window": {"kind": "tumbling", "size": "1m"}},
    ]
    return parse_spec(job | {"steps": steps, "policy": job["policy"] | {"late_arrival_tolerance": "30s"}})


def with_sites(spec, folder: Path):
    """``spec`` with its reference table — the first step's or a later step's — read from :func:`sites`."""
    job = spec.to_dict()
    path = str(sites(folder))
    if "reference" in job:
        return parse_spec(job | {"reference": job["reference"] | {"path": path}})
    steps = [s | {"reference": s["reference"] | {"path": path}} if "reference" in s else s for s in job["steps"]]
    return parse_spec(job | {"steps": steps})


def forked():
    """The archive example with a second window beside its alerts, both reading the readings;
    the archive, the alerts and the spans each its own output."""
    job = load_spec(REPO / "jobs" / "device_archive_and_alerts.yaml").to_dict()
    spans = {"name": "spans", "from": "readings", "window": {"kind": "hopping", "size": "2m", "hop": "1m"},
             "group_by": ["deviceId"], "aggregates": {"readings": "count(*)", "low": "min(temperature)"}}  # fmt: skip
    alerts = job["steps"][1] | {"window": {"kind": "tumbling", "size": "1m"}, "filter": "temperature > 15"}
    return parse_spec(
        job
        | {"steps": [job["steps"][0], alerts, spans], "policy": job["policy"] | {"late_arrival_tolerance": "30s"}}
        | {"sinks": job["sinks"] | {"outputs": job["sinks"]["outputs"] | {"spans": {"step": "spans"}}}}
    )


def minutes_and_hours():
    """jobs/device_minutes_and_hours.yaml with 10-second and hopping two-minute windows, both
    over the readings, and the busy spans (a per-event step over the second) as the output."""
    job = load_spec(REPO / "jobs" / "device_minutes_and_hours.yaml").to_dict()
    tens, hourly, busy = job["steps"]
    steps = [
        tens | {"window": {"kind": "tumbling", "size": "10s"}},
        hourly | {"window": {"kind": "hopping", "size": "2m", "hop": "1m"}},
        busy | {"filter": "n >= 3 AND avg_t > 20"},
    ]
    return parse_spec(job | {"steps": steps, "policy": job["policy"] | {"late_arrival_tolerance": "30s"}})


def lag_over_window():
    """jobs/device_minutes_and_hours.yaml's 10-second means, then LAG over them per device (a
    step with analytic functions over a window step's rows): the means above the one before."""
    job = load_spec(REPO / "jobs" / "device_minutes_and_hours.yaml").to_dict()
    tens = job["steps"][0] | {"window": {"kind": "tumbling", "size": "10s"}}
    rising = {
        "name": "rising",
        "from": "tens",
        "analytics": {"prev": "LAG(avg_t) OVER (PARTITION BY deviceId LIMIT DURATION(second, 30))"},
        "filter": "avg_t > prev",
        "select": {"deviceId": "deviceId", "avg_t": "avg_t", "prev": "prev"},
    }
    return parse_spec(
        job
        | {"steps": [tens, rising], "policy": job["policy"] | {"late_arrival_tolerance": "30s"}}
        | {"sinks": {"output": {"step": "rising"}, "outputs": {"tens": {"step": "tens"}}}}
    )


def two_filters():
    """The archive example's readings beside a second per-event step of the same input: the
    warm readings, the job's output."""
    job = load_spec(REPO / "jobs" / "device_archive_and_alerts.yaml").to_dict()
    warm = {"name": "warm", "from": "input", "filter": "temperature > 20", "select": ["deviceId", "temperature"]}
    return parse_spec(
        job
        | {"steps": [job["steps"][0], warm], "policy": job["policy"] | {"late_arrival_tolerance": "30s"}}
        | {"sinks": {"output": {"step": "warm"}, "outputs": {"archive": {"step": "readings"}}}}
    )


def sites(folder: Path) -> Path:
    """Two snapshots of the generator's devices: every device over 20 °C in hall-a or hall-b
    from the start, then, ten minutes into the log, over 21 °C in hall-c or hall-d."""
    from tidegate.inputs.event_log.traffic import device_names

    for valid_from, limit, halls in (("2000-01-01T00:00:00Z", 20, "ab"), ("2026-01-01T00:10:00Z", 21, "cd")):
        snapshot = folder / f"valid_from={valid_from}"
        snapshot.mkdir(parents=True)
        rows = [f"{name},hall-{halls[i % 2]},{limit}" for i, name in enumerate(device_names(8))]
        (snapshot / "devices.csv").write_text("deviceId,site,max_temperature\n" + "\n".join(rows) + "\n")
    return folder


def filled(name: str, event_log: Path, after_us: int | None = None) -> int:
    """Twenty minutes of input, after ``after_us`` (None: from the start of 2026); the last
    arrival written, about."""
    start = parse_time_us("2026-01-01T00:00:00Z") if after_us is None else after_us + 1_000_000
    if name == "windowed_join":
        return fill_orders(event_log, 60, seed=3 if after_us is None else 4, start_us=start)
    fill(event_log, 2400, seed=5 if after_us is None else 6, start_us=start)  # 2 events a second
    return start + 20 * MIN


@pytest.mark.parametrize("name", list(SPECS))
def test_the_stream_across_a_restart_and_a_replay_from_t_minus_lookback_equal_the_batch_path(
    spark, tmp_path, name, monkeypatch
):
    spec = SPECS[name]()
    if spec.reference_tables:
        monkeypatch.setenv("TIDEGATE_REFERENCE_DIRS", str(tmp_path))
        spec = with_sites(spec, tmp_path / "devices")
    event_log = tmp_path / "event-log"
    last = filled(name, event_log)
    per_batch = (30, 45) if name == "windowed_join" else (300, 450)  # about 100 events, or 2,400, per run
    first = run_stream(spark, spec, event_log, tmp_path / "run", extra_options={"maxEventsPerBatch": str(per_batch[0])})
    last = filled(name, event_log, last)
    second = run_stream(
        spark, spec, event_log, tmp_path / "run", extra_options={"maxEventsPerBatch": str(per_batch[1])}
    )
    assert first.batches + second.batches >= 4

    named = {"archive": "system_time"} if name == "two_filters_of_one_input" else None
    named = {"spans": "window_end", "archive": "system_time"} if name == "two_windows_over_one_step" else named
    named = {"tens": "window_end"} if name in ("two_windows_of_one_input", "lag_over_window") else named
    named = {"site_hours": "window_end"} if name == "window_then_reference" else named
    time_column = "window_end" if spec.output_window is not None else "system_time"
    reference = assert_stream_is_the_batch_path_and_a_replay_its_tail(
        spark, spec, event_log, tmp_path, last - 30 * MIN, time_column=time_column, min_after=3, named=named
    )
    assert reference.count() > 10
    if spec.reference_tables:  # rows of both snapshots: the join follows each row's time
        assert {r.site for r in reference.select("site").distinct().collect()} == {
            "hall-a",
            "hall-b",
            "hall-c",
            "hall-d",
        }
